"""The documented command blocks, as the docs hold them: a fenced ```sh block between
`<!-- NAME: begin -->` and `<!-- NAME: end -->` in a Markdown file of the book (docs/src/): the AWS
deploy path's in the one-account guide (GUIDE), the uninstall's in docs/src/operations/uninstall.md. One reader for the static check
(check_readme_deploy.py) and the executed doc test (readme_deploy/run.py), so both see the same
commands. Standard library only: it runs under either venv.
"""
import re

GUIDE = "docs/src/guides/aws-account.md"
UNINSTALL = "docs/src/operations/uninstall.md"


def block(text, name, where=GUIDE):
    """The block's lines, verbatim (comments and continuations included)."""
    m = re.search(rf"<!-- {re.escape(name)}: begin -->\n```sh\n(.*?)```\n<!-- {re.escape(name)}: end -->", text, re.S)
    if not m:
        raise SystemExit(f"FAIL {where} has no {name} block (<!-- {name}: begin --> ```sh ... ``` <!-- {name}: end -->)")
    return m.group(1).splitlines()


def commands(lines):
    """The commands of a block, each as (text joined on one line without comments, its verbatim lines).

    A command ends at a line that does not continue with `\\` or `|`; comment-only and blank lines
    belong to no command."""
    out, cur, raw = [], "", []
    for line in lines:
        if not line.strip() or line.strip().startswith("#"):
            continue
        code = re.sub(r"\s+#.*$", "", line).rstrip()
        cur += " " + code.rstrip("\\").strip()
        raw.append(line)
        if not (code.endswith("\\") or code.endswith("|")):
            out.append((cur.strip(), raw))
            cur, raw = "", []
    if cur:
        out.append((cur.strip(), raw))
    return out


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
