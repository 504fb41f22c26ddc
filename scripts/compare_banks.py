#!/usr/bin/env python3
"""Prints the emulator's bank-probe counters next to ncu's, one row per (width, stride).

Usage: compare_banks.py EMU.json NCU.csv [--excess PERCENT]
EMU.json: `ck run bank-probe --sweep --json --backend emu`; NCU.csv: `ncu --csv --log-file` of
`ck run bank-probe --sweep --backend cuda` (launches in the same order). Exit status 1 if any
count differs. With --excess, ncu counts above the emulator's by at most PERCENT of the
emulator's wavefronts of the same kind (extra wavefronts count as conflicts too) are marked `~`
and pass: in kernels with many warps in flight ncu counts a few extra wavefronts that vary from
run to run (a timing effect, not a property of one instruction's addresses, which is what the
emulator models).
"""
import csv
import json
import sys

METRICS = {
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": "ld_wavefronts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "ld_conflicts",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": "st_wavefronts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "st_conflicts",
}


def main(emu_path, ncu_path, excess=0.0):
    emu = json.load(open(emu_path))
    lines = [l for l in open(ncu_path) if l.startswith('"')]
    launches = {}
    for row in csv.DictReader(lines):
        if row.get("Metric Name") in METRICS:
            value = float(row["Metric Value"].replace(",", ""))
            launches.setdefault(int(row["ID"]), {})[METRICS[row["Metric Name"]]] = int(value)
    hw = [launches[k] for k in sorted(launches)]
    if len(hw) != len(emu):
        print(f"ncu profiled {len(hw)} launches, the emulator ran {len(emu)}")
        return 1
    keys = [("ld_wavefronts", "shared_load_wavefronts"), ("ld_conflicts", "shared_load_conflicts"),
            ("st_wavefronts", "shared_store_wavefronts"), ("st_conflicts", "shared_store_conflicts")]
    print(f"{'case':>10} | {'ld wavefronts':>15} | {'ld conflicts':>15} | {'st wavefronts':>15} | {'st conflicts':>15} | (emulator / ncu)")
    bad = near = 0
    for e, h in zip(emu, hw):
        cells = []
        for hk, ek in keys:
            mine, theirs = e[ek], h.get(hk)
            wavefronts = e[ek.replace("conflicts", "wavefronts")]
            if mine == theirs:
                mark = ""
            elif theirs is not None and mine < theirs <= mine + wavefronts * excess / 100:
                mark, near = " ~", near + 1
            else:
                mark, bad = " !", bad + 1
            cells.append(f"{mine:>7} / {theirs if theirs is not None else '?':>6}{mark:2}")
        label = e.get("case") or f"W{e['width']} S{e['stride']}"
        print(f"{label:>10} | " + " | ".join(cells))
    total = len(emu) * 4
    summary = f"{total - bad - near} of {total} counters equal"
    if near:
        summary += f"; {near} within +{excess:g} % (marked ~)"
    if bad:
        summary += f"; {bad} differ (marked !)"
    print(summary)
    return 1 if bad else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    excess = 0.0
    if "--excess" in args:
        i = args.index("--excess")
        excess = float(args[i + 1])
        del args[i : i + 2]
    sys.exit(main(*args[:2], excess=excess))
