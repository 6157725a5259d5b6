#!/usr/bin/env python3
"""Writes reports, as a run printed them, into README.md between `<!-- MARKER:start -->` and
`<!-- MARKER:end -->`, with the command that made them; what is there is never edited by
hand. Used by scripts/vllm-checks.sh and scripts/vllm-smoke.sh (`--write-readme`).

    python3 scripts/readme_block.py MARKER "COMMAND" REPORT [REPORT ...]
"""
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    marker, command, reports = sys.argv[1], sys.argv[2], sys.argv[3:]
    lines = []
    for report in reports:
        lines += open(report).read().splitlines() + [""]
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    text = open("README.md").read()
    if start not in text or end not in text:
        sys.exit(f"readme_block.py: README.md has no {start} ... {end} block")
    body = (f"{start}\n<!-- written by `{command}`; do not edit -->\n\n```\n"
            + "\n".join(lines).rstrip() + f"\n```\n\n{end}")
    text = text[:text.index(start)] + body + text[text.index(end) + len(end):]
    open("README.md", "w").write(text)


if __name__ == "__main__":
    main()
