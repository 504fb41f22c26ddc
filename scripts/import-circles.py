#!/usr/bin/env python3
"""Lists import circles between the files of a Rust crate's source folder: file A imports file B
when A names B's module in a `use` or a path (`crate::gemm::tma::…`, `super::store::…`). Paths
between a module and its own parent or children (a folder's `mod.rs` and its files) are its
structure and are not counted. Prints each circle, or "no import circle"; exits 1 if there is
one.

Usage: scripts/import-circles.py ck-kernels/src [ck-kernels/cli/src ...]
"""
import os
import re
import sys


def modules(root):
    """{module path (tuple): file} for every .rs file under `root` (lib.rs/main.rs: the root)."""
    found = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs") or "/bin" in dirpath[len(root):]:
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), root)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            found[tuple(rel)] = os.path.join(dirpath, f)
    return found


def code(path):
    """The file without comments and string literals (doc links do not count as imports)."""
    text = open(path).read()
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    return re.sub(r"//[^\n]*", "", text)


def target(mods, here, path):
    """The longest module of `mods` that `path` (a list of segments, from `here`) names."""
    if path[0] == "crate":
        abs_path = path[1:]
    elif path[0] == "super":
        base = list(here)
        while path and path[0] == "super":
            base, path = base[:-1], path[1:]
        abs_path = base + path
    elif path[0] == "self":
        abs_path = list(here) + path[1:]
    else:
        return None
    for k in range(len(abs_path), -1, -1):
        if tuple(abs_path[:k]) in mods:
            return tuple(abs_path[:k])
    return None


def graph(root):
    mods = modules(root)
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        for match in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", code(f)):
            t = target(mods, m, match.group(1).split("::"))
            # A module and its own parent or children: structure, not imports.
            if t is not None and t != m and t != m[: len(t)] and t[: len(m)] != m:
                edges[m].add(t)
    return mods, edges


def circles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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
            if len(comp) > 1:
                out.append(comp)

    for v in edges:
        if v not in index:
            visit(v)
    return out


status = 0
for root in sys.argv[1:]:
    mods, edges = graph(root.rstrip("/"))
    found = circles(edges)
    names = lambda c: ", ".join(mods[m] for m in sorted(c))
    for c in found:
        print(f"{root}: import circle: {names(c)}")
        status = 1
    if not found:
        print(f"{root}: no import circle ({len(mods)} files, {sum(map(len, edges.values()))} imports)")
sys.exit(status)
