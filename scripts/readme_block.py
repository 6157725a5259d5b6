#!/usr/bin/env python3
"""Writes reports, as a run printed them, into a document between `<!-- MARKER:start -->`
and `<!-- MARKER:end -->`, under a line that says when, where and how they were measured:
the date (UTC), this repository's commit (and whether its tree had uncommitted changes),
the machine (cores, CPU model, memory) and the command. What is there is never edited by
hand; scripts/check_figures.py dates every such block against the code it measures.

    python3 scripts/readme_block.py [--markdown] [--file DOC] MARKER "COMMAND" REPORT [REPORT ...]

Reports are put in a code block as printed, or, with --markdown, as they are (tables the
scripts print in Markdown). DOC defaults to the one document, README.md or a page of docs/,
that holds the block (so a script need not know which page of the guide shows its figures). Used by scripts/perf.sh,
scripts/real-server.sh, scripts/vs-vllm.sh, scripts/vllm-checks.sh and scripts/vllm-smoke.sh
(each with --write-readme).
"""
import datetime
import os
import subprocess
import sys


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()


def machine():
    """`2 cores (AMD EPYC 7B13), 23 GiB`: what the figures were measured on."""
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                memory = f", {int(line.split()[1]) / 2**20:.0f} GiB"
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores{f' ({model})' if model else ''}{memory}"


def provenance():
    commit = git("rev-parse", "--short=10", "HEAD") or "unknown"
    if commit.isdigit():
        # check_figures.py does not take a plain number for a commit.
        commit = git("rev-parse", "HEAD")
    # The documents the blocks are written into do not count.
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!*.md")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    tree = " with uncommitted changes" if dirty else ""
    return f"Written {now}, commit {commit}{tree}, on {machine()}."


def holder(start, end):
    """The document that holds the block, among README.md and docs/*.md."""
    docs = ["README.md"] + sorted(os.path.join("docs", n) for n in os.listdir("docs") if n.endswith(".md"))
    found = [d for d in docs if start in (t := open(d).read()) and end in t]
    if len(found) != 1:
        sys.exit(f"readme_block.py: {len(found)} documents ({', '.join(found) or 'none'}) of README.md and "
                 f"docs/*.md hold a {start} ... {end} block; exactly one must (or pass --file)")
    return found[0]


def main():
    args = sys.argv[1:]
    markdown = "--markdown" in args
    args = [a for a in args if a != "--markdown"]
    doc = None
    if args[:1] == ["--file"]:
        doc, args = args[1], args[2:]
    if len(args) < 3:
        sys.exit(__doc__)
    marker, command, reports = args[0], args[1], args[2:]
    lines = []
    for report in reports:
        lines += open(report).read().splitlines() + [""]
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    if doc is None:
        doc = holder(start, end)
    text = open(doc).read()
    if start not in text or end not in text:
        sys.exit(f"readme_block.py: {doc} has no {start} ... {end} block")
    report = "\n".join(lines).strip()
    if not markdown:
        report = f"```\n{report}\n```"
    body = (f"{start}\n<!-- written by `{command}`; do not edit -->\n\n{provenance()}\n\n"
            f"{report}\n\n{end}")
    text = text[:text.index(start)] + body + text[text.index(end) + len(end):]
    open(doc, "w").write(text)
    print(f"readme_block.py: wrote {marker} into {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
