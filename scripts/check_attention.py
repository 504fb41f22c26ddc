#!/usr/bin/env python3
"""Attention on the GPU at benchmark sizes against torch: runs `ck run attention --backend cuda`
on random Q, K, V (.npy, float32 values that are exact in bf16) and compares O and the LSE with
an fp32 reference computed by torch from the same values (explicit bottom-right causal mask).

Usage: check_attention.py CK [BxHxHkvxSqxSkxD[:causal] ...]
Passes when O's norm-wise relative error is ≤ 1e-2 and every LSE is within 1e-3 (relative to
max(1, |LSE|)).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

DEFAULT = ["2x16x16x1024x1024x128:causal", "1x16x4x4096x4096x64", "1x8x2x1000x3000x128:causal",
           "1x4x4x3000x1000x64:causal"]


def reference(q, k, v, causal):
    b, h, sq, d = q.shape
    hk, sk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(h // hk, dim=1)
    v = v.repeat_interleave(h // hk, dim=1)
    s = (q @ k.transpose(-1, -2)) / d ** 0.5
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p @ v, lse


def main(ck, cases):
    status = 0
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            dims, causal = (case[:-7], True) if case.endswith(":causal") else (case, False)
            b, h, hk, sq, sk, d = map(int, dims.split("x"))
            bf16 = lambda a: torch.from_numpy(a).bfloat16().float().numpy()
            q = bf16(rng.uniform(-2, 2, (b, h, sq, d)).astype(np.float32))
            k = bf16(rng.uniform(-1, 1, (b, hk, sk, d)).astype(np.float32))
            v = bf16(rng.uniform(-1, 1, (b, hk, sk, d)).astype(np.float32))
            paths = {n: os.path.join(tmp, n + ".npy") for n in "qkvol"}
            for n, a in zip("qkv", (q, k, v)):
                np.save(paths[n], a)
            cmd = [ck, "run", "attention", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
                   "--output", paths["o"], "--lse", paths["l"], "--backend", "cuda"] + (["--causal"] if causal else [])
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{case}: FAILED: {run.stderr.strip()}")
                status = 1
                continue
            o, lse = np.load(paths["o"]), np.load(paths["l"])
            ro, rl = reference(*(torch.from_numpy(a).cuda() for a in (q, k, v)), causal)
            ro, rl = ro.cpu().double().numpy(), rl.cpu().double().numpy()
            o_err = np.linalg.norm(o - ro) / max(np.linalg.norm(ro), 1e-30)
            finite = np.isfinite(rl)
            lse_ok = np.array_equal(np.isfinite(lse), finite) and np.all(
                np.abs(lse[finite] - rl[finite]) <= 1e-3 * np.maximum(1.0, np.abs(rl[finite])))
            lse_err = np.max(np.abs(lse[finite] - rl[finite]), initial=0.0)
            ok = o_err <= 1e-2 and lse_ok
            status |= not ok
            print(f"{case}: O rel. error {o_err:.2e}, LSE max abs. error {lse_err:.2e}: {'ok' if ok else 'FAILED'}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:] or DEFAULT))
