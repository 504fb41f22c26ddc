#!/usr/bin/env python3
"""Prints the emulator's bank-probe counters next to ncu's, one row per (width, stride).

Usage: compare_banks.py EMU.json NCU.csv
EMU.json: `ck run bank-probe --sweep --json --backend emu`; NCU.csv: `ncu --csv --log-file` of
`ck run bank-probe --sweep --backend cuda` (launches in the same order). Exit status 1 if any
count differs.
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


def main(emu_path, ncu_path):
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
    bad = 0
    for e, h in zip(emu, hw):
        cells = []
        for hk, ek in keys:
            mark = "" if e[ek] == h.get(hk) else " !"
            bad += mark != ""
            cells.append(f"{e[ek]:>7} / {h.get(hk, '?'):>6}{mark:2}")
        label = e.get("case") or f"W{e['width']} S{e['stride']}"
        print(f"{label:>10} | " + " | ".join(cells))
    print(f"{len(emu) * 4 - bad} of {len(emu) * 4} counters equal" + (f"; {bad} differ (marked !)" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
