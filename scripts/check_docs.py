#!/usr/bin/env python3
"""Fails on a relative link in README.md, ARCHITECTURE.md or the guide (docs/**/*.md) whose
file does not exist, or whose #anchor names no heading of the Markdown file it points to.

MkDocs checks the links between the guide's pages when it builds the book (scripts/docs.sh,
strictly); this checks what it cannot: the links out of the book into the repository, and
the links of the two documents outside it. Headings are turned into anchors as GitHub and
MkDocs both do for plain text: lower case, spaces to hyphens, punctuation but hyphens and
underscores dropped.

    python3 scripts/check_docs.py              # the check (.ci/run runs it via scripts/docs.sh)
    python3 scripts/check_docs.py --self-test  # the check against made-up documents

Exit status 0 when every link resolves, 1 otherwise (each broken link is printed as
FILE:LINE: TARGET: why).
"""

import os
import re
import sys
import tempfile

LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"`[^`]*`")


def documents(root):
    for name in ("README.md", "ARCHITECTURE.md"):
        if os.path.exists(os.path.join(root, name)):
            yield name
    for folder, _, files in sorted(os.walk(os.path.join(root, "docs"))):
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.relpath(os.path.join(folder, f), root)


def prose_lines(text, spans=False):
    """(line number, line) outside fenced and indented code blocks, code spans removed (or,
    with spans, only their backticks)."""
    fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence or line.startswith("    "):
            continue
        yield n, line.replace("`", "") if spans else CODE_SPAN.sub("", line)


def anchors(path):
    slugs = set()
    with open(path) as f:
        for _, line in prose_lines(f.read(), spans=True):
            m = HEADING.match(line)
            if m:
                title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1)).lower()
                slugs.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return slugs


def problems(root):
    found = []
    for doc in documents(root):
        with open(os.path.join(root, doc)) as f:
            text = f.read()
        for n, line in prose_lines(text):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto:, ...
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(root, os.path.dirname(doc), path)) if path \
                    else os.path.join(root, doc)
                if not os.path.exists(full):
                    found.append(f"{doc}:{n}: {target}: no such file")
                elif anchor and full.endswith(".md") and anchor not in anchors(full):
                    found.append(f"{doc}:{n}: {target}: {os.path.relpath(full, root)} has no heading #{anchor}")
    return found


def self_test():
    with tempfile.TemporaryDirectory(prefix="bench-docs-") as root:
        os.makedirs(os.path.join(root, "docs"))
        write = lambda name, text: open(os.path.join(root, name), "w").write(text)
        write("docs/a.md", "# A page\n\n## Its `code` part\n")
        write("README.md", "[a](docs/a.md) [b](docs/a.md#its-code-part) `[c](nowhere.md)`\n"
                           "    [d](indented-code.md)\n[e](https://example.com)\n")
        assert problems(root) == [], problems(root)
        write("docs/b.md", "[x](missing.md)\n\n[y](a.md#no-such)\n")
        got = problems(root)
        assert got == ["docs/b.md:1: missing.md: no such file",
                       "docs/b.md:3: a.md#no-such: docs/a.md has no heading #no-such"], got
    print("check_docs.py: self-test passed", file=sys.stderr)


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = problems(root)
    for p in found:
        print(f"check_docs.py: {p}", file=sys.stderr)
    if found:
        return 1
    print(f"check_docs.py: every relative link of {len(list(documents(root)))} documents resolves", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
