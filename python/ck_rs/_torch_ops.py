"""The operators as PyTorch custom ops (``torch.ops.ck_rs.*``), each with a fake (meta)
implementation, so that ``torch.compile`` keeps them in its graph without a break.

The implementations run below autograd (under ``torch.no_grad()``, so the eager functions' check
for tensors that require grad does not apply to them). An op with a backward operator has its
autograd formula registered, saving only what that backward reads: ``rmsnorm`` (x, gamma),
``add_rmsnorm`` (r, gamma), ``layernorm`` (x, gamma and its own mean and rstd outputs),
``softmax`` (its output), ``linear`` (x and the weight; without an activation); on the others ``backward()`` raises torch's error for an op with no autograd formula, rather than
losing the gradient. A backward op's own backward (double backward) is an error."""

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
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(y, mean, rstd)``, as ``aten::native_layer_norm``: the statistics are what the
    backward reads."""
    with torch.no_grad():
        return ck_rs.layernorm(x, gamma, beta, eps, return_stats=True)


@layernorm.register_fake
def _(x, gamma, beta, eps=1e-5):
    rows = x.shape[:-1]
    return torch.empty_like(x), x.new_empty(rows, dtype=torch.float32), x.new_empty(rows, dtype=torch.float32)


@torch.library.custom_op("ck_rs::softmax", mutates_args=())
def softmax(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return ck_rs.softmax(x)


@softmax.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("ck_rs::gemm", mutates_args=())
def gemm(a: torch.Tensor, b: torch.Tensor, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    with torch.no_grad():
        return ck_rs.gemm(a, b, out_dtype=out_dtype)


@gemm.register_fake
def _(a, b, out_dtype=None):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or torch.float32)


@torch.library.custom_op("ck_rs::linear", mutates_args=())
def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    residual: Optional[torch.Tensor] = None,
    activation: str = "none",
    beta: float = 1.0,
) -> torch.Tensor:
    with torch.no_grad():
        return ck_rs.linear(x, weight, bias, residual, activation=activation, beta=beta, out_dtype=x.dtype)


@linear.register_fake
def _(x, weight, bias=None, residual=None, activation="none", beta=1.0):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@torch.library.custom_op("ck_rs::gated_linear", mutates_args=())
def gated_linear(x: torch.Tensor, weight: torch.Tensor, activation: str = "silu") -> torch.Tensor:
    with torch.no_grad():
        return ck_rs.gated_linear(x, weight, activation=activation)


@gated_linear.register_fake
def _(x, weight, activation="silu"):
    return x.new_empty((*x.shape[:-1], weight.shape[0] // 2), dtype=torch.bfloat16)


@torch.library.custom_op("ck_rs::rope_qkv", mutates_args=())
def rope_qkv(
    qkv: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    heads: int,
    kv_heads: int,
    rotary_dim: Optional[int] = None,
    interleaved: bool = False,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        return ck_rs.rope_qkv(qkv, cos, sin, heads, kv_heads, rotary_dim=rotary_dim, interleaved=interleaved)


@rope_qkv.register_fake
def _(qkv, cos, sin, heads, kv_heads, rotary_dim=None, interleaved=False):
    b, s, width = qkv.shape
    d = width // (heads + 2 * kv_heads)
    return qkv.new_empty((b, heads, s, d)), qkv.new_empty((b, kv_heads, s, d)), qkv.new_empty((b, kv_heads, s, d))


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
    out_layout: str = "bhsd",
) -> Tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        return ck_rs.attention(q, k, v, causal=causal, scale=scale, return_lse=True, out_layout=out_layout)


@attention.register_fake
def _(q, k, v, causal=False, scale=None, out_layout="bhsd"):
    b, h, s, d = q.shape
    o = q.new_empty((b, s, h, d)) if out_layout == "bshd" else torch.empty_like(q)
    return o, q.new_empty(q.shape[:3], dtype=torch.float32)


def _register(desc):
    """A custom op for an operator of the registry that has no hand-written one above."""
    name = desc["name"]
    inputs = [p for p in desc["params"] if p["role"] == "input"]
    outputs = [p for p in desc["params"] if p["role"] == "output"]
    args = [f"Tensor {p['name']}" for p in inputs]
    args += [f"float {s['name']}={s['default']!r}" for s in desc["scalars"]]
    result = "Tensor" if len(outputs) == 1 else f"({', '.join(['Tensor'] * len(outputs))})"
    eager = getattr(ck_rs, name)

    def impl(*args, **kwargs):
        with torch.no_grad():
            return eager(*args, **kwargs)

    op = torch.library.custom_op(
        f"ck_rs::{name}", impl, mutates_args=(), schema=f"({', '.join(args)}) -> {result}"
    )

    @op.register_fake
    def _(*args, **kwargs):
        tensors = dict(zip((p["name"] for p in inputs), args))
        sizes = ck_rs._sizes(desc, tensors)
        like = args[0]
        outs = tuple(
            like.new_empty(
                ck_rs._shape(p, sizes),
                dtype=torch.float32 if p["elem"] == "f32" else like.dtype,
            )
            for p in outputs
        )
        return outs[0] if len(outs) == 1 else outs

    return op


for _desc in ck_rs._OPERATORS:
    if _desc["name"] not in globals():
        globals()[_desc["name"]] = _register(_desc)


def _rmsnorm_setup(ctx, inputs, output):
    x, gamma, eps = inputs
    ctx.save_for_backward(x, gamma)
    ctx.eps = eps


def _rmsnorm_backward(ctx, dy):
    x, gamma = ctx.saved_tensors
    dx, dgamma = rmsnorm_backward(dy.contiguous(), x, gamma, eps=ctx.eps)
    return dx, dgamma, None


rmsnorm.register_autograd(_rmsnorm_backward, setup_context=_rmsnorm_setup)


def _add_rmsnorm_setup(ctx, inputs, output):
    _, _, gamma, eps = inputs
    ctx.save_for_backward(output[1], gamma)  # r = x + residual, what y is the RMSNorm of
    ctx.eps = eps


def _add_rmsnorm_backward(ctx, dy, dr):
    r, gamma = ctx.saved_tensors
    dr_norm, dgamma = rmsnorm_backward(dy.contiguous(), r, gamma, eps=ctx.eps)
    d = dr_norm if dr is None else dr_norm + dr
    return d, d, dgamma, None


add_rmsnorm.register_autograd(_add_rmsnorm_backward, setup_context=_add_rmsnorm_setup)


def _layernorm_setup(ctx, inputs, output):
    x, gamma, _, _ = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, gamma, mean, rstd)
    ctx.mark_non_differentiable(mean, rstd)


def _layernorm_backward(ctx, dy, _dmean, _drstd):
    x, gamma, mean, rstd = ctx.saved_tensors
    dx, dgamma, dbeta = layernorm_backward(dy.contiguous(), x, gamma, mean, rstd)
    return dx, dgamma, dbeta, None


layernorm.register_autograd(_layernorm_backward, setup_context=_layernorm_setup)


def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_backward(ctx, dy):
    (y,) = ctx.saved_tensors
    return softmax_backward(dy.contiguous(), y)


softmax.register_autograd(_softmax_backward, setup_context=_softmax_setup)


def _linear_setup(ctx, inputs, output):
    x, weight, bias, residual, activation, beta = inputs
    ctx.save_for_backward(x, weight)
    ctx.activation, ctx.beta = activation, beta
    ctx.has_bias, ctx.has_residual = bias is not None, residual is not None


def _product(a, b, dtype):
    """``a @ b`` on the ``ck_rs::gemm`` op (traceable, so a compiled backward keeps it) in
    ``dtype``: bfloat16 straight from the tensor-core kernel where N and K allow it, else
    through its float32 result."""
    if dtype == torch.bfloat16 and a.shape[1] % 8 == 0 and b.shape[1] % 8 == 0:
        return gemm(a, b, torch.bfloat16)
    return gemm(a, b).to(dtype)


def _linear_backward(ctx, dy):
    """``dx = dy · W``, ``dW = dyᵀ · x`` (``dyᵀ`` copied: the GEMM reads A row-major),
    ``dbias = Σ_rows dy``, ``dresidual = beta · dy``."""
    if ctx.activation != "none":
        raise RuntimeError(
            f"error[no-backward]: ck_rs::linear has no backward through activation="
            f"{ctx.activation!r} yet; apply the activation in torch after a linear without one"
        )
    x, weight = ctx.saved_tensors
    n, k = weight.shape
    dy2 = dy.reshape(-1, n).to(x.dtype).contiguous()
    x2 = x.reshape(-1, k)
    dx = wgt = None
    if ctx.needs_input_grad[0]:
        dx = _product(dy2, weight.to(x.dtype), x.dtype).reshape(x.shape)
    if ctx.needs_input_grad[1]:
        wgt = _product(dy2.t().contiguous(), x2, weight.dtype)
    dbias = dy2.sum(0, dtype=torch.float32).to(dy.dtype) if ctx.has_bias else None
    dres = dy * ctx.beta if ctx.has_residual else None
    return dx, wgt, dbias, dres, None, None


linear.register_autograd(_linear_backward, setup_context=_linear_setup)


def _no_double_backward(name):
    def backward(ctx, *grads):
        raise RuntimeError(
            f"error[no-double-backward]: ck_rs::{name} has no backward of its own (double "
            "backward, e.g. a gradient penalty); compute that term with torch ops"
        )

    return backward


def _nothing_to_save(ctx, inputs, output):
    pass


for _name in ("rmsnorm_backward", "layernorm_backward", "softmax_backward"):
    globals()[_name].register_autograd(_no_double_backward(_name), setup_context=_nothing_to_save)
