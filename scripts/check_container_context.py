#!/usr/bin/env python3
"""Checks that the container image's build context holds what the Dockerfile builds from.

`docker build .` sends the repository minus what `.dockerignore` excludes. A rule meant
for build outputs that also matches a source folder (`**/target` once matched the core's
`src/target/` module) leaves the image unbuildable, and nothing else would notice: the base
image cannot be pulled here. So this check, with the standard library only:

1. reads `.dockerignore` as Docker does (moby's patternmatcher: `#` comments, a leading
   `/` dropped, paths cleaned, `*` and `?` within one path segment, `**` across segments,
   `!` re-including, and a path excluded when the pattern matches it or any folder above
   it), and fails naming every file git tracks that the rules leave out: nothing tracked is
   a build output, so each one is source the image needs;
2. packs the context (the tracked files the rules keep) into a temporary folder and asks
   Cargo to resolve, there, the workspace and the first-party plugins' workspace that
   `crates/runtime/build.rs` builds (`cargo tree --locked --offline` for this machine's
   target and for wasm32-wasip2): every member and path dependency must be in the pack,
   and Cargo.lock must hold. Run it after a build, when Cargo's registry cache has the
   dependencies.

    python3 scripts/check_container_context.py          # the check
    python3 scripts/check_container_context.py --self-test   # the matcher against known cases

Exit status 0 when the context is complete, 1 with the missing files otherwise.
"""

import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile


def read_rules(text):
    """[(regex, exclusion)] of a .dockerignore text, in order (moby's dockerignore.ReadAll
    and patternmatcher.NewPatternMatcher)."""
    rules = []
    for line in text.splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        exclusion = pattern.startswith("!")
        if exclusion:
            pattern = pattern[1:].strip()
            if not pattern:
                raise ValueError('illegal exclusion pattern: "!"')
        pattern = posixpath.normpath(pattern)
        if len(pattern) > 1 and pattern.startswith("/"):
            pattern = pattern[1:]
        rules.append((compile_pattern(pattern), exclusion))
    return rules


def compile_pattern(pattern):
    """The regular expression of one cleaned pattern, as patternmatcher builds it: `**/` is
    any number of folders (none too), a trailing `**` anything, `*` anything but `/`, `?` one
    character but `/`, `[...]` a class; anything else literal."""
    out, i = "^", 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*" and pattern[i + 1:i + 2] == "*":
            i += 2
            if pattern[i:i + 1] == "/":
                i += 1
            out += ".*" if i >= len(pattern) else "(.*/)?"
            continue
        if ch == "*":
            out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch in "[]":
            out += ch
        elif ch == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(ch)
        i += 1
    return re.compile(out + "$")


def excluded(rules, path):
    """Whether the context leaves out this path (relative, with `/`): the last rule that
    matches it or a folder above it decides (patternmatcher.MatchesOrParentMatches)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:k + 1]) for k in range(len(parts) - 1)]
    matched = False
    for regex, exclusion in rules:
        if exclusion != matched:
            continue
        if regex.match(path) or any(regex.match(p) for p in prefixes):
            matched = not exclusion
    return matched


def self_test():
    """The matcher on cases whose answer Docker's documentation and patternmatcher's tests
    give; returns the failures."""
    cases = [
        ("**/target", "target/debug/bench", True),
        ("**/target", "crates/core/src/target/mod.rs", True),
        ("**/target", "crates/core/src/targets/mod.rs", False),
        ("target", "crates/target/x", False),
        ("/target", "target/x", True),
        ("*.md", "README.md", True),
        ("*.md", "docs/a.md", False),
        ("**/*.md", "docs/a.md", True),
        ("docs/**", "docs/a/b.md", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("**/__pycache__", "scripts/__pycache__/x.pyc", True),
        (".git", ".github/workflows/ci.yml", False),
    ]
    failures = [f"{pattern!r} on {path!r}: expected {want}"
                for pattern, path, want in cases if excluded(read_rules(pattern), path) != want]
    rules = read_rules("docs\n!docs/keep.md\n")
    if excluded(rules, "docs/keep.md") or not excluded(rules, "docs/other.md"):
        failures.append("an exclusion (!) must re-include its file and only it")
    return failures


def main():
    if sys.argv[1:] == ["--self-test"]:
        failures = self_test()
        for f in failures:
            print(f"check_container_context.py: self-test: {f}", file=sys.stderr)
        print(f"check_container_context.py: self-test: {'FAIL' if failures else 'ok'}")
        return 1 if failures else 0
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, ".dockerignore")) as f:
        rules = read_rules(f.read())
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True,
                             capture_output=True).stdout.decode().split("\0")
    tracked = [p for p in tracked if p and os.path.isfile(os.path.join(root, p))]
    left_out = [p for p in tracked if excluded(rules, p)]
    if left_out:
        print(f"check_container_context.py: .dockerignore leaves {len(left_out)} tracked files out of "
              "the image's build context (a rule for build outputs that matches sources?):", file=sys.stderr)
        for p in left_out[:40]:
            print(f"  {p}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-context-") as pack:
        for p in tracked:
            os.makedirs(os.path.join(pack, os.path.dirname(p)), exist_ok=True)
            shutil.copy2(os.path.join(root, p), os.path.join(pack, p))
        host = next(line.split()[1] for line in subprocess.run(
            ["rustc", "-vV"], check=True, capture_output=True, text=True).stdout.splitlines()
            if line.startswith("host:"))
        for manifest, target in (("Cargo.toml", host), ("plugins/Cargo.toml", "wasm32-wasip2")):
            tree = subprocess.run(["cargo", "tree", "--locked", "--offline", "--target", target,
                                   "-e", "normal,build,dev", "--manifest-path", os.path.join(pack, manifest)],
                                  capture_output=True, text=True)
            if tree.returncode != 0:
                print(f"check_container_context.py: Cargo cannot resolve {manifest} ({target}) from the "
                      f"build context:\n{tree.stderr}", file=sys.stderr)
                return 1
    print(f"check_container_context.py: the build context holds all {len(tracked)} tracked files, "
          "and Cargo resolves the workspace and the plugins' workspace from it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
