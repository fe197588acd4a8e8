#!/usr/bin/env python3
"""Import cycles between the modules of every crate in the workspace.

    python3 .ci/module-cycles.py [CRATE_SRC ...] [-v]

With no argument it reads the workspace's `Cargo.toml` and checks every member's `src/`
(the library, and each binary under `src/bin/` as a crate of its own; a binary-only
member is read from its `src/main.rs`). Paths come from
code only: comments (doc links included) are stripped first, and `#[cfg(test)]` modules
are left out.

A module is checked at every level of the tree: for each parent (the crate root
included), its direct children form a graph in which every descendant is collapsed into
the child it lives under. So `config -> export::otlp -> otlp_in -> config` is the cycle
`config <-> export <-> otlp_in` among the root's children, even though no two files
name each other. A child reaching into its own ancestor (`super::Type`) is the tree's
own shape, not an edge.

Prints the edges with -v and every cycle (strongly connected set of modules) with the
file-level edges that make it; exit 1 when there is one.
"""
import os
import re
import sys

TOKEN = re.compile(
    r'//[^\n]*|/\*.*?\*/|r(#*)".*?"\1|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'', re.S
)


def strip(src):
    """The source with comments removed and string/char literals emptied."""

    def keep(m):
        t = m.group(0)
        if t.startswith("//") or t.startswith("/*"):
            return "\n" * t.count("\n")
        return '""'

    return TOKEN.sub(keep, src)


def test_free(src):
    """The source without its `#[cfg(test)]` items (a `mod tests { ... }` block)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", src):
        if m.start() < i:
            continue
        out.append(src[i : m.start()])
        j = src.find("{", m.end())
        semi = src.find(";", m.end())
        if j < 0 or (0 <= semi < j):
            i = semi + 1 if semi >= 0 else len(src)
            continue
        depth = 0
        for k in range(j, len(src)):
            if src[k] == "{":
                depth += 1
            elif src[k] == "}":
                depth -= 1
                if depth == 0:
                    i = k + 1
                    break
        else:
            i = len(src)
    out.append(src[i:])
    return "".join(out)


def crate_modules(root, files):
    """Module path -> code, for the given files of one crate rooted at `root`."""
    out = {}
    for path in files:
        rel = os.path.relpath(path, root)[:-3]
        if rel.endswith(os.sep + "mod"):
            rel = rel[: -len(os.sep + "mod")]
        if rel in ("lib", "main", "mod"):
            rel = ""
        src = open(path, encoding="utf-8").read()
        out[rel.replace(os.sep, "::")] = test_free(strip(src))
    return out


def crates(src_dir):
    """The crates under one `src/`: the library's files, and each binary's."""
    found = []
    lib = []
    bin_dir = os.path.join(src_dir, "bin")
    for dirpath, dirs, files in os.walk(src_dir):
        if dirpath == bin_dir:
            for f in files:
                if f.endswith(".rs"):
                    found.append((f"{src_dir}/bin/{f}", dirpath, [os.path.join(dirpath, f)]))
            for d in dirs:
                sub = os.path.join(dirpath, d)
                rs = [os.path.join(p, f) for p, _, fs in os.walk(sub) for f in fs if f.endswith(".rs")]
                found.append((sub, sub, rs))
            dirs[:] = []
            continue
        lib.extend(os.path.join(dirpath, f) for f in files if f.endswith(".rs"))
    if lib:
        found.insert(0, (src_dir, src_dir, lib))
    return found


def edges(mods):
    """File-level edges (a, b): module a names module b (the longest known prefix)."""
    names = set(mods)
    found = set()

    def resolve(parts):
        for i in range(len(parts), 0, -1):
            cand = "::".join(parts[:i])
            if cand in names:
                return cand
        return None

    for m, src in mods.items():
        here = m.split("::") if m else []
        for path in re.findall(r"\bcrate::((?:[A-Za-z_][A-Za-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)", src):
            t = resolve(path.split("::"))
            if t is not None:
                found.add((m, t))
        for group in re.findall(r"\bcrate::\{([^}]*)\}", src):
            for t in re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", group):
                if t in names:
                    found.add((m, t))
        for sup, path in re.findall(r"\b((?:super::)+)([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)", src):
            up = sup.count("super::")
            base = here[: max(0, len(here) - up)]
            t = resolve(base + path.split("::"))
            if t is not None:
                found.add((m, t))
    return {(a, b) for a, b in found if a != b}


def is_within(m, p):
    return p == "" or m == p or m.startswith(p + "::")


def child_of(m, p):
    """The direct child of parent p that module m lives under (None for p itself)."""
    rest = m if p == "" else m[len(p) + 2 :]
    if not rest:
        return None
    head = rest.split("::")[0]
    return head if p == "" else f"{p}::{head}"


def level_graphs(mods, es):
    """(parent, {child: {child}}, {(child, child): [file edges]}) for every parent module."""
    out = []
    for p in sorted(mods):
        graph, why = {}, {}
        for a, b in es:
            if not (is_within(a, p) and is_within(b, p)):
                continue
            ca, cb = child_of(a, p), child_of(b, p)
            if ca is None or cb is None or ca == cb:
                continue
            graph.setdefault(ca, set()).add(cb)
            why.setdefault((ca, cb), []).append((a, b))
        if graph:
            out.append((p, graph, why))
    return out


def sccs(graph):
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

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def workspace_srcs():
    text = open("Cargo.toml", encoding="utf-8").read()
    m = re.search(r"^members\s*=\s*\[(.*?)\]", text, re.S | re.M)
    members = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    return [os.path.join(d, "src") for d in members if os.path.isdir(os.path.join(d, "src"))]


def main():
    verbose = "-v" in sys.argv
    roots = [a for a in sys.argv[1:] if not a.startswith("-")] or workspace_srcs()
    total = 0
    for src in roots:
        for name, root, files in crates(src):
            mods = crate_modules(root, files)
            es = edges(mods)
            found = []
            for parent, graph, why in level_graphs(mods, es):
                for scc in sccs(graph):
                    found.append((parent, scc, why))
            if verbose:
                for a, b in sorted(es):
                    print(f"  {name}: {a or 'crate'} -> {b or 'crate'}")
            print(f"{name}: {len(mods)} modules, {len(es)} edges, {len(found)} cycles")
            for parent, scc, why in found:
                print(f"  cycle under {parent or 'the crate root'}: " + " <-> ".join(scc))
                members = set(scc)
                for (ca, cb), files in sorted(why.items()):
                    if ca in members and cb in members:
                        for a, b in sorted(files):
                            print(f"    {ca} -> {cb}: {a} names {b}")
            total += len(found)
    print(f"{total} cycles")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
