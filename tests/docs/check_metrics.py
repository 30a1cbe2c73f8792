"""The metrics reference (docs/src/lookup/metrics.md) names exactly the metrics the function
emits: the names in the code's metric tables (the one table both clouds' encoders read, in
crates/core/src/report/; crates/azure/src/metrics.rs; the organization hub's `(name, unit, n)` rows)
against the backticked names of the page's table and its organization paragraph. A metric added
to the code and not to the page, or one the page keeps after the code dropped it, fails.

Usage: check_metrics.py <repository root>
"""

import glob
import os
import re
import sys


def code_metrics(root: str) -> dict:
    """Each metric name the code emits, with the files that emit it (test modules excluded)."""
    found = {}

    def scan(path, pattern):
        text = open(path).read()
        cut = text.find("#[cfg(test)]")
        for m in re.finditer(pattern, text if cut < 0 else text[:cut]):
            found.setdefault(m.group(1), set()).add(os.path.relpath(path, root))

    # The encoders' tables: rows `("Name", value)` or `("Name", |c| c.field)`.
    report = sorted(glob.glob(os.path.join(root, "crates/core/src/report/*.rs")))
    for rel in [os.path.relpath(p, root) for p in report] + ["crates/azure/src/metrics.rs"]:
        scan(os.path.join(root, rel), r'\(\s*"([A-Z][A-Za-z]+)",\s*(?:self\.|c\.|\|c\||metrics\.|would|in_line|drifted)')
        # Rows with a unit (`("Name", "Milliseconds")`), and Azure's documents (`doc("Name", …)`).
        scan(os.path.join(root, rel), r'\(\s*"([A-Z][A-Za-z]+)",\s*"(?:Count|Milliseconds|Seconds|None)"')
        scan(os.path.join(root, rel), r'\bdoc\(\s*"([A-Z][A-Za-z]+)"')
    # The organization hub's per-account metrics: `("Name", "Count" | "Seconds", n)`.
    for path in glob.glob(os.path.join(root, "crates/aws/src/organization*"), recursive=False) + glob.glob(
        os.path.join(root, "crates/aws/src/organization/**/*.rs"), recursive=True
    ):
        if os.path.isfile(path):
            scan(path, r'\(\s*"([A-Z][A-Za-z]+)",\s*"(?:Count|Seconds)"')
    return found


def documented(root: str) -> set:
    text = open(os.path.join(root, "docs/src/lookup/metrics.md")).read()
    names = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([A-Z][A-Za-z]+)`", line.split("|")[1]))
    # The organization hub's metrics, named in the paragraph that introduces them.
    m = re.search(r"An organization hub adds (.*?)\(below\)", text, re.S)
    if m:
        names.update(re.findall(r"`([A-Z][A-Za-z]+)`", m.group(1)))
    return names


def main(root: str) -> int:
    code, docs = code_metrics(root), documented(root)
    problems = [f"{n}: emitted by {', '.join(sorted(code[n]))}, missing from docs/src/lookup/metrics.md" for n in sorted(set(code) - docs)]
    problems += [f"{n}: in docs/src/lookup/metrics.md, emitted by no metric table of the code" for n in sorted(docs - set(code))]
    for p in problems:
        print("FAIL", p)
    print(f"metrics: {len(code)} emitted by the code, {len(docs)} documented, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
