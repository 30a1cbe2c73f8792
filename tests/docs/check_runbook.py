"""The runbook (docs/src/operations/runbook.md) has a row for every alarm the Terraform creates:
each CloudWatch alarm of infra/aws/*.tf and infra/aws/modules/*/*.tf and each Azure Monitor alert
of infra/azure/*.tf, named by the part of its name after the deployment's prefix (`-write-failures`,
`-org-member-refused`, `-dead-letters-<topic>`), appears in a table row of the runbook's sections
for its cloud (headings starting `AWS` or `Azure`).

The names are read from the code: a literal name's suffix; a name built from `each.key` or
`each.value.name`, the keys or the `name`s of the map it iterates (the module's locals). A name
this script cannot resolve is a failure too, so a new way of naming alarms is noticed.

usage: check_runbook.py [ROOT]   (python-hcl2: .tools/venv-hcl2/bin/python); exits 1 on a missing row.
"""
import glob
import os
import re
import sys

import hcl2

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
ALARMS = {"aws_cloudwatch_metric_alarm": "alarm_name", "azurerm_monitor_metric_alert": "name"}


def suffix(name):
    """`${var.name}-${id}-write-failures` -> `-write-failures`; `${x}-org-${each.key}` -> `-org-`."""
    m = re.search(r"\}((?:-[a-z0-9]+)*-?)$", name.replace('"', ""))
    return m.group(1) if m else None


def locals_of(files):
    out = {}
    for f in files:
        with open(f) as fh:
            for b in hcl2.load(fh).get("locals", []):
                out.update(b)
    return out


def rows_of_runbook(cloud):
    """The table rows of the runbook's sections for that cloud (headings starting "AWS" or "Azure")."""
    text = open(os.path.join(ROOT, "docs/src/operations/runbook.md")).read()
    rows = []
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        if section.startswith(cloud):
            rows += [line for line in section.split("\n") if line.startswith("|")]
    return rows


def expected():
    """(module, alarm suffix) for every alarm the code creates; `<each>` where one alarm is made per
    item of a runtime list (Azure's dead-letter topics)."""
    out = []
    dirs = ["infra/aws"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "infra/aws/modules/*"))) + ["infra/azure"]
    for d in dirs:
        files = sorted(glob.glob(os.path.join(ROOT, d, "*.tf")))
        local = locals_of(files)
        text = "\n".join(open(f).read() for f in files)
        for f in files:
            with open(f) as fh:
                doc = hcl2.load(fh)
            for block in doc.get("resource", []):
                for rtype, resources in block.items():
                    if rtype.strip('"') not in ALARMS:
                        continue
                    for rname, body in resources.items():
                        name = str(body.get(ALARMS[rtype.strip('"')], "")).strip('"')
                        for_each = body.get("for_each")
                        keys = None
                        if isinstance(for_each, dict):
                            keys = list(for_each)
                        elif isinstance(for_each, str):
                            m = re.fullmatch(r"\$\{local\.(\w+)\}", for_each)
                            if m and isinstance(local.get(m.group(1)), dict):
                                keys = list(local[m.group(1)])
                            elif m:
                                keys = m.group(1)  # an expression: read below
                        if name == "${each.value.name}":
                            # A map of alarms whose entries carry `name = "${…}-suffix"`, and entries
                            # from a `for k, a in { key = … }` named after the key.
                            src = text[text.index(keys + " = merge("):]
                            src = src[:src.index("\n  )\n")]
                            for lit in re.findall(r'name\s*=\s*"(\$\{[^"]*\}-[a-z0-9-]+)"', src):
                                out.append((d, suffix(lit)))
                            for keyblock in re.findall(r"for k, a in \{(.*?)\n\s*\}\s*:\s*k =>", src, re.S):
                                for k in re.findall(r"^\s*(\w+)\s*=\s*\{", keyblock, re.M):
                                    out.append((d, "-" + k.replace("_", "-")))
                        elif "each.key" in name:
                            head = re.sub(r"\$\{(?:var|local)\.name\}", "", re.split(r"\$\{(?:replace\()?each\.key", name)[0])
                            tail = name.split("}")[-1]
                            if isinstance(keys, list):
                                out += [(d, head + k.strip('"').replace("_", "-") + tail) for k in keys]
                            else:
                                out.append((d, head + "<each>" + tail))
                        else:
                            s = suffix(name)
                            out.append((d, s if s else f"unresolved name {name!r} ({os.path.relpath(f, ROOT)} {rname})"))
    return out


def main():
    rows = {"infra/aws": rows_of_runbook("AWS"), "infra/azure": rows_of_runbook("Azure")}
    problems = []
    want = expected()
    for d, s in want:
        if s is None or s.startswith("unresolved"):
            problems.append(f"{d}: an alarm whose name this check cannot read: {s}")
            continue
        pattern = re.escape(s).replace(re.escape("<each>"), r"<[a-z]+>")
        cloud_rows = rows["infra/azure" if d.startswith("infra/azure") else "infra/aws"]
        if not any(re.search(pattern + r"(?![a-z0-9-])", r) for r in cloud_rows):
            problems.append(f"{d}: alarm `…{s}` has no row in docs/src/operations/runbook.md")
    for p in problems:
        print("FAIL", p)
    print(f"runbook: {len(want)} alarms of the Terraform, {len(problems)} without a row")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
