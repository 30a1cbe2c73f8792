"""The guides' commands and Terraform values, held to what they name (docs/src/guides/*.md, and the
operations pages), so that a renamed variable, output, subcommand or flag fails here rather than in
a reader's shell. The one-account guide's blocks are also executed against moto
(tests/terraform/readme_deploy/run.py); the others cannot be (no Organizations, StackSets or Azure
emulator for Terraform here), so this is their check:

  * a ```hcl block right after `<!-- tfvars: DIR -->` is a terraform.tfvars for the root module DIR:
    each value it sets is a variable of DIR, and every variable of DIR without a default is set;
    after `<!-- module: DIR -->` (or `<!-- module: DIR partial -->`) its top-level arguments are
    DIR's variables (with `source`, `providers`, … allowed), all required ones unless partial;
    any other ```hcl block in a guide is refused (say what it is);
  * in a ```sh or ```console block: no `-var`/`-var-file` on a terraform command line (the values
    are a terraform.tfvars, kept with the state: an apply without the first one's flags would go
    back to the defaults); `terraform -chdir=DIR` names a directory with *.tf files; each
    `output -raw NAME` / `output -json NAME` is an output of DIR; each `scripts/NAME` is an
    executable script; each `tagwarden SUB` (and `tagwarden organization SUB`) is a command the CLI
    reference documents (docs/src/lookup/cli.md, `## \\`tagwarden SUB\\``), and each `--flag` given
    to it appears in that command's section.

usage: check_guides.py [ROOT]   (python-hcl2: run with .tools/venv-hcl2/bin/python); exits 1 on any problem.
"""
import glob
import os
import re
import sys

import hcl2

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
PAGES = sorted(glob.glob(os.path.join(ROOT, "docs/src/guides/*.md"))) + sorted(glob.glob(os.path.join(ROOT, "docs/src/operations/*.md")))
META_ARGS = {"source", "version", "providers", "count", "for_each", "depends_on"}

_modules = {}


def module(d):
    """{variables: {name: block}, outputs: set()} of the root or child module in directory d."""
    if d not in _modules:
        variables, outputs = {}, set()
        for f in sorted(glob.glob(os.path.join(ROOT, d, "*.tf"))):
            with open(f) as fh:
                doc = hcl2.load(fh)
            for b in doc.get("variable", []):
                variables.update({k.strip('"'): v for k, v in b.items()})
            for b in doc.get("output", []):
                outputs.update(k.strip('"') for k in b)
        _modules[d] = (variables, outputs)
    return _modules[d]


def cli_sections():
    text = open(os.path.join(ROOT, "docs/src/lookup/cli.md")).read()
    parts = re.split(r"^## `tagwarden (\w+)`\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def blocks(text):
    """(line, language, body, the marker comment right before it or None)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            marker = lines[k].strip() if k >= 0 and lines[k].strip().startswith("<!--") else None
            yield i + 1, m.group(1), "\n".join(lines[i + 1:j]), marker
            i = j
        i += 1


def top_level_keys(body):
    """The arguments set at the top level of a tfvars file or a module block's body."""
    keys, depth = [], 0
    for line in body.split("\n"):
        code = re.sub(r"#.*$", "", line)
        if depth == 0:
            m = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=", code)
            if m:
                keys.append(m.group(1))
        depth += code.count("{") + code.count("[") - code.count("}") - code.count("]")
    return keys


def commands(body):
    """Shell commands of a block: continuation lines joined, comments and prompts dropped."""
    out, cur = [], ""
    for line in body.split("\n"):
        line = re.sub(r"^\$ ", "", line)
        code = re.sub(r"(^|\s)#.*$", "", line).rstrip()
        cur += " " + code.rstrip("\\")
        if not code.endswith("\\"):
            if cur.strip():
                out.append(cur.strip())
            cur = ""
    return out


def main():
    problems = []
    sections = cli_sections()
    for page in PAGES:
        rel = os.path.relpath(page, ROOT)
        for line, lang, body, marker in blocks(open(page).read()):
            where = f"{rel}:{line}"
            if lang == "hcl":
                m = re.match(r"<!-- (tfvars|module): (\S+)( partial)? -->", marker or "")
                if not m:
                    if "/guides/" in page:
                        problems.append(f"{where}: an hcl block without <!-- tfvars: DIR --> or <!-- module: DIR -->")
                    continue
                kind, d, partial = m.group(1), m.group(2), bool(m.group(3))
                if not os.path.isdir(os.path.join(ROOT, d)):
                    problems.append(f"{where}: {d}: no such module")
                    continue
                variables, _ = module(d)
                if kind == "module" and re.match(r'\s*module\s+"', body):
                    body = body[body.index("{") + 1:body.rindex("}")]
                keys = [k for k in top_level_keys(body) if not (kind == "module" and k in META_ARGS)]
                for k in keys:
                    if k not in variables:
                        problems.append(f"{where}: {k} is not a variable of {d}")
                if not partial:
                    for v, b in variables.items():
                        if "default" not in b and v not in keys:
                            problems.append(f"{where}: {d}'s required variable {v} is not set")
            elif lang in ("sh", "console", ""):
                for c in commands(body):
                    if re.search(r"\bterraform\b.*\s-var(-file)?[\s=]", c):
                        problems.append(f"{where}: a -var on terraform's command line (the values belong in a terraform.tfvars, "
                                        f"or an upgrade without the same flags goes back to the defaults): {c}")
                    for d in re.findall(r"terraform -chdir=(\S+)", c):
                        if not glob.glob(os.path.join(ROOT, d, "*.tf")):
                            problems.append(f"{where}: terraform -chdir={d}: no Terraform there")
                            continue
                        _, outputs = module(d)
                        for o in re.findall(r"terraform -chdir=" + re.escape(d) + r" output -(?:raw|json) ([a-z_]+)", c):
                            if o not in outputs:
                                problems.append(f"{where}: {d} has no output {o}")
                    for s in re.findall(r"(?<![\w/.])(scripts/[\w.-]+)", c):
                        p = os.path.join(ROOT, s)
                        if not (os.path.isfile(p) and os.access(p, os.X_OK)):
                            problems.append(f"{where}: {s} is not an executable script")
                    for m in re.finditer(r"(?:^|[|(;&]\s*|\s)tagwarden ((?:organization )?\w+)([^|;&)]*)", c):
                        words = m.group(1).split()
                        sub = words[0]
                        if sub not in sections:
                            problems.append(f"{where}: tagwarden {sub} is not in the CLI reference")
                            continue
                        if sub == "organization" and len(words) > 1 and words[1] not in ("sweep", "status"):
                            problems.append(f"{where}: tagwarden organization {words[1]} is not in the CLI reference")
                        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", m.group(2)):
                            if flag not in sections[sub]:
                                problems.append(f"{where}: tagwarden {sub} {flag}: the CLI reference does not document it")
    for p in problems:
        print("FAIL", p)
    print(f"guides: {len(PAGES)} pages checked against the modules and the CLI reference, {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
