"""Every internal link of the docs resolves: README.md and the book's pages (docs/src/**/*.md).

  * a relative link `[text](path)` or `[text](path#anchor)` names a file or directory that exists;
  * an `#anchor` (in the same page or another Markdown file) is one of that file's headings, by
    mdBook's rule: the heading's text without its Markdown (code, emphasis, links), lower-cased,
    whitespace to `-`, every character but letters, digits, `-` and `_` dropped; a repeated heading
    gets `-1`, `-2`, … (GitHub's rule for README.md is the same for these headings);
  * a book page links only to pages listed in docs/src/SUMMARY.md (mdBook renders no other), and
    never out of docs/src/ (mdBook would turn `../../infra/aws/README.md` into a dead `.html` link:
    name such files as code instead);
  * `{{#include FILE:ANCHOR}}` names a file that exists and holds `ANCHOR: ANCHOR`;
  * with the built book (docs/book/, from `mdbook build docs`), every heading id computed here is
    one mdBook wrote, so the rule above is mdBook's own.

Links to other sites (http:, https:, mailto:) are not followed: the check runs offline.
Standard library only. usage: check_links.py [ROOT]; exits 1 listing every broken link.
"""
import glob
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
SRC = os.path.join(ROOT, "docs", "src")
BOOK = os.path.join(ROOT, "docs", "book")

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
INCLUDE = re.compile(r"\{\{#include\s+([^}:\s]+)(?::([A-Za-z0-9_-]+))?\s*\}\}")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text):
    """(line number, line) outside fenced code blocks, inline code removed."""
    fenced = False
    for n, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def strip_code(line):
    return re.sub(r"(`+)(?:(?!\1).)+\1", "", line)


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])", "", text)  # _emphasis_, not snake_case
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch.lower())
        elif ch.isspace():
            out.append("-")
    return "".join(out)


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, ids = {}, set()
        for _, line in prose_lines(open(path).read()):
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            ids.add(s if n == 0 else f"{s}-{n}")
        _anchors[path] = ids
    return _anchors[path]


def summary_pages():
    text = open(os.path.join(SRC, "SUMMARY.md")).read()
    return {os.path.normpath(os.path.join(SRC, t)) for t in LINK.findall(text) if t.endswith(".md")}


def main():
    files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(SRC, "**", "*.md"), recursive=True))
    listed = summary_pages()
    problems, links = [], 0
    for path in files:
        rel = os.path.relpath(path, ROOT)
        in_book = path.startswith(SRC + os.sep)
        if in_book and path not in listed and os.path.basename(path) != "SUMMARY.md":
            problems.append(f"{rel}: not listed in docs/src/SUMMARY.md, so mdBook does not build it")
        text = open(path).read()
        for n, line in prose_lines(text):
            for m in INCLUDE.finditer(line):
                target = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
                links += 1
                if not os.path.isfile(target):
                    problems.append(f"{rel}:{n}: include {m.group(1)}: no such file")
                elif m.group(2) and f"ANCHOR: {m.group(2)}" not in open(target).read():
                    problems.append(f"{rel}:{n}: include {m.group(1)}:{m.group(2)}: no `ANCHOR: {m.group(2)}` in it")
            prose = strip_code(line)
            for target in LINK.findall(prose) + IMAGE.findall(prose):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # http:, https:, mailto: — not followed offline
                links += 1
                file_part, _, anchor = target.partition("#")
                dest = path if not file_part else os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                if not os.path.exists(dest):
                    problems.append(f"{rel}:{n}: {target}: no such file")
                    continue
                if in_book and file_part:
                    if not dest.startswith(SRC + os.sep):
                        problems.append(f"{rel}:{n}: {target}: leaves docs/src/ (mdBook cannot link it): name the file as code")
                        continue
                    if dest.endswith(".md") and dest not in listed:
                        problems.append(f"{rel}:{n}: {target}: not a page of the book (docs/src/SUMMARY.md)")
                if anchor:
                    if not dest.endswith(".md") or os.path.isdir(dest):
                        problems.append(f"{rel}:{n}: {target}: an anchor into a file that is not Markdown")
                    elif anchor not in anchors(dest):
                        problems.append(f"{rel}:{n}: {target}: no heading #{anchor} in {os.path.relpath(dest, ROOT)}")
    # The slug rule, held to mdBook's own output when the book is built.
    checked = 0
    if os.path.isdir(BOOK):
        for page in sorted(listed):
            html = os.path.join(BOOK, os.path.relpath(page, SRC))[:-3] + ".html"
            if not os.path.isfile(html):
                problems.append(f"{os.path.relpath(page, ROOT)}: mdBook wrote no {os.path.relpath(html, ROOT)}")
                continue
            written = set(re.findall(r'<h[1-6] id="([^"]+)"', open(html).read()))
            for a in anchors(page):
                checked += 1
                if a not in written:
                    problems.append(f"{os.path.relpath(page, ROOT)}: heading id {a!r} computed here is not one mdBook wrote")
    for p in problems:
        print("FAIL", p)
    print(f"docs links: {len(files)} files, {links} internal links, {checked} heading ids checked against the built book, {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
