#!/usr/bin/env python3
"""Fails when a block of measured figures in the README or docs is stale.

A block of figures is written by the script that measured them, between
`<!-- NAME:start -->` and `<!-- NAME:end -->`, and names the commit(s) it was measured at
(`commit 81cc3e8`, `a dev build of f858656`, ...). FIGURES below says, for each block, which
code its figures measure and how many commits may change that code after the oldest commit
the block names before its figures no longer describe the code: past that bound this check
fails, naming the block, the commits since, and the command that measures it again.

A block that FIGURES does not know fails too (a new block must say what it measures), as
does a block that names no commit of this repository's history, and so do figures typed by
hand outside the blocks: a dated measurement, or a table row of figures.

    python3 scripts/check_figures.py              # the check (.ci/run runs it)
    python3 scripts/check_figures.py --self-test  # the check against a made-up repository

Exit status 0 when every block is fresh, 1 otherwise; a clone without the history to
judge (shallow) says so and exits 0: that is the clone, not the figures.
"""

import os
import re
import subprocess
import sys
import tempfile

# The code whose behaviour a block's figures measure, and how many commits may change it
# after the block's oldest commit. The bench binary's code: the host, the library crates,
# the SDK, the contract and the first-party plugins.
BENCH_CODE = ["host", "crates", "sdk", "wit", "plugins"]

FIGURES = {
    "parity-vllm": {
        "file": "docs/real-servers.md",
        "paths": BENCH_CODE + ["scripts/vs-vllm.sh", "scripts/parity.py"],
        "bound": 30,
        "again": "bash scripts/vs-vllm.sh parity --servers vllm --write-readme",
    },
    "vllm-checks": {
        "file": "docs/real-servers.md",
        "paths": BENCH_CODE + ["scripts/vllm-checks.sh", "scripts/vllm-server.sh"],
        "bound": 30,
        "again": "bash scripts/vllm-checks.sh --write-readme",
    },
    "vllm-smoke": {
        "file": "docs/real-servers.md",
        "paths": BENCH_CODE + ["scripts/vllm-smoke.sh", "scripts/vllm-checks.sh", "scripts/vs-vllm.sh"],
        "bound": 30,
        "again": "bash scripts/vllm-smoke.sh --write-readme",
    },
    "parity-mock-llama": {
        "file": "docs/parity.md",
        "paths": BENCH_CODE + ["scripts/vs-vllm.sh", "scripts/parity.py", "scripts/real-server.sh"],
        "bound": 30,
        "again": 'bash scripts/vs-vllm.sh parity --servers "mock llama" --write-readme',
    },
    "real-server": {
        "file": "docs/real-servers.md",
        "paths": BENCH_CODE + ["scripts/real-server.sh"],
        "bound": 30,
        "again": "bash scripts/real-server.sh --write-readme",
    },
    "vs-vllm": {
        "file": "docs/performance.md",
        "paths": BENCH_CODE + ["scripts/vs-vllm.sh"],
        "bound": 30,
        "again": "bash scripts/vs-vllm.sh --write-readme",
    },
}

# Written only once a GPU machine has run scripts/gpu-check.sh; then dated like the others.
FIGURES["gpu-check"] = {
    "file": "docs/offline.md",
    "paths": BENCH_CODE + ["scripts/gpu-check.sh"],
    "bound": 30,
    "again": "bash scripts/gpu-check.sh prepare, run on a GPU machine, then readme",
    "optional": True,
}

# scripts/perf.sh's blocks: the rows each measures (ROWS=...), all of the bench binary.
PERF_BLOCKS = {
    "perf-client": "ceiling-64 ceiling-512 timing-64 timing-256 timing-1024 rate-1000 rate-5000 "
                   "memory-100k memory-10k-streams",
    "perf-backends": "ceiling-backends",
    "perf-workers": "ceiling-512 workers-1 workers-2",
    "perf-prepare": "prepare-1024 prepare-128 prepare-100k",
    "perf-data": "data",
    "perf-decode": "decode",
    "perf-dashboard": "dashboard",
}
for _marker, _rows in PERF_BLOCKS.items():
    FIGURES[_marker] = {
        "file": "docs/performance.md",
        "paths": BENCH_CODE + ["scripts/perf.sh"],
        "bound": 30,
        "again": f'ROWS="{_rows}" bash scripts/perf.sh --write-readme {_marker}',
    }

# The documents whose blocks are checked.
DOCUMENTS = ["README.md", "ARCHITECTURE.md", "docs"]

BLOCK = re.compile(r"<!-- ([a-z0-9-]+):start -->(.*?)<!-- \1:end -->", re.S)
# A commit as the blocks name it: 7 to 40 hex digits, with a letter and a digit (a plain
# number, such as a timestamp, is not taken for one).
HASH = re.compile(r"(?<![0-9a-zA-Z])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![0-9a-zA-Z])")
# One that the word "commit" introduces may be all digits (a short hash can be).
NAMED_HASH = re.compile(r"\bcommit ([0-9a-f]{7,40})(?![0-9a-zA-Z])")


def git(root, *args, check=True):
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=check)


def documents(root):
    """(relative path, text) of every checked document."""
    for entry in DOCUMENTS:
        path = os.path.join(root, entry)
        if os.path.isdir(path):
            names = sorted(os.path.join(entry, n) for n in os.listdir(path) if n.endswith(".md"))
        else:
            names = [entry] if os.path.exists(path) else []
        for name in names:
            with open(os.path.join(root, name)) as f:
                yield name, f.read()


def commits_named(root, text):
    """The commits of this repository a block names, oldest first."""
    found = []
    for token in dict.fromkeys(HASH.findall(text) + NAMED_HASH.findall(text)):
        full = git(root, "rev-parse", "--verify", "--quiet", f"{token}^{{commit}}", check=False)
        if full.returncode == 0:
            found.append(full.stdout.strip())
    # Oldest first: a commit that is an ancestor of another is older.
    found.sort(key=lambda c: int(git(root, "rev-list", "--count", c).stdout))
    return found


# Outside the blocks, figures typed by hand: a dated measurement ("Measured 2026-11-24",
# "2026-11-27 18:27"), or a table row with two or more cells that are figures.
DATED = re.compile(r"\b[Mm]easured (?:on )?20\d\d-\d\d-\d\d|\b20\d\d-\d\d-\d\d \d\d:\d\d")
FIGURE_CELL = re.compile(r"^[~<>]?[+-]?[\d,.]*\d[\d,.]*(?: ?(?:x|%|ms|s|MiB|/\d+))?$")


def unmarked_figures(name, text):
    """Hand-typed figures outside the blocks of `text`, as problems naming their lines."""
    problems = []
    outside = BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for number, line in enumerate(outside.splitlines(), 1):
        if DATED.search(line):
            problems.append(f"{name}:{number}: a dated measurement outside a script-written block: "
                            f"{line.strip()[:100]}")
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if sum(bool(FIGURE_CELL.match(c)) for c in cells) >= 2:
                problems.append(f"{name}:{number}: a table of figures outside a script-written block: "
                                f"{line.strip()[:100]}")
    return problems


def check(root, figures=FIGURES):
    """The problems found, as lines; empty when every block is fresh."""
    problems = []
    seen = set()
    for name, text in documents(root):
        problems += unmarked_figures(name, text)
        for marker, body in BLOCK.findall(text):
            seen.add(marker)
            spec = figures.get(marker)
            if spec is None:
                problems.append(f"{name}: block {marker} is not in check_figures.py's FIGURES: say which "
                                "code its figures measure")
                continue
            commits = commits_named(root, body)
            if not commits:
                problems.append(f"{name}: block {marker} names no commit of this repository's history")
                continue
            oldest = commits[0]
            since = int(git(root, "rev-list", "--count", f"{oldest}..HEAD", "--", *spec["paths"]).stdout)
            if since > spec["bound"]:
                problems.append(f"{name}: block {marker} was measured at {oldest[:7]}, and {since} commits have "
                                f"changed the code it measures since (more than {spec['bound']}): measure "
                                f"it again ({spec['again']})")
            else:
                print(f"check_figures.py: {marker}: measured at {oldest[:7]}; {since} of at most "
                      f"{spec['bound']} commits to its code since")
    for marker, spec in figures.items():
        if marker not in seen and not spec.get("optional"):
            problems.append(f"{spec['file']}: block {marker} (in FIGURES) is missing")
    return problems


def self_test():
    """The check on a made-up repository: fresh, stale, unknown and commitless blocks."""
    failures = []
    with tempfile.TemporaryDirectory(prefix="bench-figures-") as root:
        run = lambda *a: git(root, *a)
        run("init", "-q")
        run("config", "user.email", "t@example.com")
        run("config", "user.name", "t")
        os.makedirs(os.path.join(root, "host"))

        def commit(path, text):
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
            run("add", "-A")
            run("commit", "-q", "-m", path)
            # The full hash: a short one can be all digits, which is not taken for a commit.
            return run("rev-parse", "HEAD").stdout.strip()

        measured = commit("host/a.rs", "1")
        spec = {"x": {"file": "README.md", "paths": ["host"], "bound": 2, "again": "again.sh"}}
        commit("README.md", f"<!-- x:start -->\nbench, commit {measured}, 1795979295\n| 1 |\n<!-- x:end -->\n")
        if check(root, spec):
            failures.append("a fresh block was judged stale")
        for i in range(2):
            commit("host/a.rs", str(i + 2))
        commit("notes.txt", "not code")  # does not count
        if check(root, spec):
            failures.append("a block with as many commits as its bound was judged stale")
        commit("host/a.rs", "9")
        problems = check(root, spec)
        if not (len(problems) == 1 and "3 commits" in problems[0] and "again.sh" in problems[0]):
            failures.append(f"a stale block was not caught: {problems}")
        commit("README.md", "<!-- y:start -->\n| 1 |\n<!-- y:end -->\n<!-- x:start -->\nno commit\n<!-- x:end -->\n")
        problems = check(root, spec)
        if not (any("block y is not in" in p for p in problems) and any("names no commit" in p for p in problems)):
            failures.append(f"an unknown or commitless block was not caught: {problems}")
        # A hash of digits alone counts where "commit" names it (here: the full hash, as digits
        # cannot be forced; the short form is checked by the regular expression below).
        if NAMED_HASH.findall("commit 1422316, on") != ["1422316"] or HASH.findall("at 1422316"):
            failures.append("an all-digit hash after 'commit' is not taken, or one without it is")
        again = commit("host/a.rs", "10")
        fresh = f"<!-- x:start -->\ncommit {again}\n| a | 1.5 | 20 ms |\n<!-- x:end -->\n"
        for typed, what in (("| run | 60 | 0.651 |\n", "table"), ("Measured 2026-11-24 on a VM: fast.\n", "dated"),
                            ("at 2026-11-27 18:27, 40 of 40\n", "dated")):
            commit("README.md", fresh + "text\n" + typed)
            problems = [p for p in check(root, spec) if "outside a script-written block" in p]
            if not (len(problems) == 1 and problems[0].startswith("README.md:6:")):
                failures.append(f"a hand-typed {what} figure outside the blocks was not caught: {problems}")
        commit("README.md", fresh + "| flag | what |\n| `--x` | 2 ways |\n| 1 | one |\n")
        if check(root, spec):
            failures.append(f"a table without figures was judged hand-typed: {check(root, spec)}")
    return failures


def main():
    if sys.argv[1:] == ["--self-test"]:
        failures = self_test()
        for f in failures:
            print(f"check_figures.py: self-test: {f}", file=sys.stderr)
        print(f"check_figures.py: self-test: {'FAIL' if failures else 'ok'}")
        return 1 if failures else 0
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        print("SKIPPED: check_figures.py: this clone is shallow, without the history to date the "
              "README's figures by (git fetch --unshallow)")
        return 0
    problems = check(root)
    for p in problems:
        print(f"check_figures.py: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
