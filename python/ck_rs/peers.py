"""Triton peers of the row-wise operators — RMSNorm, LayerNorm, fused add + RMSNorm, softmax:
one program per row with the row in registers, as in Triton's tutorials. `python -m
ck_rs.bench` and the repository's `scripts/bench_peers.py` measure ck-rs against them."""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rmsnorm(x_ptr, g_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n + eps)
    tl.store(y_ptr + row * n + cols, (x * r * g).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _layernorm(x_ptr, g_ptr, b_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0)
    r = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n + cols, (d * r * g + b).to(y_ptr.dtype.element_ty), mask=mask)


def triton_layernorm(x, g, b):
    m, n = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n)
    _layernorm[(m,)](x, g, b, y, n, EPS, BLOCK=block, num_warps=min(16, max(4, block // 1024)))
    return y


@triton.jit
def _add_rmsnorm(x_ptr, res_ptr, g_ptr, r_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0)
    res = tl.load(res_ptr + row * n + cols, mask=mask, other=0.0)
    r = (x.to(tl.float32) + res.to(tl.float32)).to(r_ptr.dtype.element_ty)
    tl.store(r_ptr + row * n + cols, r, mask=mask)
    rf = r.to(tl.float32)
    s = 1.0 / tl.sqrt(tl.sum(rf * rf, axis=0) / n + eps)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n + cols, (rf * s * g).to(y_ptr.dtype.element_ty), mask=mask)


def triton_add_rmsnorm(x, res, g):
    m, n = x.shape
    r, y = torch.empty_like(x), torch.empty_like(x)
    block = triton.next_power_of_2(n)
    _add_rmsnorm[(m,)](x, res, g, r, y, n, EPS, BLOCK=block, num_warps=min(16, max(4, block // 1024)))
    return r, y


@triton.jit
def _softmax(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def triton_softmax(x):
    m, n = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n)
    _softmax[(m,)](x, y, n, BLOCK=block, num_warps=min(16, max(4, block // 1024)))
    return y


def triton_rmsnorm(x, g):
    m, n = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n)
    _rmsnorm[(m,)](x, g, y, n, EPS, BLOCK=block, num_warps=min(16, max(4, block // 1024)))
    return y
