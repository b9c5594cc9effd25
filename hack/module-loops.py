#!/usr/bin/env python3
"""Checks the imports between the source files of each crate: no loops (issue 12), and none that
runs back up the layers docs/design/map.md draws (issue 34), so the map cannot drift.

A file imports another when it names an item through `crate::`, `super::` or `self::` (in a `use`
tree or inline) that lives in that file. Declaring a child module (`mod x;`) is not an import,
and test code (`tests.rs`, `tests/` folders, `#[cfg(test)]` blocks) is left out: tests may import
what they test from any direction.

Loops: every target of every crate (library, binaries, benches, examples, tests); each loop is
printed as a cycle of files.

Layers: map.md's ```layers CRATE``` blocks (the format is described there) list a crate's layers
bottom first. Every file of the crate's library (or, for a binary crate, its `src/main.rs`)
must be on exactly one layer, every pattern must name a file, and a file may import only its own
layer or one below it, never a part of its layer that stands beside its own; the crate root
(`lib.rs`, `main.rs`) stands above every layer. Each import that breaks this is printed as
`crate: file -> file (layer X imports layer Y above it)`.

Named: every source file of the workspace backend's two crates (NAMED_CRATES; test code aside) is
named in map.md's prose, in backticks: by its path under `src/` (with or without `.rs`), its
last two components, its file name or its module name (a folder's `mod.rs` by the folder), so a
file added without a word in the map fails here (issue 43).

Page: the workspace page's ES modules (crates/outfit-workspaces/src/web/*.js) import each other
without loops too (`from "./x.js"`).

Exits 1 if any loop, layer error or unnamed file is found.

    python3 hack/module-loops.py [crates/NAME ...]
"""
import fnmatch
import re
import sys
from pathlib import Path

MAP = Path("docs/design/map.md")
# The crates whose every source file map.md's prose names.
NAMED_CRATES = ("outfit-workspaces", "outfit-workspaces-core")


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


def read_layers(path):
    """map.md's layers blocks: {crate: [layer, ...]} bottom first, a layer being a list of parts
    side by side, a part a (name, [pattern, ...]); and the errors in their syntax."""
    blocks, errors = {}, []
    text = path.read_text()
    for m in re.finditer(r"^```layers[ \t]*(\S*)[ \t]*\n(.*?)^```", text, flags=re.M | re.S):
        crate, layers = m.group(1), []
        first = text.count("\n", 0, m.start()) + 2
        if not crate or crate in blocks:
            errors.append(f"{path}:{first - 1}: a layers block names no crate, or one named before")
            continue
        for number, line in enumerate(m.group(2).splitlines(), first):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = []
            for part in line.split("|"):
                part_name, colon, patterns = part.partition(":")
                if not colon or not part_name.strip() or not patterns.split():
                    errors.append(f"{path}:{number}: not `name: pattern ...` (`|` between parts)")
                    break
                parts.append((part_name.strip(), patterns.split()))
            else:
                layers.append(parts)
        blocks[crate] = layers
    return blocks, errors


def matches(pattern, file):
    """Whether a map pattern names a file (a path relative to the crate's src/): a folder (`io/`)
    names everything under it, else a glob (`*.rs`; `*` crosses folders too)."""
    if pattern.endswith("/"):
        return file.startswith(pattern)
    return fnmatch.fnmatchcase(file, pattern)


def check_layers(crate_name, src, files, edges, layers):
    """The errors of one crate's files and imports against its layers."""
    errors = []
    relative = {m: path.relative_to(src).as_posix() for m, path in files.items()}
    place, used = {}, set()
    for module, file in relative.items():
        if module == ():
            continue
        # The longest pattern that names the file wins: a file's own name over its folder's.
        found = sorted(
            ((len(pattern), height, side, pattern)
             for height, parts in enumerate(layers)
             for side, (_, patterns) in enumerate(parts)
             for pattern in patterns if matches(pattern, file)),
            reverse=True,
        )
        if not found:
            errors.append(f"{crate_name}: {file} is on no layer of {MAP} (place it there)")
            continue
        if len(found) > 1 and found[0][0] == found[1][0] and found[0][1:3] != found[1][1:3]:
            errors.append(f"{crate_name}: {file} is on two layers of {MAP} "
                          f"({found[0][3]}, {found[1][3]})")
        place[module] = found[0][1:3]
        used.update(pattern for _, _, _, pattern in found)
    for height, parts in enumerate(layers):
        for part_name, patterns in parts:
            for pattern in patterns:
                if pattern not in used:
                    errors.append(f"{crate_name}: {MAP} names {pattern} (layer {part_name}), "
                                  "which is no file of the crate")
    root_file = relative[()]
    for module in sorted(edges, key=relative.get):
        if module == () or module not in place:
            continue
        height, side = place[module]
        here = layers[height][side][0]
        for target in sorted(edges[module], key=relative.get):
            line = f"{crate_name}: {relative[module]} -> {relative[target]}"
            if target == ():
                errors.append(f"{line} (layer {here} imports the crate root {root_file} above it)")
                continue
            if target not in place:
                continue
            there = layers[place[target][0]][place[target][1]][0]
            if place[target][0] > height:
                errors.append(f"{line} (layer {here} imports layer {there} above it)")
            elif place[target][0] == height and place[target][1] != side:
                errors.append(f"{line} (layer {here} imports layer {there} beside it)")
    return errors


def map_names(text):
    """The names map.md's prose gives in backticks (fenced blocks left out), split at spaces,
    commas and parentheses."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    names = set()
    for span in re.finditer(r"`([^`\n]+)`", prose):
        for part in re.split(r"[\s,()]+", span.group(1)):
            if part:
                names.update((part, part.rstrip("/")))
    return names


def unnamed_files(src, names):
    """The source files under `src` (test code aside) that none of `names` names."""
    missing = []
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        if "tests" in rel.parts[:-1] or rel.name.endswith("tests.rs") or rel.name in ("lib.rs", "main.rs"):
            continue
        if rel.name == "mod.rs":
            folder = rel.parent
            ways = {folder.as_posix(), folder.name, "/".join(folder.parts[-2:])}
        else:
            ways = {rel.as_posix(), rel.with_suffix("").as_posix(), rel.name, rel.stem,
                    "/".join(rel.parts[-2:]), "/".join(rel.with_suffix("").parts[-2:])}
        if not ways & names:
            missing.append(rel.as_posix())
    return missing


# The workspace page's ES modules: no two import each other, directly or around a loop, as for
# the Rust files (they are served as they are, so the browser would resolve a loop at run time).
PAGE_MODULES = Path("crates/outfit-workspaces/src/web")


def page_module_loops(root):
    """The loops among the page's modules, each a sorted list of file names."""
    folder = root / PAGE_MODULES
    edges = {}
    for path in sorted(folder.glob("*.js")):
        edges[path.name] = sorted(set(re.findall(r'from\s+"\./([^"]+\.js)"', path.read_text())))
    for targets_of in list(edges.values()):
        for target in targets_of:
            edges.setdefault(target, [])
    return cycles(edges)


def main():
    root = Path(__file__).resolve().parent.parent
    named = [Path(a).resolve() for a in sys.argv[1:]]
    crates = named or sorted(p for p in (root / "crates").iterdir() if p.is_dir())
    layers, layer_errors = read_layers(root / MAP)
    if not named:
        layer_errors += [f"{MAP} has layers for {crate}, which is not in crates/"
                         for crate in layers if not (root / "crates" / crate).is_dir()]
    found = checked = layered = 0
    for crate in crates:
        if crate.name in layers and not any((crate / f"src/{f}").is_file() for f in ("lib.rs", "main.rs")):
            layer_errors.append(f"{MAP} has layers for {crate.name}, which has no src/lib.rs or src/main.rs")
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
            # The layers are those of the crate's library, or of a binary crate's main.rs.
            library = crate / "src/lib.rs"
            main_file = library if library.is_file() else crate / "src/main.rs"
            if crate.name in layers and target_root == main_file:
                layered += 1
                layer_errors += check_layers(crate.name, crate / "src", files, edges, layers[crate.name])
    if not named:
        for component in page_module_loops(root):
            found += 1
            print(f"loop in {PAGE_MODULES} ({len(component)} modules): " + ", ".join(component))
    names = map_names((root / MAP).read_text())
    for crate in crates:
        if crate.name in NAMED_CRATES:
            layer_errors += [f"{crate.name}: src/{rel} is not named in {MAP}"
                             for rel in unnamed_files(crate / "src", names)]
    for error in layer_errors:
        print(error)
    if found or layer_errors:
        sys.exit(1)
    print(f"no import loops in {checked} targets of {len(crates)} crates nor in the page's modules; "
          f"the imports of {layered} crates follow {MAP}'s layers, and it names every file of "
          f"{' and '.join(NAMED_CRATES)}")


if __name__ == "__main__":
    main()
