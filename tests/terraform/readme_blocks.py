"""The documented command blocks, as the docs hold them: a fenced ```sh block between
`<!-- NAME: begin -->` and `<!-- NAME: end -->` in a Markdown file of the book (docs/src/): the AWS
path's in the one-account guide (GUIDE: deploy, enforce, a sweep by hand, day 2, upgrade), the
uninstall's in docs/src/operations/uninstall.md; EXECUTED lists them in the order they run. One
reader for the static check (check_readme_deploy.py) and the executed doc test
(readme_deploy/run.py), so both see the same commands. Standard library only: it runs under either
venv.
"""
import re

GUIDE = "docs/src/guides/aws-account.md"
UNINSTALL = "docs/src/operations/uninstall.md"
# The blocks the doc test runs, in this order, in one shell: (file, block name).
EXECUTED = [(GUIDE, "deploy-aws"), (GUIDE, "enforce-aws"), (GUIDE, "sweep-aws"), (GUIDE, "day2-aws"),
            (GUIDE, "upgrade-aws"), (UNINSTALL, "uninstall-aws")]


def block(text, name, where=GUIDE):
    """The block's lines, verbatim (comments and continuations included)."""
    m = re.search(rf"<!-- {re.escape(name)}: begin -->\n```sh\n(.*?)```\n<!-- {re.escape(name)}: end -->", text, re.S)
    if not m:
        raise SystemExit(f"FAIL {where} has no {name} block (<!-- {name}: begin --> ```sh ... ``` <!-- {name}: end -->)")
    return m.group(1).splitlines()


HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")


def commands(lines):
    """The commands of a block, each as (text joined on one line without comments, its verbatim lines).

    A command ends at a line that does not continue with `\\` or `|`; comment-only and blank lines
    belong to no command. A here-document (`<<EOF`, `<<'EOF'`, `<<-EOF`) belongs to its command up to
    its delimiter line, verbatim (a `#` in it is text): the text has its lines after the first
    line's, joined by newlines."""
    out, cur, raw = [], "", []
    lines = list(lines)
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.strip().startswith("#"):
            continue
        code = re.sub(r"\s+#.*$", "", line).rstrip()
        cur += " " + code.rstrip("\\").strip()
        raw.append(line)
        for strip_tabs, _, delim in HEREDOC.findall(code):
            while True:
                if i >= len(lines):
                    raise SystemExit(f"FAIL a here-document <<{delim} is not closed: {cur.strip()}")
                body = lines[i]
                i += 1
                raw.append(body)
                if (body.lstrip("\t") if strip_tabs else body) == delim:
                    cur += "\n" + delim
                    break
                cur += "\n" + body
        if not (code.endswith("\\") or code.endswith("|")):
            out.append((cur.strip(), raw))
            cur, raw = "", []
    if cur:
        out.append((cur.strip(), raw))
    return out


def heredocs(c):
    """The files a command writes from a here-document: [(path, body, expands)] for
    `cat > PATH <<EOF` (or `>>`; `expands` is False for a quoted delimiter, whose `$` stay as they are)."""
    out = []
    first, _, rest = c.partition("\n")
    m = re.search(r"\bcat\s*>>?\s*(\S+)\s*<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2", first)
    if m:
        body = rest.rsplit("\n", 1)[0] if rest.endswith("\n" + m.group(3)) or rest == m.group(3) else rest
        out.append((m.group(1), "" if rest == m.group(3) else body, not m.group(2)))
    return out


def tfvars_keys(body):
    """The top-level assignments of a tfvars file: {name: value text} (nested blocks not looked into)."""
    keys, depth = {}, 0
    for line in body.split("\n"):
        code = re.sub(r"\s*#.*$", "", line)
        if depth == 0:
            m = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", code)
            if m:
                keys[m.group(1)] = m.group(2).strip()
        depth += code.count("{") + code.count("[") - code.count("}") - code.count("]")
    return keys


def unset_reads(cmds, assigned=("AWS_REGION",)):
    """Each `$VAR` a command reads before an earlier command (or itself, left of the read) set it:
    [(var, command)]. `assigned` grows with the variables the commands set (for the next block)."""
    assigned = set(assigned)
    problems = []
    for c in cmds:
        for var in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", c):
            if var not in assigned:
                problems.append((var, c))
        assigned.update(re.findall(r"(?:^|\s|export\s)([A-Za-z_][A-Za-z0-9_]*)=", c))
    return problems, assigned


def placeholders(c):
    """`<name>`-style values to fill in by hand (`<<`, `<(` and `--from -` are shell, not placeholders)."""
    return re.findall(r"<[a-z_-]+>", re.sub(r"<<|<\(|--from -", "", c))
