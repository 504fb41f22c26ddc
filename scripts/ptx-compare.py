#!/usr/bin/env python3
"""Compares two PTX modules entry by entry, for refactors that must leave the kernels alone:
which entries (and `.func`s) are byte-identical, which exist in one module only, and for each
that differs whether it holds the same instructions in another order (registers and labels
renamed, comments dropped): a basic-block reordering rather than new code. Exits 1 if an entry
differs in its instructions or exists in one module only.

Usage: scripts/ptx-compare.py BEFORE.ptx AFTER.ptx
"""
import collections
import re
import sys


def functions(path):
    """{name: text} of every `.entry` and `.func` of the module."""
    text = open(path).read()
    parts = re.split(r"\n(?=(?:\.visible |\.weak )?\.(?:entry|func) )", text)
    found = {}
    for p in parts[1:]:
        m = re.match(r"(?:\.visible |\.weak )?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?(\S+?)\s*\(", p)
        found[m.group(1) if m else p[:60]] = p
    return found


def instructions(text):
    """The function's instructions as a multiset, registers and labels renamed, comments out."""
    out = []
    for line in text.splitlines():
        line = line.split("//")[0].strip()
        if not line or line.endswith(":"):
            continue
        out.append(re.sub(r"%\w+\d+|\$L__\w+", "R", line))
    return collections.Counter(out)


before, after = functions(sys.argv[1]), functions(sys.argv[2])
only_before, only_after = sorted(set(before) - set(after)), sorted(set(after) - set(before))
same = [k for k in before if k in after and before[k] == after[k]]
reordered, changed = [], []
for k in before:
    if k in after and before[k] != after[k]:
        (reordered if instructions(before[k]) == instructions(after[k]) else changed).append(k)
print(f"{len(same)} of {len(before)} functions byte-identical")
for what, names in (("only before", only_before), ("only after", only_after),
                    ("same instructions, another order", reordered), ("changed", changed)):
    if names:
        print(f"{what}: {', '.join(names)}")
sys.exit(1 if only_before or only_after or changed else 0)
