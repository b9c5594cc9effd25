#!/usr/bin/env python3
"""Finds import loops between the source files of each crate (issue 12: no loops inside a crate).

A file imports another when it names an item through `crate::`, `super::` or `self::` (in a `use`
tree or inline) that lives in that file. Declaring a child module (`mod x;`) is not an import,
and test code (`tests.rs`, `tests/` folders, `#[cfg(test)]` blocks) is left out: tests may import
what they test from any direction. Prints each loop as a cycle of files and exits 1 if any.

    python3 hack/module-loops.py [crates/NAME ...]
"""
import re
import sys
from pathlib import Path


def strip(text):
    """Source without comments, string literals and #[cfg(test)] items."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'(?<!\w)r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        # Skip the attributed item: up to its matching closing brace, or its `;`.
        j = m.end()
        depth = 0
        while j < len(text):
            c = text[j]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    j += 1
                    break
            elif c == ";" and depth == 0:
                j += 1
                break
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def use_paths(tree, prefix=()):
    """Flattens a `use` tree (`a::{b, c::{d, e}}`) into paths."""
    tree = tree.strip()
    depth, start, parts = 0, 0, []
    # Split the top level on `::` only outside braces, then expand the last brace group.
    m = re.match(r"^((?:[\w]+\s*::\s*)*)\{(.*)\}$", tree, flags=re.S)
    if m:
        head = tuple(p.strip() for p in m.group(1).split("::") if p.strip())
        inner = m.group(2)
        for ch_i, ch in enumerate(inner):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(inner[start:ch_i])
                start = ch_i + 1
        parts.append(inner[start:])
        paths = []
        for part in parts:
            if part.strip():
                paths.extend(use_paths(part, prefix + head))
        return paths
    tree = re.sub(r"\s+as\s+\w+$", "", tree)
    return [prefix + tuple(p.strip() for p in tree.split("::") if p.strip())]


def module_of(src, path):
    rel = path.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def is_test(src, path):
    rel = path.relative_to(src)
    return rel.name == "tests.rs" or "tests" in rel.parts[:-1] or rel.parts[0] == "bin"


def crate_graph(crate):
    src = crate / "src"
    files = {}
    for path in sorted(src.rglob("*.rs")):
        if not is_test(src, path):
            files[module_of(src, path)] = path
    edges = {m: set() for m in files}
    for module, path in files.items():
        text = strip(path.read_text())
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            paths.extend(use_paths(m.group(1)))
        for m in re.finditer(r"(?<![\w:])((?:crate|super|self|\w+)(?:\s*::\s*\w+)+)", text):
            paths.append(tuple(p.strip() for p in m.group(1).split("::")))
        # The module a `super::` is relative to: a file's parent module, except for mod.rs/lib.rs.
        is_dir = path.stem in ("mod", "lib", "main")
        for p in paths:
            if not p:
                continue
            base = list(module)
            rest = list(p)
            if p[0] not in ("crate", "super", "self"):
                # A 2018-style path relative to this module: `child::Item`.
                if module + (p[0],) not in files:
                    continue
            elif rest[0] == "crate":
                base, rest = [], rest[1:]
            else:
                if rest[0] == "self":
                    rest = rest[1:]
                while rest and rest[0] == "super":
                    if not base:
                        break
                    base = base[:-1]
                    rest = rest[1:]
            full = tuple(base + rest)
            # The longest prefix that is a file is the module imported.
            for n in range(len(full), -1, -1):
                target = full[:n]
                if target in files:
                    if target != module and not (n == len(base) and rest == [] ):
                        edges[module].add(target)
                    break
    return files, edges


def cycles(edges):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def name(crate, module):
    return f"{crate.name}::" + ("::".join(module) or "(root)")


def main():
    root = Path(__file__).resolve().parent.parent
    crates = [Path(a) for a in sys.argv[1:]] or sorted((root / "crates").iterdir())
    found = 0
    for crate in crates:
        if not (crate / "src").is_dir():
            continue
        files, edges = crate_graph(crate)
        for component in cycles(edges):
            found += 1
            print(f"loop in {crate.name} ({len(component)} files):")
            members = set(component)
            for module in component:
                inside = sorted(t for t in edges[module] if t in members)
                print(f"  {name(crate, module)} -> " + ", ".join(name(crate, t) for t in inside))
    if found:
        sys.exit(1)
    print(f"no import loops in {len(crates)} crates")


if __name__ == "__main__":
    main()
