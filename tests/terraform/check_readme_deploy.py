"""The documented AWS path, extracted from the docs (readme_blocks.EXECUTED: the one-account guide's
deploy-aws, enforce-aws, sweep-aws, day2-aws and upgrade-aws blocks, docs/src/guides/aws-account.md,
and docs/src/operations/uninstall.md's uninstall-aws), not copied here, checked against what it names:

  * deploy-aws has at most 10 commands (a command ends at a line that does not continue with `\\`
    or `|`; a here-document belongs to its command);
  * Terraform's values are in files, not on command lines: no `-var`/`-var-file` anywhere (an
    upgrade or destroy without the first apply's flags would go back to the defaults); a
    `cat > DIR/terraform.tfvars <<EOF` (or `DIR/*.auto.tfvars`) writes them, and each value it sets
    is a variable of DIR; every `terraform -chdir=DIR apply|plan|destroy` comes after such a file,
    and every required variable of DIR without a default is set in it;
  * a `sed ... 's/^NAME ...' FILE` edits a tfvars file an earlier command wrote, on a line that
    file has, and NAME is a variable;
  * every `terraform -chdir=DIR` is an example directory; every `terraform output -raw|-json NAME`
    is an output of that example;
  * every `scripts/...` it runs exists and is executable;
  * every `tagwarden SUBCOMMAND` is one the CLI reference (docs/src/lookup/cli.md) documents;
  * every value comes from the cluster (`oc get ...`) or from an earlier command: no `<...>`
    placeholder, and each `$VAR` it reads is set by an earlier line (or is AWS_REGION, exported).

Run by scripts/test-terraform with the python-hcl2 venv: `check_readme_deploy.py ROOT`. Prints the
command counts. The blocks are also executed, against moto: readme_deploy/run.py.
"""
import os
import re
import sys

import hcl2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import readme_blocks  # noqa: E402 (beside this file)

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
CLI = "docs/src/lookup/cli.md"
failures = []
per_block = []
for path, name in readme_blocks.EXECUTED:
    cmds = [c for c, _ in readme_blocks.commands(readme_blocks.block(open(os.path.join(ROOT, path)).read(), name, path))]
    per_block.append((name, cmds))
counts = {name: len(cmds) for name, cmds in per_block}
commands = [c for _, cmds in per_block for c in cmds]

if counts["deploy-aws"] > 10:
    failures.append(f"deploy-aws has {counts['deploy-aws']} commands, more than 10")


def example_blocks(d):
    out = {"variable": {}, "output": {}}
    for f in os.listdir(d):
        if f.endswith(".tf"):
            with open(os.path.join(d, f)) as fh:
                doc = hcl2.load(fh)
            for kind in out:
                for block in doc.get(kind, []):
                    out[kind].update({k.strip("\""): v for k, v in block.items()})
    return out


# The reference's headings: "## `tagwarden sweep`".
cli = set(re.findall(r"^#+ `tagwarden (\w+)", open(os.path.join(ROOT, CLI)).read(), re.M))
unset, _ = readme_blocks.unset_reads(commands)
failures += [f"${var} is read before any command sets it: {c}" for var, c in unset]
applied_dirs = set()
tfvars = {}  # path as written -> {name: value text}
for c in commands:
    first = c.split("\n", 1)[0]
    if readme_blocks.placeholders(first):
        failures.append(f"a placeholder to fill in: {first}")
    for path, body, _ in readme_blocks.heredocs(c):
        if re.search(r"(^|/)(terraform\.tfvars|[\w.-]+\.auto\.tfvars)$", path):
            d = os.path.dirname(path)
            if not os.path.isdir(os.path.join(ROOT, d)):
                failures.append(f"{path}: no such directory {d}")
                continue
            keys = readme_blocks.tfvars_keys(body)
            for k in set(keys) - set(example_blocks(os.path.join(ROOT, d))["variable"]):
                failures.append(f"{path}: {k} is not a variable of {d}")
            tfvars[os.path.normpath(path)] = keys
    for m in re.finditer(r"\bsed\b.*?'s([/|#])\^(\w+)[^']*'\s+(\S+)", first):
        key, path = m.group(2), os.path.normpath(m.group(3))
        if path not in tfvars:
            failures.append(f"sed edits {path}, which no earlier command wrote: {first}")
        elif key not in tfvars[path]:
            failures.append(f"sed edits the line {key} = ..., which {path} does not have: {first}")
    if re.search(r"terraform\b.*\s-var(-file)?[\s=]", first):
        failures.append(f"a -var on the command line (the values belong in terraform.tfvars): {first}")
    for d in re.findall(r"terraform -chdir=(\S+)", first):
        path = os.path.join(ROOT, d)
        if not os.path.isdir(path):
            failures.append(f"terraform -chdir={d}: no such directory")
            continue
        ex = example_blocks(path)
        if re.search(r"terraform -chdir=\S+ (apply|plan|destroy)\b", first) and not re.search(r" apply \S+\.tfplan\b", first):
            applied_dirs.add(d)
            given = {k for p, keys in tfvars.items() if os.path.dirname(p) == os.path.normpath(d) for k in keys}
            if not given:
                failures.append(f"{d}: no terraform.tfvars written before: {first}")
            for v, b in ex["variable"].items():
                if "default" not in b and v not in given:
                    failures.append(f"{d}: required variable {v} is not in its tfvars")
        for o in re.findall(r"output -(?:raw|json) ([a-z_]+)", first):
            if o not in ex["output"]:
                failures.append(f"{d}: output {o} does not exist")
    for s in re.findall(r"(?<![\w/])(scripts/[\w./-]+)", first):
        p = os.path.join(ROOT, s)
        if not (os.path.isfile(p) and os.access(p, os.X_OK)):
            failures.append(f"{s} is not an executable script")
    for sub in re.findall(r"(?:^|[|(]\s*|\s)tagwarden (\w+)", first):
        if sub not in cli:
            failures.append(f"tagwarden {sub} is not a documented subcommand ({sorted(cli)})")
if not applied_dirs:
    failures.append("the blocks apply no example")

for f in failures:
    print("FAIL", f)
print(f"{readme_blocks.GUIDE} + {readme_blocks.UNINSTALL}: " + ", ".join(f"{n} {k}" for n, k in counts.items())
      + f" commands; {len(failures)} problem(s)")
sys.exit(1 if failures else 0)
