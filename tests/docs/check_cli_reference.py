"""The CLI reference (docs/src/lookup/cli.md) documents exactly the commands and flags the CLI
has: each subcommand of `tagwarden --help` has its `## \`tagwarden SUB\`` section, and every long
flag of `tagwarden SUB --help` (and of `tagwarden organization sweep|status --help`) appears in
that section, and every flag the section's synopsis gives exists. Run by scripts/test with the
all-features CLI the test build made. usage: check_cli_reference.py TAGWARDEN [ROOT]
"""
import os
import re
import subprocess
import sys

CLI = sys.argv[1]
ROOT = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else ".")
GENERIC = {"--help", "--version", "--verbose"}


def help_of(*args):
    return subprocess.run([CLI, *args, "--help"], capture_output=True, text=True, check=True).stdout


def subcommands(text):
    block = text.split("Commands:", 1)[1].split("\n\n", 1)[0]
    return [m for m in re.findall(r"^\s{2}(\w[\w-]*)\s", block, re.M) if m != "help"]


def flags(text):
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", text, re.M)) - GENERIC


ref = open(os.path.join(ROOT, "docs/src/lookup/cli.md")).read()
parts = re.split(r"^## `tagwarden (\w+)`\s*$", ref, flags=re.M)
sections = {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}
problems = []
for sub in subcommands(help_of()):
    if sub not in sections:
        problems.append(f"tagwarden {sub}: no section in the CLI reference")
        continue
    helps = [help_of(sub)]
    if "Commands:" in helps[0]:
        helps = [help_of(sub, s) for s in subcommands(helps[0])]
    have = set().union(*(flags(h) for h in helps))
    for f in sorted(have):
        if f not in sections[sub]:
            problems.append(f"tagwarden {sub} {f}: in --help, not in the CLI reference")
    synopsis = re.search(r"```text\n(.*?)```", sections[sub], re.S)
    for f in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", synopsis.group(1) if synopsis else "")) - GENERIC):
        if f not in have:
            problems.append(f"tagwarden {sub} {f}: in the CLI reference's synopsis, not in --help")
for p in problems:
    print("FAIL", p)
print(f"CLI reference: {len(sections)} commands against the CLI's --help, {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
