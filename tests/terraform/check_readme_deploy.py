"""The documented AWS deploy path, extracted from the one-account guide
(docs/src/guides/aws-account.md: the block between `<!-- deploy-aws: begin -->` and
`<!-- deploy-aws: end -->`, then `enforce-aws`), not copied here, checked against what it names:

  * it has at most 10 commands (a command ends at a line that does not continue with `\\` or `|`);
  * every `terraform -chdir=DIR` is an example directory, every `-var NAME=` a variable of it, and
    every required variable of it without a default is given;
  * every `terraform output -raw NAME` is an output of that example;
  * every `scripts/...` it runs exists and is executable;
  * every `tagwarden SUBCOMMAND` is one the CLI reference (docs/src/reference/cli.md) documents;
  * every value comes from the cluster (`oc get ...`) or from an earlier command: no `<...>`
    placeholder, and each `$VAR` it reads is set by an earlier line (or is AWS_REGION, exported).

Run by scripts/test-terraform with the python-hcl2 venv: `check_readme_deploy.py ROOT`. Prints the
command count. The block is also executed, against moto: readme_deploy/run.py.
"""
import os
import re
import sys

import hcl2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import readme_blocks  # noqa: E402 (beside this file)

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
GUIDE, CLI = readme_blocks.GUIDE, "docs/src/reference/cli.md"
guide = open(os.path.join(ROOT, GUIDE)).read()
failures = []
commands = [c for c, _ in readme_blocks.commands(readme_blocks.block(guide, "deploy-aws", GUIDE))]
# The switch from audit to enforce, right after: its apply is checked as the deploy's is.
commands += [c for c, _ in readme_blocks.commands(readme_blocks.block(guide, "enforce-aws", GUIDE))]

if len(commands) > 10:
    failures.append(f"{len(commands)} commands, more than 10")


def example_blocks(d):
    out = {"variable": {}, "output": {}}
    for f in os.listdir(d):
        if f.endswith(".tf"):
            with open(os.path.join(d, f)) as fh:
                doc = hcl2.load(fh)
            for kind in out:
                for block in doc.get(kind, []):
                    out[kind].update({k.strip("\"" ): v for k, v in block.items()})
    return out


# The reference's headings: "## `tagwarden sweep`".
cli = set(re.findall(r"^#+ `tagwarden (\w+)", open(os.path.join(ROOT, CLI)).read(), re.M))
unset, _ = readme_blocks.unset_reads(commands)
failures += [f"${var} is read before any command sets it: {c}" for var, c in unset]
applied_dirs = set()
for c in commands:
    if readme_blocks.placeholders(c):
        failures.append(f"a placeholder to fill in: {c}")
    for d in re.findall(r"terraform -chdir=(\S+)", c):
        path = os.path.join(ROOT, d)
        if not os.path.isdir(path):
            failures.append(f"terraform -chdir={d}: no such directory")
            continue
        ex = example_blocks(path)
        if re.search(r"terraform -chdir=\S+ apply", c):
            applied_dirs.add(d)
            given = set(re.findall(r"-var '?([a-z_]+)=", c))
            for v in given - set(ex["variable"]):
                failures.append(f"{d}: -var {v} is not a variable of the example")
            for v, b in ex["variable"].items():
                if "default" not in b and v not in given:
                    failures.append(f"{d}: required variable {v} is not given")
        for o in re.findall(r"output -raw ([a-z_]+)", c):
            if o not in ex["output"]:
                failures.append(f"{d}: output {o} does not exist")
    for s in re.findall(r"(?<![\w/])(scripts/[\w./-]+)", c):
        p = os.path.join(ROOT, s)
        if not (os.path.isfile(p) and os.access(p, os.X_OK)):
            failures.append(f"{s} is not an executable script")
    for sub in re.findall(r"(?:^|[|(]\s*|\s)tagwarden (\w+)", c):
        if sub not in cli:
            failures.append(f"tagwarden {sub} is not a documented subcommand ({sorted(cli)})")
if not applied_dirs:
    failures.append("the block applies no example")

for f in failures:
    print("FAIL", f)
print(f"{GUIDE} deploy-aws + enforce-aws: {len(commands)} commands, {len(failures)} problem(s)")
sys.exit(1 if failures else 0)
