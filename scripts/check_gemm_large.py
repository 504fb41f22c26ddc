#!/usr/bin/env python3
"""Checks the GEMM family's `ck run` commands on the GPU (`--backend cuda`) at full benchmark
sizes against torch, seven ways per shape: `sgemm` (the SIMT f32 GEMM on f32 operands), `gemm`
(the tensor-core GEMM `gemm::auto` picks, bf16 operands, f32 C), `gemm --dtype bf16` (bf16 C),
the same with `--bias --activation gelu`, with `--residual --beta 0.5`, with both (the whole
epilogue), and `linear-fp8` (the TMA fp8 GEMM) on e4m3 operands scaled per tensor. The
reference is computed on the GPU in fp64 from the same rounded operands; the norm-wise relative
error must be <= 1e-5 for f32 C (only the f32 accumulation differs; times K / 8192 past
K = 8192) and <= 4e-3 for bf16 C (one rounding). The fp64 CPU reference of the tests is too
slow at these sizes.

Usage: check_gemm_large.py CK MxNxK [MxNxK ...]   (run from the repository root)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

# name: (command, flags, tolerance)
MODES = {
    "SIMT f32 GEMM, f32 operands": ("sgemm", [], 1e-5),
    "tensor cores, f32 C": ("gemm", [], 1e-5),
    "bf16 C": ("gemm", ["--dtype", "bf16"], 4e-3),
    "bf16 C = gelu(A·B + bias)": ("gemm", ["--dtype", "bf16", "--activation", "gelu"], 4e-3),
    "bf16 C = A·B + 0.5·D": ("gemm", ["--dtype", "bf16", "--beta", "0.5"], 4e-3),
    "bf16 C = gelu(A·B + 0.5·D + bias)":
        ("gemm", ["--dtype", "bf16", "--beta", "0.5", "--activation", "gelu"], 4e-3),
    # The fp8 tensor cores accumulate with fewer bits than f32: a looser bound.
    "fp8 e4m3 (TMA), bf16 C": ("linear-fp8", ["--dtype", "bf16"], 1e-2),
}


def e4m3_scale(x):
    """The per-tensor scale mapping `x`'s largest magnitude to 448, e4m3's largest value."""
    return x.abs().max().item() / 448.0


def e4m3_reference(a, b):
    """A·B from e4m3 operands: each tensor divided by its scale, rounded to nearest even
    (torch's conversion; no value exceeds the range, so saturation never applies), the
    product in fp64 with the scales applied."""
    def q(x):
        s = e4m3_scale(x)
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
        files = ("a.npy", "b.npy", "c.npy", "bias.npy", "d.npy", "a8.npy", "b8.npy")
        pa, pb, pc, pbias, pd, pa8, pb8 = (os.path.join(d, f) for f in files)
        np.save(pa, a.numpy())
        np.save(pb, b.numpy())
        np.save(pbias, bias.numpy())
        np.save(pd, resid.numpy())
        sa, sb = e4m3_scale(a), e4m3_scale(b)
        np.save(pa8, (a / sa).numpy())
        np.save(pb8, (b / sb).t().contiguous().numpy())  # nn.Linear's weight: [N, K]
        for name, (command, flags, tol) in MODES.items():
            fused, with_d = "--activation" in flags, "--beta" in flags
            extra = (["--bias", pbias] if fused else []) + (["--residual", pd] if with_d else [])
            if command == "linear-fp8":
                inputs = ["--x", pa8, "--weight", pb8, "--output", pc, "--alpha", str(sa * sb)]
            else:
                inputs = ["--input-a", pa, "--input-b", pb, "--output", pc]
            subprocess.run([ck, "run", command, "--backend", "cuda", *inputs, *flags, *extra],
                           check=True, stdout=subprocess.DEVNULL)
            c = torch.from_numpy(np.load(pc)).cuda().double()
            ref = {"linear-fp8": lambda: e4m3_reference(a, b),
                   "sgemm": lambda: a.cuda().double() @ b.cuda().double()}.get(command, lambda: ab)()
            if fused or with_d:
                ref = ab + (0.5 * resid.bfloat16().cuda().double() if with_d else 0)
            if fused:
                ref = torch.nn.functional.gelu(ref + bias.bfloat16().cuda().double(), approximate="tanh")
            err = (torch.linalg.norm(c - ref) / torch.linalg.norm(ref)).item()
            # f32 C's bound is for K <= 8192: the tensor cores' f32 accumulation error grows
            # with K (1.8e-5 at K = 16384).
            good = err <= (tol * max(1, k / 8192) if tol < 1e-4 else tol)
            ok &= good
            print(f"{command} {m}x{n}x{k} ({name}): relative error {err:.3e} vs torch fp64 ({'ok' if good else 'FAIL'})")
    return ok


def main():
    ck, shapes = sys.argv[1], sys.argv[2:]
    results = [check(ck, *map(int, s.split("x"))) for s in shapes]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
