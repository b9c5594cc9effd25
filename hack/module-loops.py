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


def child_files(path, is_root):
    """The files of the modules `path` declares (`mod x;`): x.rs or x/mod.rs beside a root or
    mod.rs, else in the folder named after the file."""
    folder = path.parent if is_root or path.name == "mod.rs" else path.parent / path.stem
    for m in re.finditer(r"(?<![\w:])mod\s+(\w+)\s*;", strip(path.read_text())):
        for candidate in (folder / f"{m.group(1)}.rs", folder / m.group(1) / "mod.rs"):
            if candidate.is_file():
                yield m.group(1), candidate
                break


def target_files(root):
    """Every file of the target whose root file is `root`, by module path, found by walking the
    `mod` declarations (so `#[cfg(test)] mod tests;` and files no target declares are left out)."""
    files, todo = {}, [((), root, True)]
    while todo:
        module, path, is_root = todo.pop()
        files[module] = path
        for child, child_path in child_files(path, is_root):
            todo.append((module + (child,), child_path, False))
    return files


def targets(crate):
    """The root files of a crate's targets: library, binaries, benches, examples and tests (the
    conventional places, and [[test]]/[[bench]]/[[bin]]/[[example]] paths its Cargo.toml names)."""
    roots = [crate / "src/lib.rs", crate / "src/main.rs"]
    for folder in ("src/bin", "benches", "examples", "tests"):
        base = crate / folder
        if base.is_dir():
            roots += sorted(base.glob("*.rs")) + sorted(base.glob("*/main.rs"))
    manifest = crate / "Cargo.toml"
    if manifest.is_file():
        for m in re.finditer(r'^path\s*=\s*"([^"]+\.rs)"', manifest.read_text(), flags=re.M):
            roots.append((crate / m.group(1)).resolve())
    seen, out = set(), []
    for root in roots:
        if root.is_file() and root.resolve() not in seen:
            seen.add(root.resolve())
            out.append(root)
    return out


def external_names(root_uses, files):
    """The names the crate root brings in from another crate (`pub use outfit_workspaces_core::{
    model, policy};` in lib.rs): a `crate::model::...` path then leads out of the crate, not to
    the root file, which stands above every layer."""
    out = set()
    for p in root_uses:
        if not p or p[0] in ("crate", "super", "self") or (p[0],) in files:
            continue
        last = p[-2] if p[-1] == "self" and len(p) > 1 else p[-1]
        if last != "*" and (last,) not in files:
            out.add((last,))
    return out


def target_graph(root):
    files = target_files(root)
    edges = {m: set() for m in files}
    uses = {}
    for module, path in files.items():
        uses[module] = []
        for m in re.finditer(r"\buse\s+([^;]+);", strip(path.read_text())):
            uses[module].extend(use_paths(m.group(1)))
    external = external_names(uses[()], files)
    for module, path in files.items():
        text = strip(path.read_text())
        paths = list(uses[module])
        for m in re.finditer(r"(?<![\w:])((?:crate|super|self|\w+)(?:\s*::\s*\w+)+)", text):
            paths.append(tuple(p.strip() for p in m.group(1).split("::")))
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
            if full[:1] in external:
                continue
            # The longest prefix that is a file is the module imported; `use super::*` imports
            # the parent module itself.
            for n in range(len(full), -1, -1):
                target = full[:n]
                if target in files:
                    if target != module and not (n == len(base) and rest == []):
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


def name(label, module):
    return f"{label}::" + ("::".join(module) or "(root)")


def main():
    root = Path(__file__).resolve().parent.parent
    crates = [Path(a).resolve() for a in sys.argv[1:]] or sorted((root / "crates").iterdir())
    found = checked = 0
    for crate in crates:
        for target_root in targets(crate):
            checked += 1
            try:
                label = f"{crate.name}:{target_root.relative_to(crate)}"
            except ValueError:
                label = f"{crate.name}:{target_root.relative_to(root)}"
            files, edges = target_graph(target_root)
            for component in cycles(edges):
                found += 1
                print(f"loop in {label} ({len(component)} files):")
                members = set(component)
                for module in component:
                    inside = sorted(t for t in edges[module] if t in members)
                    print(f"  {name(label, module)} -> " + ", ".join(name(label, t) for t in inside))
    if found:
        sys.exit(1)
    print(f"no import loops in {checked} targets of {len(crates)} crates")


if __name__ == "__main__":
    main()
