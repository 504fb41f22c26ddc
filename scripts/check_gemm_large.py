#!/usr/bin/env python3
"""Checks `ck run gemm --backend cuda` at full benchmark sizes against torch, seven ways per
shape: `--dtype bf16` (bf16-rounded operands on the f32 GEMM), `--out-dtype f32` (the TMA
tensor-core GEMM, f32 C), `--out-dtype bf16` (the plain TMA GEMM), `--out-dtype bf16 --bias
--activation gelu` (the TMA GEMM compiled for bias + GELU, bf16 C), `--out-dtype bf16 --residual
--beta 0.5` (the TMA GEMM that copies D through its ring), the same with `--bias --activation
gelu` (the whole epilogue; `gemm::auto` picks its kernel) and `--dtype fp8-e4m3 --out-dtype bf16`
(the TMA fp8 GEMM). The reference is computed on the GPU in fp64 from the same
bf16-rounded operands; the norm-wise relative error must be <= 1e-5 for f32 C (only the f32
accumulation differs; times K / 8192 past K = 8192) and <= 4e-3 for bf16 C (one rounding). The fp64 CPU reference of the
tests is too slow at these sizes.

Usage: check_gemm_large.py CK MxNxK [MxNxK ...]   (run from the repository root)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

MODES = {
    "bf16 operands, f32 GEMM": (["--dtype", "bf16"], 1e-5),
    "tensor cores (TMA), f32 C": (["--out-dtype", "f32"], 1e-5),
    "TMA, bf16 C": (["--out-dtype", "bf16"], 4e-3),
    "TMA, bf16 C = gelu(A·B + bias)": (["--out-dtype", "bf16", "--activation", "gelu"], 4e-3),
    "TMA, bf16 C = A·B + 0.5·D": (["--out-dtype", "bf16", "--beta", "0.5"], 4e-3),
    "TMA, bf16 C = gelu(A·B + 0.5·D + bias)":
        (["--out-dtype", "bf16", "--beta", "0.5", "--activation", "gelu"], 4e-3),
    # The fp8 tensor cores accumulate with fewer bits than f32: a looser bound.
    "fp8 e4m3 (TMA), bf16 C": (["--dtype", "fp8-e4m3", "--out-dtype", "bf16"], 1e-2),
}


def e4m3_reference(a, b):
    """A·B from the e4m3 operands `ck run gemm --dtype fp8-e4m3` makes: one scale per tensor
    mapping its largest magnitude to 448, values rounded to nearest even (torch's conversion;
    no value exceeds the range, so saturation never applies), the product in fp64."""
    def q(x):
        s = x.abs().max().item() / 448.0
        return (x / s).to(torch.float8_e4m3fn).double() * s
    return q(a.cuda()) @ q(b.cuda())


def check(ck, m, n, k):
    g = torch.Generator().manual_seed(m * 7 + n * 3 + k)
    a = torch.rand(m, k, generator=g) * 2 - 1
    b = torch.rand(k, n, generator=g) * 2 - 1
    bias = torch.rand(n, generator=g) * 2 - 1
    resid = torch.rand(m, n, generator=g) * 2 - 1
    ab = a.bfloat16().cuda().double() @ b.bfloat16().cuda().double()
    ok = True
    with tempfile.TemporaryDirectory() as d:
        pa, pb, pc, pbias, pd = (os.path.join(d, f)
                                 for f in ("a.npy", "b.npy", "c.npy", "bias.npy", "d.npy"))
        np.save(pa, a.numpy())
        np.save(pb, b.numpy())
        np.save(pbias, bias.numpy())
        np.save(pd, resid.numpy())
        for name, (flags, tol) in MODES.items():
            fused, with_d = "--activation" in flags, "--beta" in flags
            extra = (["--bias", pbias] if fused else []) + (["--residual", pd] if with_d else [])
            subprocess.run([ck, "run", "gemm", "--backend", "cuda", "--input-a", pa,
                            "--input-b", pb, "--output", pc, *flags, *extra],
                           check=True, stdout=subprocess.DEVNULL)
            c = torch.from_numpy(np.load(pc)).cuda().double()
            ref = e4m3_reference(a, b) if "fp8-e4m3" in flags else ab
            if fused or with_d:
                ref = ab + (0.5 * resid.bfloat16().cuda().double() if with_d else 0)
            if fused:
                ref = torch.nn.functional.gelu(ref + bias.bfloat16().cuda().double(), approximate="tanh")
            err = (torch.linalg.norm(c - ref) / torch.linalg.norm(ref)).item()
            # f32 C's bound is for K <= 8192: the tensor cores' f32 accumulation error grows
            # with K (1.8e-5 at K = 16384).
            good = err <= (tol * max(1, k / 8192) if tol < 1e-4 else tol)
            ok &= good
            print(f"gemm {m}x{n}x{k} ({name}): relative error {err:.3e} vs torch fp64 ({'ok' if good else 'FAIL'})")
    return ok


def main():
    ck, shapes = sys.argv[1], sys.argv[2:]
    results = [check(ck, *map(int, s.split("x"))) for s in shapes]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
