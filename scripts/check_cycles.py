#!/usr/bin/env python3
"""No crate's files import each other in a circle.

    python3 scripts/check_cycles.py            # every crate of both workspaces; exit 1 on a circle
    python3 scripts/check_cycles.py --graph    # also print each crate's file-level arrows
    python3 scripts/check_cycles.py --self-test

A file's arrows are the files of its own crate whose items it names: `use crate::a::b::X`,
`use super::X`, `use self::m::X` and the same paths written in code (`crate::a::f()`, or
`m::f()` through a child module `m` that the file declares), brace groups included
(`use crate::{a::X, b::{self, Y}}`). A path goes to the file of the longest module it
names (`a/b.rs` or `a/b/mod.rs`). A name the crate root re-exports (`pub use h1::H1Client`
in `lib.rs`, or a crate below re-exported under a name) is followed to where it is
defined: the root is the crate's public face, not a room. Any other module's re-export is
an arrow of that module to what it re-exports, and a name taken through it is an arrow to
that module: inside a crate, code names the file that defines a thing. A `mod x;`
declaration is no arrow (it is where a file lives, not what it uses). Tests are no rooms:
`tests.rs`, `*_tests.rs`, files under `tests/` and a `#[cfg(test)]` module at the end of a
file are left out, as are files generated at build time (`include!`).

A circle is a strongly connected set of two or more files (Tarjan's algorithm). Each is
printed with the arrows that tie it and the names each arrow takes, so the next engineer
sees what to move. Why a script of our own and not `cargo modules dependencies --acyclic`:
that tool builds rust-analyzer (minutes on a 2-core CI machine, for a check that takes
this script under a second), and it reads one crate per call.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Crates whose files are checked: the main workspace's, the SDK, the plugins' workspace
# and the examples.
CRATE_GLOBS = ["host", "sdk", "crates/*", "plugins/*/*", "examples/*", "tests/fixtures/plugins/*"]

PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_RE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M | re.S)


def strip_comments_and_strings(text: str) -> str:
    """The code without comments, string and char literals (doc examples name paths too)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or c == "'" and text.startswith("'\\", i):
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_test_tail(code: str) -> str:
    """The file less a `#[cfg(test)]` module at top level (at the end of the file, by habit)."""
    m = re.search(
        r"^#\[cfg\((?:test|all\(test\b[^\]]*\))\)\]\s*\n\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{",
        code,
        re.M,
    )
    return code[: m.start()] if m else code


def expand_use_tree(tree: str) -> list[list[str]]:
    """`crate::{a::X, b::{self, Y}}` into [["crate","a","X"], ["crate","b"], ["crate","b","Y"]]."""
    tree = re.sub(r"\s+", "", tree)

    def parse(s: str, i: int, prefix: list[str]) -> tuple[list[list[str]], int]:
        paths: list[list[str]] = []
        segs = list(prefix)
        name = ""
        while i < len(s):
            ch = s[i]
            if s.startswith("::", i):
                if name:
                    segs.append(name)
                name = ""
                i += 2
            elif ch == "{":
                if name:
                    segs.append(name)
                    name = ""
                i += 1
                while True:
                    sub, i = parse(s, i, segs)
                    paths.extend(sub)
                    if i < len(s) and s[i] == ",":
                        i += 1
                        continue
                    break
                if i < len(s) and s[i] == "}":
                    i += 1
                return paths, i
            elif ch in ",}":
                break
            else:
                name += ch
                i += 1
        if name:
            segs.append(name)
        paths.append(segs)
        return paths, i

    return parse(tree, 0, [])[0]


def use_paths(stmt: str) -> list[list[str]]:
    """The paths one `use` statement names, aliases dropped."""
    stmt = re.sub(r"\s+as\s+[A-Za-z_]\w*", "", stmt)
    return [p for p in expand_use_tree(stmt) if p and p != ["self"]]


class Crate:
    def __init__(self, root: Path):
        self.root = root
        self.src = root / "src"
        self.files: dict[tuple[str, ...], Path] = {}
        for f in sorted(self.src.rglob("*.rs")):
            rel = f.relative_to(self.src)
            if is_test_file(rel):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
                parts = parts[:-1]
            key = tuple(parts)
            # a binary's main.rs beside lib.rs: the library is the crate checked.
            if key == () and key in self.files and f.name == "main.rs":
                continue
            self.files[key] = f
        self.code = {k: without_test_tail(strip_comments_and_strings(p.read_text())) for k, p in self.files.items()}
        # Each module's `use` statements: name -> the path it stands for (absolute).
        self.aliases: dict[tuple[str, ...], dict[str, list[str]]] = {}
        for mod, code in self.code.items():
            names: dict[str, list[str]] = {}
            for m in USE_RE.finditer(code):
                for path, alias in self._aliased(m.group(2)):
                    names[alias] = path
            self.aliases[mod] = names

    def _aliased(self, stmt: str):
        """(path, the name it is known by here) for each leaf of a use statement."""
        spaced = re.sub(r"\s+", " ", stmt)
        alias_of = dict(re.findall(r"([A-Za-z_]\w*) as ([A-Za-z_]\w*)", spaced))
        for path in use_paths(stmt):
            last = path[-1]
            if last == "self":
                path = path[:-1]
                last = path[-1] if path else ""
            if last == "*" or not last:
                continue
            yield path, alias_of.get(last, last)

    def absolute(self, mod: tuple[str, ...], path: list[str]) -> list[str] | None:
        """A path as seen from `mod`, from the crate root; None when it leaves the crate."""
        if not path:
            return None
        head, rest = path[0], path[1:]
        if head == "crate":
            return rest
        if head in ("self", "super"):
            base = list(mod)
            while path and path[0] in ("self", "super"):
                if path[0] == "super":
                    if not base:
                        return None
                    base.pop()
                path = path[1:]
            return base + path
        return None

    def resolve(self, segs: list[str], depth: int = 0) -> tuple[tuple[str, ...], str] | None:
        """The file (its module key) and the item name that an absolute path lands on."""
        for k in range(len(segs), -1, -1):
            key = tuple(segs[:k])
            if key in self.files:
                item = segs[k] if k < len(segs) else ""
                # A name this module only hands on: follow it to where it is defined.
                # Only the crate root's re-exports are followed (it is the crate's public
                # face); a name taken through any other module's re-export is an arrow to
                # that module, which itself depends on what it re-exports.
                if key == () and item and depth < 8 and item in self.aliases.get(key, {}):
                    target = self.absolute(key, self.aliases[key][item])
                    if target is None:
                        # from outside the crate, or a relative path from the crate root
                        target = self._root_relative(key, self.aliases[key][item])
                    if target is None:
                        return None  # an item of another crate, re-exported here
                    if target != segs:
                        # None: it ends in another crate (`pub use crate::client::X`
                        # where `client` is a re-exported crate)
                        return self.resolve(target + segs[k + 1:], depth + 1)
                return key, item
        return None

    def _root_relative(self, mod: tuple[str, ...], path: list[str]) -> list[str] | None:
        """In edition 2018+ `use a::X` inside the crate names a child module `a` of `mod`
        only through `self::`; from the root, `use a::X` may name the root's own module."""
        if path and tuple(list(mod) + [path[0]]) in self.files:
            return list(mod) + path
        return None

    def arrows(self) -> dict[tuple[str, ...], dict[tuple[str, ...], set[str]]]:
        out: dict[tuple[str, ...], dict[tuple[str, ...], set[str]]] = {}
        for mod, code in self.code.items():
            found: dict[tuple[str, ...], set[str]] = defaultdict(set)
            paths: list[list[str]] = []
            for m in USE_RE.finditer(code):
                if m.group(1) and mod == ():
                    continue  # the crate root's re-exports: followed from whoever names them
                for path in use_paths(m.group(2)):
                    # `use a::*` and `use a::{self}` name the module a itself
                    paths.append(path[:-1] if path[-1] in ("*", "self") else path)
            body = USE_RE.sub("", code)
            for m in PATH_RE.finditer(body):
                paths.append([m.group(1)] + m.group(2).split("::")[1:])
            # `child::f()`: a path through a child module that this file declares
            for child in re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code, re.M):
                for m in re.finditer(rf"(?<![\w:]){child}((?:::[A-Za-z_]\w*)+)", body):
                    paths.append(["self", child] + m.group(1).split("::")[1:])
            for path in paths:
                seg = self.absolute(mod, path)
                if seg is None:
                    seg = self._root_relative(mod, path)
                if seg is None:
                    continue
                hit = self.resolve(seg)
                if hit is None:
                    continue
                target, item = hit
                if target != mod:
                    found[target].add(item or "(module)")
            out[mod] = dict(found)
        return out


def is_test_file(rel: Path) -> bool:
    return (
        rel.name == "tests.rs"
        or rel.stem.endswith("_tests")
        or "tests" in rel.parts[:-1]
    )


def circles(arrows) -> list[list[tuple[str, ...]]]:
    """Strongly connected sets of two or more files (Tarjan's, iterative)."""
    index: dict = {}
    low: dict = {}
    on: set = set()
    stack: list = []
    out = []
    counter = [0]
    for start in arrows:
        if start in index:
            continue
        work = [(start, iter(arrows.get(start, {})))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(arrows.get(nxt, {}))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    scc.append(w)
                    if w == node:
                        break
                if len(scc) > 1:
                    out.append(sorted(scc))
    return out


def crates() -> list[Path]:
    found = []
    for pattern in CRATE_GLOBS:
        for d in sorted(ROOT.glob(pattern)):
            if (d / "Cargo.toml").is_file() and (d / "src").is_dir():
                found.append(d)
    return found


def check(roots: list[Path], graph: bool = False) -> int:
    bad = 0
    for root in roots:
        crate = Crate(root)
        arrows = crate.arrows()
        rel = root.relative_to(ROOT) if root.is_relative_to(ROOT) else root

        def name(k):
            return str(crate.files[k].relative_to(ROOT) if crate.files[k].is_relative_to(ROOT) else crate.files[k])

        if graph:
            for a in sorted(arrows):
                for b in sorted(arrows[a]):
                    print(f"{name(a)} -> {name(b)}: {', '.join(sorted(arrows[a][b]))}")
        for scc in circles(arrows):
            bad += 1
            members = set(scc)
            print(f"check_cycles.py: {rel}: {len(scc)} files import each other in a circle:")
            for a in scc:
                for b in sorted(arrows[a]):
                    if b in members:
                        print(f"  {name(a)} -> {name(b)}: {', '.join(sorted(arrows[a][b]))}")
    return bad


def self_test() -> None:
    import contextlib
    import io
    import tempfile

    def check(roots):  # the circles found, their report kept off the output
        with contextlib.redirect_stdout(io.StringIO()):
            return globals()["check"](roots)

    def crate(files: dict[str, str]) -> Path:
        d = Path(tempfile.mkdtemp())
        (d / "Cargo.toml").write_text("[package]\nname='t'\n")
        for p, text in files.items():
            f = d / "src" / p
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
        return d

    loop = crate({
        "lib.rs": "mod a;\nmod b;\npub use bench_client as client;\n",
        "a.rs": "use crate::b::B;\npub struct A;\n",
        "b.rs": "pub struct B;\nfn f() { crate::a::A; }\n",
    })
    assert check([loop]) == 1, "a circle through a path in code"
    facade = crate({
        "lib.rs": "mod m;\n",
        "m/mod.rs": "mod x;\nmod y;\npub use x::X;\n",
        "m/x.rs": "pub struct X;\n",
        "m/y.rs": "use super::X;\n// crate::m::y in a comment\nconst S: &str = \"crate::m::y\";\n",
    })
    assert check([facade]) == 0, "a name through a facade; comments and strings are no arrows"
    facade_loop = crate({
        "lib.rs": "mod m;\n",
        "m/mod.rs": "mod x;\npub use x::X;\npub struct Y;\n",
        "m/x.rs": "use super::Y;\npub struct X;\n",
    })
    assert check([facade_loop]) == 1, "a mod.rs's re-export is an arrow to what it re-exports"
    braces = crate({
        "lib.rs": "mod a;\nmod b;\nmod c;\n",
        "a.rs": "use crate::{b::{self, B}, c::C as D};\n",
        "b.rs": "pub struct B;\n",
        "c.rs": "pub struct C;\nuse crate::a;\n#[cfg(test)]\nmod tests {\n use crate::b::B;\n}\n",
    })
    arrows = Crate(braces).arrows()
    assert set(arrows[("a",)]) == {("b",), ("c",)}, arrows
    assert check([braces]) == 1, "a -> c -> a through an alias"
    external = crate({
        "lib.rs": "mod a;\npub use bench_record as record;\n",
        "a.rs": "use crate::record::RequestRecord;\n",
    })
    assert Crate(external).arrows()[("a",)] == {}, "a re-exported crate is no room"
    through_child = crate({
        "lib.rs": "mod m;\n",
        "m/mod.rs": "mod k;\npub struct T;\nfn f() { k::g(); }\n",
        "m/k.rs": "pub fn g() {}\nfn h() -> super::T { super::T }\n",
    })
    assert check([through_child]) == 1, "`k::g()` through a declared child is an arrow"
    tests_only = crate({
        "lib.rs": "mod a;\nmod b;\n",
        "a.rs": "use crate::b::B;\n",
        "b.rs": "pub struct B;\n#[cfg(all(test, target_os = \"linux\"))]\npub(crate) mod tests {\n use crate::a;\n}\n",
    })
    assert check([tests_only]) == 0, "a test module's imports are no arrows"
    print("check_cycles.py: self-test passed")


def main(argv: list[str]) -> int:
    if "--self-test" in argv:
        self_test()
        return 0
    roots = crates()
    bad = check(roots, graph="--graph" in argv)
    if bad:
        print(f"check_cycles.py: {bad} circle(s); move what ties each so that the arrows run one way")
        return 1
    print(f"check_cycles.py: {len(roots)} crates, no file imports another that imports it back")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
