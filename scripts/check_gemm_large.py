#!/usr/bin/env python3
"""Checks `ck run gemm --dtype bf16 --backend cuda` at full benchmark sizes against torch: the
reference is an fp64 matmul on the GPU of the same bf16-rounded operands; the norm-wise relative
error must be <= 1e-5 (only the f32 accumulation differs). The fp64 CPU reference of the tests
is too slow at these sizes.

Usage: check_gemm_large.py CK MxNxK [MxNxK ...]   (run from the repository root)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch


def check(ck, m, n, k):
    g = torch.Generator().manual_seed(m * 7 + n * 3 + k)
    a = torch.rand(m, k, generator=g) * 2 - 1
    b = torch.rand(k, n, generator=g) * 2 - 1
    with tempfile.TemporaryDirectory() as d:
        pa, pb, pc = (os.path.join(d, f) for f in ("a.npy", "b.npy", "c.npy"))
        np.save(pa, a.numpy())
        np.save(pb, b.numpy())
        subprocess.run([ck, "run", "gemm", "--backend", "cuda", "--dtype", "bf16",
                        "--input-a", pa, "--input-b", pb, "--output", pc],
                       check=True, stdout=subprocess.DEVNULL)
        c = torch.from_numpy(np.load(pc)).cuda().double()
    ref = a.bfloat16().cuda().double() @ b.bfloat16().cuda().double()
    err = (torch.linalg.norm(c - ref) / torch.linalg.norm(ref)).item()
    ok = err <= 1e-5
    print(f"gemm bf16 {m}x{n}x{k}: relative error {err:.3e} vs torch fp64 ({'ok' if ok else 'FAIL'})")
    return ok


def main():
    ck, shapes = sys.argv[1], sys.argv[2:]
    results = [check(ck, *map(int, s.split("x"))) for s in shapes]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
