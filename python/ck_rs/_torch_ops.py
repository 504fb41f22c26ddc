"""The operators as PyTorch custom ops (``torch.ops.ck_rs.*``), each with a fake (meta)
implementation, so that ``torch.compile`` keeps them in its graph without a break.

The implementations run below autograd (under ``torch.no_grad()``, so the eager functions' check
for tensors that require grad does not apply to them): called on such tensors, an op keeps the
graph, and ``backward()`` raises torch's error for an op with no autograd formula, rather than
losing the gradient."""

from typing import List, Optional, Tuple

import torch

import ck_rs


@torch.library.custom_op("ck_rs::rmsnorm", mutates_args=())
def rmsnorm(x: torch.Tensor, gamma: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    with torch.no_grad():
        return ck_rs.rmsnorm(x, gamma, eps)


@rmsnorm.register_fake
def _(x, gamma, eps=1e-6):
    return torch.empty_like(x)


@torch.library.custom_op("ck_rs::add_rmsnorm", mutates_args=())
def add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, gamma: torch.Tensor, eps: float = 1e-6
) -> Tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        return ck_rs.add_rmsnorm(x, residual, gamma, eps)


@add_rmsnorm.register_fake
def _(x, residual, gamma, eps=1e-6):
    return torch.empty_like(x), torch.empty_like(x)


@torch.library.custom_op("ck_rs::layernorm", mutates_args=())
def layernorm(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    with torch.no_grad():
        return ck_rs.layernorm(x, gamma, beta, eps)


@layernorm.register_fake
def _(x, gamma, beta, eps=1e-5):
    return torch.empty_like(x)


@torch.library.custom_op("ck_rs::softmax", mutates_args=())
def softmax(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return ck_rs.softmax(x)


@softmax.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("ck_rs::gemm", mutates_args=())
def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return ck_rs.gemm(a, b)


@gemm.register_fake
def _(a, b):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=torch.float32)


@torch.library.custom_op("ck_rs::grouped_mm", mutates_args=())
def grouped_mm(a: torch.Tensor, b: torch.Tensor, tokens: List[int]) -> torch.Tensor:
    with torch.no_grad():
        return ck_rs.grouped_mm(a, b, tokens)


@grouped_mm.register_fake
def _(a, b, tokens):
    return a.new_empty((a.shape[0], b.shape[2]), dtype=torch.float32)


@torch.library.custom_op("ck_rs::attention", mutates_args=())
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: Optional[float] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        return ck_rs.attention(q, k, v, causal=causal, scale=scale, return_lse=True)


@attention.register_fake
def _(q, k, v, causal=False, scale=None):
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)
