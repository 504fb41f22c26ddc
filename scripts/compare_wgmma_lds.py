#!/usr/bin/env python3
"""Prints gemm_bf16_wgmma's shared-memory counters, emulator next to ncu, for one launch.

Usage: compare_wgmma_lds.py EMU.json NCU.csv
EMU.json: `ck run gemm-wgmma --n 64 --json --backend emu`; NCU.csv: `ncu --csv --log-file` of the
same command on the GPU with the metrics below. All of the kernel's shared-memory writes are
cp.async (LDGSTS), which the emulator counts as 16-byte stores; its wgmma reads bypass the LSU
instructions the emulator profiles, so for them only ncu's counts are shown. Exit status 1 if
the cp.async instruction or conflict counts differ.
"""
import csv
import json
import sys

METRICS = {
    "smsp__inst_executed_op_ldgsts.sum": "ldgsts_instructions",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum": "ldgsts_conflicts",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_gmma.sum": "gmma_wavefronts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum": "gmma_conflicts",
}


def main(emu_path, ncu_path):
    emu = json.load(open(emu_path))
    lines = [l for l in open(ncu_path) if l.startswith('"')]
    hw = {}
    for row in csv.DictReader(lines):
        if row.get("Metric Name") in METRICS:
            hw[METRICS[row["Metric Name"]]] = int(float(row["Metric Value"].replace(",", "")))
    rows = [
        ("cp.async instructions", emu["shared_store_requests"], hw.get("ldgsts_instructions")),
        ("cp.async bank conflicts", emu["shared_store_conflicts"], hw.get("ldgsts_conflicts")),
        ("wgmma shared wavefronts", "-", hw.get("gmma_wavefronts")),
        ("wgmma bank conflicts", "-", hw.get("gmma_conflicts")),
    ]
    print(f"{'gemm_bf16_wgmma 257x264x64':>26} | {'emulator':>10} | {'ncu':>10}")
    bad = 0
    for name, e, h in rows:
        mark = " !" if e != "-" and e != h else ""
        bad += bool(mark)
        print(f"{name:>26} | {e:>10} | {h!s:>10}{mark}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
