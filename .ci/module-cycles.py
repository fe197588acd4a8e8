#!/usr/bin/env python3
"""Import cycles between the modules of one crate's `src/` (binaries under `src/bin/` and
test modules left out), from its `use crate::...` / `crate::...` paths and `super::`
sibling references. A child reaching into its own parent (`super::Type`) is not an edge.

    python3 .ci/module-cycles.py bridge/src [-v]

Prints the edges with -v and every cycle (strongly connected set of modules); exit 1 when
there is one.
"""
import os
import re
import sys


def modules(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == "bin" or rel_dir.startswith("bin" + os.sep):
            continue
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), root)[:-3]
            if rel.endswith("/mod"):
                rel = rel[:-4]
            if rel in ("lib", "main"):
                continue
            src = open(os.path.join(dirpath, f), encoding="utf-8").read()
            out[rel.replace(os.sep, "::")] = re.split(r"#\[cfg\(test\)\]", src)[0]
    return out


def edges(mods):
    names = set(mods)
    found = set()

    def add(a, b):
        if b in names and b != a and not a.startswith(b + "::") and not b.startswith(a + "::"):
            found.add((a, b))

    for m, src in mods.items():
        for path in re.findall(r"crate::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)", src):
            parts = path.split("::")
            for i in range(len(parts), 0, -1):
                if "::".join(parts[:i]) in names:
                    add(m, "::".join(parts[:i]))
                    break
        for group in re.findall(r"use crate::\{([^}]*)\}", src):
            for t in re.findall(r"\b([a-z_][a-z0-9_]*)\b", group):
                add(m, t)
        parent = m.rsplit("::", 1)[0] if "::" in m else ""
        for t in re.findall(r"\bsuper::([a-z_][a-z0-9_]*)", src):
            add(m, f"{parent}::{t}" if parent else t)
    return found


def cycles(es):
    graph = {}
    for a, b in es:
        graph.setdefault(a, set()).add(b)
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "bridge/src"
    es = edges(modules(root))
    if "-v" in sys.argv:
        for a, b in sorted(es):
            print(f"  {a} -> {b}")
    found = cycles(es)
    print(f"{root}: {len(es)} module edges, {len(found)} cycles")
    for c in found:
        print("  cycle: " + " <-> ".join(c))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
