#!/usr/bin/env python3
"""Import circles between the files of Rust crates (issue 21, item 6).

Usage: tools/import-cycles.py CRATE_SRC_DIR...  (e.g. sdk-rust/src protocol/src)

Each file is a node; `crate::a::b` and `super::x` paths outside `#[cfg(test)]`
modules (and outside comments) are edges to the file of the deepest module
they name (a module re-exported at the crate root, `crate::timer` for
`engine::timer`, is followed to its file). Prints every strongly connected component of more than one file
and the number of files in them; exit status 1 when there is any.
"""

import os
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def module_files(src):
    """Module path (tuple) -> file, for every .rs file under src."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            mods[tuple(rel)] = os.path.join(root, f)
    return mods


def code_lines(path):
    """The file's lines before its `#[cfg(test)]` module, comments dropped."""
    out = []
    for line in open(path, encoding="utf-8"):
        if line.startswith("#[cfg(test)]"):
            break
        out.append(line.split("//", 1)[0])
    return out


def edges(src):
    mods = module_files(src)
    graph = {f: set() for f in mods.values()}
    for mod, f in mods.items():
        for line in code_lines(f):
            for root, rest in PATH.findall(line):
                parts = rest.split("::")[1:]
                base = () if root == "crate" else mod[:-1] if root == "super" else mod
                path = base + tuple(parts)
                if root == "crate" and parts and (parts[0],) not in mods:
                    # A module re-exported at the root (`use engine::timer;`):
                    # the one file of that name one level down.
                    found = [m for m in mods if len(m) == 2 and m[1] == parts[0]]
                    if len(found) == 1:
                        path = found[0] + tuple(parts[1:])
                # The deepest module the path names.
                while path and path not in mods:
                    path = path[:-1]
                target = mods.get(path)
                if target and target != f:
                    graph[f].add(target)
    return graph


def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    total = 0
    for src in sys.argv[1:]:
        for comp in sccs(edges(src)):
            if len(comp) > 1:
                total += len(comp)
                print("circle:", " ".join(sorted(comp)))
    print(f"files in import circles: {total}")
    sys.exit(1 if total else 0)


if __name__ == "__main__":
    main()
