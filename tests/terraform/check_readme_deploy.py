"""Issue 36: README.md's AWS deploy path, extracted from the README (the block between
`<!-- deploy-aws: begin -->` and `<!-- deploy-aws: end -->`), not copied here, checked against what
it names:

  * it has at most 10 commands (a command ends at a line that does not continue with `\\` or `|`);
  * every `terraform -chdir=DIR` is an example directory, every `-var NAME=` a variable of it, and
    every required variable of it without a default is given;
  * every `terraform output -raw NAME` is an output of that example;
  * every `scripts/...` it runs exists and is executable;
  * every `tagwarden SUBCOMMAND` is one the README's CLI section documents;
  * every value comes from the cluster (`oc get ...`) or from an earlier command: no `<...>`
    placeholder, and each `$VAR` it reads is set by an earlier line (or is AWS_REGION, exported).

Run by scripts/test-terraform with the python-hcl2 venv: `check_readme_deploy.py ROOT`. Prints the
command count. What it does not do (yet): run the block against moto; see the issue-36 report.
"""
import os
import re
import sys

import hcl2

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
readme = open(os.path.join(ROOT, "README.md")).read()
m = re.search(r"<!-- deploy-aws: begin -->\n```sh\n(.*?)```\n<!-- deploy-aws: end -->", readme, re.S)
failures = []
if not m:
    sys.exit("FAIL README.md has no deploy-aws block (<!-- deploy-aws: begin --> ```sh ... ``` <!-- deploy-aws: end -->)")
lines = [l for l in m.group(1).splitlines() if l.strip() and not l.strip().startswith("#")]
commands, cur = [], ""
for l in lines:
    code = re.sub(r"\s+#.*$", "", l).rstrip()
    cur += " " + code.rstrip("\\").strip()
    if not (code.endswith("\\") or code.endswith("|")):
        commands.append(cur.strip())
        cur = ""
if cur:
    commands.append(cur.strip())

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


cli = set(re.findall(r"^### `tagwarden (\w+)", readme, re.M))
assigned = {"AWS_REGION"}
applied_dirs = set()
for c in commands:
    for var in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", c):
        if var not in assigned:
            failures.append(f"${var} is read before any command sets it: {c}")
    for var in re.findall(r"(?:^|\s|export\s)([A-Za-z_][A-Za-z0-9_]*)=", c):
        assigned.add(var)
    if "<" in re.sub(r"<<|<\(|--from -", "", c) and re.search(r"<[a-z_-]+>", c):
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
print(f"README deploy-aws: {len(commands)} commands, {len(failures)} problem(s)")
sys.exit(1 if failures else 0)
