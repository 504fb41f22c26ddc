"""ck-rs kernels on numpy arrays and PyTorch tensors.

CPU arrays and tensors run on ck-rs's SIMT emulator, whose sanitizer reports out-of-bounds
and misaligned accesses and data races as :class:`KernelFault`; CUDA tensors run on their GPU,
in place, queued on torch's current stream (no device-wide synchronisation). Results come back
as the input's kind (numpy in, numpy out; torch in, torch out), or are written into ``out=``.

>>> import numpy as np, ck_rs
>>> ck_rs.rmsnorm(np.ones((2, 8), np.float32), np.ones(8, np.float32))
array([[0.9999995, ...

With PyTorch installed, the same operators are registered as ``torch.ops.ck_rs.*`` custom ops
(also reachable as ``ck_rs.ops.*``), with fake implementations for ``torch.compile``. The ops of
the hottest calls (rmsnorm, gemm, linear, attention, attention_with_kvcache) get C++ kernels
that skip Python on every call: the first import compiles them against the installed torch
(~15 s, once; cached in ``~/.cache/ck_rs``, or ``$CK_RS_CACHE``; ``CK_RS_CPP_OPS=0`` keeps the
Python kernels).

Every error is a ``TypeError`` or ``ValueError`` (``RuntimeError`` for a missing GPU or PTX
module) whose message starts with the rule name the ``ck`` command prints: ``error[rule]: ...``.
"""

import math as _math
from operator import index as _index
import os as _os

from . import _native
from ._native import KernelFault

# The registry's descriptions: the functions below without a hand-written one are built from
# them (`_operator`), and so are their torch ops.
_OPERATORS = _native.operators()

__all__ = [
    "rmsnorm",
    "add_rmsnorm",
    "layernorm",
    "softmax",
    "gemm",
    "grouped_mm",
    "attention",
    "attention_with_kvcache",
    "attention_varlen",
    "KernelFault",
]

try:  # torch is optional: numpy arrays work without it
    import torch as _torch
except ImportError:  # pragma: no cover - depends on the environment
    _torch = None

import numpy as _np

if _torch is not None:
    from torch.utils.dlpack import to_dlpack as _to_dlpack

    _Tensor = _torch.Tensor
    _CONTIGUOUS = _torch.contiguous_format
    _FP8 = getattr(_torch, "float8_e4m3fn", None)
    _grad_enabled = _torch.is_grad_enabled
    # torch's C++ accessor of the current stream's raw `CUstream` on a device (by index; no
    # Stream object is built).
    _raw_stream = getattr(_torch._C, "_cuda_getCurrentRawStream", None) or (
        lambda index: _torch.cuda.current_stream(index).cuda_stream
    )

else:

    class _Tensor:  # nothing is an instance: every argument is numpy's
        pass

    _FP8 = None


# The C++ kernels of the torch ops that have them (``_torch_ops._CPP``), by name: the functions
# below call them for torch tensors where the call is the op's (no ``out=``, nothing to record).
_KERNELS = {}


def _kernel(op, *tensors):
    """The C++ kernel of torch op ``op`` (``_KERNELS``) where a call on ``tensors`` (None for an
    optional one left out) may take it: CUDA torch tensors (on the CPU the emulator's time dwarfs
    the call's), none of them requiring grad."""
    kernel = _KERNELS.get(op)
    if kernel is not None:
        for t in tensors:
            if t is not None and not (isinstance(t, _Tensor) and t.is_cuda and not t.requires_grad):
                return None
    return kernel


def _error(kind, rule, message):
    return kind(f"error[{rule}]: {message}")


def _is_torch(x):
    return isinstance(x, _Tensor)


class _Call:
    """The tensors of one call: all numpy or all torch, on one device, none of them asking
    for a gradient that the operator cannot give.

    Every call of every operator starts here, so the common case — torch tensors, one device,
    no gradient — is checked in one pass; the other cases find their error message in
    ``_mismatch``."""

    __slots__ = ("torch", "cuda", "stream", "_first")

    def __init__(self, op, **tensors):
        values = iter(tensors.values())
        first = self._first = next(values)
        if isinstance(first, _Tensor):
            # CUDA devices compared by index: a `torch.device` is built on each access.
            cuda = first.is_cuda
            index = first.get_device() if cuda else -1
            for t in values:
                if not isinstance(t, _Tensor) or (
                    t.get_device() != index if cuda and t.is_cuda else t.device != first.device
                ):
                    self._mismatch(tensors)
            if _grad_enabled():
                for name, t in tensors.items():
                    if t.requires_grad:
                        raise _error(
                            ValueError,
                            "no-backward",
                            f"`{name}` requires grad but ck_rs.{op} has no backward pass yet, "
                            "so its gradient would be lost; call it under torch.no_grad() "
                            "(inference) or on detached tensors",
                        )
            self.torch, self.cuda = True, cuda
            self.stream = _raw_stream(index) if cuda else None
            return
        for t in values:
            if not isinstance(t, _np.ndarray):
                self._mismatch(tensors)
        if not isinstance(first, _np.ndarray):
            self._mismatch(tensors)
        self.torch = self.cuda = False
        self.stream = None

    @property
    def device(self):
        """The torch device of the call's tensors (None for numpy arrays)."""
        return self._first.device if self.torch else None

    @staticmethod
    def _mismatch(tensors):
        """Raises the error of a call whose tensors are not all numpy arrays, or all torch
        tensors on one device."""
        for name, t in tensors.items():
            if not (_is_torch(t) or isinstance(t, _np.ndarray)):
                raise _error(
                    TypeError,
                    "not-a-tensor",
                    f"`{name}` is a {type(t).__name__}; pass numpy arrays or torch tensors",
                )
        (first, f), *rest = tensors.items()
        for name, t in rest:
            if _is_torch(t) != _is_torch(f):
                raise _error(
                    TypeError,
                    "kind-mismatch",
                    f"`{first}` and `{name}` are not both numpy arrays or both torch tensors; "
                    "convert one (torch.from_numpy / .numpy())",
                )
            if _is_torch(t) and t.device != f.device:
                raise _error(
                    ValueError,
                    "device-mismatch",
                    f"`{first}` is on {f.device} but `{name}` on {t.device}; "
                    "put every tensor of a call on one device",
                )

    def capsule(self, t):
        """`t`'s DLPack capsule (for CUDA, without a producer-side synchronisation: the
        kernels are queued on torch's current stream, after what produced `t`)."""
        if self.torch:
            # torch's C++ exporter: `__dlpack__` does the same through Python-level stream
            # handling that costs more than the kernel launch, and refuses a tensor that
            # requires grad, which the kernels only read (detaching costs ~1 µs a tensor).
            return _to_dlpack(t)
        if not t.flags.writeable:
            t = t.copy()  # numpy refuses to export read-only arrays
        return t.__dlpack__()

    def run(self, op, tensors, scalars=()):
        """Operator `op` of the registry on `tensors`, in the order of its description (outputs
        included; None for an optional output left out), with `scalars` in theirs."""
        if self.torch:  # `capsule`, inlined: this runs on every call
            capsules = [None if t is None else _to_dlpack(t) for t in tensors]
        else:
            capsules = [None if t is None else self.capsule(t) for t in tensors]
        _native.call(op, capsules, scalars, self.stream)

    def empty(self, shape, like=None, float32=False):
        """A fresh, contiguous output of `shape`: of `like`'s element type (or float32)."""
        if self.torch:
            if like is None:
                return _torch.empty(shape, dtype=_torch.float32, device=self.device)
            if float32:  # sizes one by one where there are any (torch parses them faster)
                return like.new_empty(*shape, dtype=_torch.float32) if shape else like.new_empty(
                    (), dtype=_torch.float32
                )
            if like.shape == shape:  # torch's quickest allocation from Python
                return _torch.empty_like(like, memory_format=_CONTIGUOUS)
            return like.new_empty(shape)
        return _np.empty(shape, dtype=_np.float32 if float32 else like.dtype)

    def zeros_int32(self, n, like):
        """`n` int32 zeros on the call's device (a kernel's counter)."""
        if self.torch:
            return like.new_zeros(n, dtype=_torch.int32)
        return _np.zeros(n, dtype=_np.int32)


def _out_like(call, out, x, name="out"):
    """`out` (checked as `_out` checks it), or a fresh contiguous output of `x`'s shape and
    type: the row operators' result, allocated without comparing shapes first."""
    if out is not None:
        return _out(call, out, x.shape, x, name=name)
    if call.torch:
        return _torch.empty_like(x, memory_format=_CONTIGUOUS)
    return _np.empty(x.shape, dtype=x.dtype)


def _out(call, out, shape, like=None, float32=False, name="out"):
    """`out` (checked to be of the call's kind and device; its shape and type are checked
    with the kernel's), or a fresh output."""
    if out is None:
        return call.empty(shape, like, float32)
    if _is_torch(out) != call.torch:
        raise _error(
            TypeError,
            "kind-mismatch",
            f"`{name}` is not of the inputs' kind (numpy arrays or torch tensors)",
        )
    if call.torch and out.device != call.device:
        raise _error(
            ValueError,
            "device-mismatch",
            f"`{name}` is on {out.device} but the inputs on {call.device}",
        )
    if not call.torch and not out.flags.writeable:
        raise _error(
            ValueError,
            "read-only",
            f"`{name}` is a read-only array; pass a writeable one (or leave it out for a new one)",
        )
    return out


def _differentiable(op, out, *tensors):
    """Whether the call must record its gradient with ``torch.ops.ck_rs.<op>``'s autograd
    formula (``ops.record``): torch tensors that require grad, with grad enabled (then ``out=``
    is an error, as for torch's own ops)."""
    for t in tensors:  # a loop, not any(...): this runs on every call
        if getattr(t, "requires_grad", False):
            break
    else:
        return False
    if not _torch.is_grad_enabled():
        return False
    if out is not None:
        raise _error(
            ValueError,
            "no-backward",
            f"ck_rs.{op}(..., out=...) cannot record a gradient; leave out `out`, or call it "
            "under torch.no_grad()",
        )
    return True


def rmsnorm(x, gamma, eps=1e-6, *, out=None):
    """RMSNorm over the last dimension: ``y = x · rsqrt(mean(x²) + eps) · gamma``.

    ``x`` is ``[..., N]``, ``gamma`` ``[N]``; float32 or bfloat16 (f32 arithmetic). Tensors that
    require grad get gradients for ``x`` and ``gamma`` (``rmsnorm_backward``)."""
    if _differentiable("rmsnorm", out, x, gamma):
        return ops.record("rmsnorm", x, gamma, eps)
    kernel = _kernel("rmsnorm", x, gamma)
    if kernel is not None and out is None:
        return kernel(x, gamma, eps)
    c = _Call("rmsnorm", x=x, gamma=gamma)
    y = _out_like(c, out, x)
    c.run("rmsnorm", (x, gamma, y), (eps,))
    return y


def add_rmsnorm(x, residual, gamma, eps=1e-6, *, out=None, residual_out=None):
    """Fused residual add and RMSNorm: ``r = x + residual``, ``y = rmsnorm(r) · gamma``.

    Returns ``(y, r)``. Tensors that require grad get their gradients (``rmsnorm_backward`` of
    ``r``, plus ``r``'s own gradient, for both ``x`` and ``residual``)."""
    if _differentiable("add_rmsnorm", out if out is not None else residual_out, x, residual, gamma):
        return ops.record("add_rmsnorm", x, residual, gamma, eps)
    c = _Call("add_rmsnorm", x=x, residual=residual, gamma=gamma)
    y = _out_like(c, out, x)
    r = _out_like(c, residual_out, x, name="residual_out")
    c.run("add_rmsnorm", (x, residual, gamma, r, y), (eps,))
    return y, r


def layernorm(x, gamma, beta, eps=1e-5, *, out=None, return_stats=False):
    """LayerNorm over the last dimension (mean and variance by Welford):
    ``y = (x − mean) · rsqrt(var + eps) · gamma + beta``.

    With ``return_stats=True`` returns ``(y, mean, rstd)``, the statistics float32 and one
    per row (what a backward pass needs). Tensors that require grad get gradients for ``x``,
    ``gamma`` and ``beta`` (``layernorm_backward``, from the saved statistics)."""
    if _differentiable("layernorm", out, x, gamma, beta):
        y, mean, rstd = ops.record("layernorm", x, gamma, beta, eps)
        return (y, mean, rstd) if return_stats else y
    c = _Call("layernorm", x=x, gamma=gamma, beta=beta)
    y = _out_like(c, out, x)
    stats = ()
    if return_stats:
        rows = tuple(x.shape[:-1])
        stats = (c.empty(rows, float32=True), c.empty(rows, float32=True))
    mean, rstd = stats or (None, None)
    c.run("layernorm", (x, gamma, beta, y, mean, rstd), (eps,))
    if x.shape[-1] == 0:  # the mean and variance of no values
        for s in stats:
            s[...] = float("nan")
    return (y, *stats) if return_stats else y


def softmax(x, *, out=None):
    """Softmax over the last dimension (the row max subtracted first). Tensors that require
    grad get their gradient (``softmax_backward``, from the output)."""
    if _differentiable("softmax", out, x):
        return ops.record("softmax", x)
    c = _Call("softmax", x=x)
    y = _out_like(c, out, x)
    c.run("softmax", (x, y))
    return y


def _choices(op, scalar):
    """The names the choice `scalar` of the registry's operator `op` takes, in index order."""
    desc = next(d for d in _OPERATORS if d["name"] == op)
    return next(s["choices"] for s in desc["scalars"] if s["name"] == scalar)


_ACTIVATIONS = {name: i for i, name in enumerate(_choices("linear", "activation"))}
_GATES = _choices("gated_linear", "activation")


def _bf16_result(call, out_dtype):
    """Whether a product's result is bfloat16 (``out_dtype=torch.bfloat16``, torch tensors
    only); float32 otherwise."""
    if out_dtype is None:
        return False
    if call.torch and out_dtype is _torch.bfloat16:  # dtypes are singletons
        return True
    bf16 = out_dtype not in ("float32", _np.float32) and (
        not call.torch or out_dtype != _torch.float32
    )
    if bf16 and not (call.torch and out_dtype == _torch.bfloat16):
        raise _error(
            TypeError,
            "dtype-unsupported",
            f"out_dtype {out_dtype!r}: the result is float32, or torch.bfloat16 for torch tensors",
        )
    return bf16


def _product_out(call, out, shape, bf16, like):
    """A product's result: `out` (checked like any output), or a fresh float32 or bfloat16
    one on `like`'s device."""
    if out is not None:
        return _out(call, out, shape)
    if bf16:  # sizes one by one: torch parses them faster than a tuple
        return like.new_empty(*shape, dtype=_torch.bfloat16)
    return call.empty(shape, like, float32=True)


def _given(**tensors):
    """The optional tensors that were given (not None), by name."""
    return {name: t for name, t in tensors.items() if t is not None}


def _as_type(t, dtype):
    """`t` in `dtype` (itself if it already is: a conversion costs a call even when empty)."""
    return t if t.dtype == dtype else t.to(dtype)


def gemm(
    a,
    b,
    *,
    out=None,
    out_dtype=None,
    bias=None,
    residual=None,
    alpha=1.0,
    beta=1.0,
    activation="none",
):
    """``act(alpha · a @ b + beta · residual + bias)`` with float32 accumulation: ``a``
    ``[M, K]``, ``b`` ``[K, N]``, ``residual`` ``[M, N]``, ``bias`` ``[N]``, ``activation``
    one of none, relu, gelu (tanh form), silu. The result is float32, or bfloat16 with
    ``out_dtype=torch.bfloat16`` (torch tensors only: numpy has no bfloat16).

    Plain products of float32 operands run on the SIMT f32 GEMM (the ``sgemm`` operator: not
    rounded); bfloat16 operands, an epilogue or a bfloat16 result run on the bf16 tensor-core
    GEMMs with the epilogue fused (float32 operands are rounded to bfloat16 first), on the
    kernel ``ck run gemm`` picks for the problem (the ``gemm`` operator,
    ``ck_kernels::gemm::auto``).

    ``a`` may be a transposed view (``dy.t()``, stored ``[K, M]``): it is read as it lies where
    M and N are multiples of 8 and the epilogue is alpha alone, or ``residual`` into a float32
    result (``ck_kernels::gemm::linear::launch_weight_grad``: a weight's gradient without a
    transposed copy); elsewhere it is copied first."""
    if activation not in _ACTIVATIONS:
        raise _error(
            ValueError,
            "bad-activation",
            f"activation {activation!r}; use one of {', '.join(_ACTIVATIONS)}",
        )
    kernel = _kernel("gemm", a, b)
    plain = out is None and bias is None and residual is None and alpha == 1.0
    if kernel is not None and plain and activation == "none":
        return kernel(a, b, out_dtype)
    if _transposed_view(a):
        if bias is None and activation == "none" and _km_takes(a, b, out_dtype, residual, alpha):
            return _gemm_a_km(a, b, out, out_dtype, residual, alpha, beta)
        a = a.contiguous()
    extra = {} if bias is None and residual is None else _given(bias=bias, residual=residual)
    c = _Call("gemm", a=a, b=b, **extra)
    bf16_out = _bf16_result(c, out_dtype)
    fused = bool(extra) or alpha != 1.0 or activation != "none" or bf16_out
    if fused and c.cuda and a.dtype != _torch.bfloat16:  # the GPU kernel reads bf16 in place
        a, b = a.to(_torch.bfloat16), b.to(_torch.bfloat16)
    shape = (a.shape[0], b.shape[-1]) if len(a.shape) == 2 and len(b.shape) == 2 else (0, 0)
    res = _product_out(c, out, shape, bf16_out, a)
    if extra and c.torch:  # the epilogue's inputs in the result's type
        extra = {k: _as_type(v, res.dtype) for k, v in extra.items()}
    if not fused and a.dtype == (_torch.float32 if c.torch else _np.float32):
        c.run("sgemm", [a, b, res])  # f32 operands, not rounded
    else:
        tensors = [a, b, extra.get("residual"), extra.get("bias"), res]
        c.run("gemm", tensors, [float(alpha), float(beta), float(_ACTIVATIONS[activation])])
    return res


def _transposed_view(t):
    """Whether ``t`` is a matrix stored transposed: ``t.t()`` contiguous, ``t`` not."""
    return (
        _torch is not None
        and isinstance(t, _torch.Tensor)
        and t.dim() == 2
        and not t.is_contiguous()
        and t.t().is_contiguous()
    )


def _km_takes(a, b, out_dtype, residual, alpha):
    """Whether the kernel reading ``a`` as ``[K, M]`` runs the call: M and N whole vectors, and
    alpha alone into bfloat16, or any of alpha and ``residual`` into float32."""
    aligned = a.shape[0] % 8 == 0 and b.dim() == 2 and b.shape[1] % 8 == 0
    return aligned and (out_dtype != _torch.bfloat16 or (residual is None and alpha == 1.0))


def _gemm_a_km(a, b, out, out_dtype, residual, alpha, beta):
    """``gemm`` with ``a`` a transposed view, read from its ``[K, M]`` storage."""
    a_km = a.t()
    c = _Call("gemm", a=a_km, b=b, **_given(residual=residual))
    bf16_out = _bf16_result(c, out_dtype)
    if c.cuda and a_km.dtype != _torch.bfloat16:  # the GPU kernel reads bf16 in place
        a_km, b = a_km.to(_torch.bfloat16), b.to(_torch.bfloat16)
    res = _product_out(c, out, (a.shape[0], b.shape[1]), bf16_out, a_km)
    d = None if residual is None else _as_type(residual, res.dtype)
    c.run("gemm_a_km", [a_km, b, d, res], [float(alpha), float(beta)])
    return res


def linear(
    x,
    weight,
    bias=None,
    residual=None,
    *,
    activation="none",
    beta=1.0,
    out=None,
    out_dtype=None,
    x_scale=None,
    weight_scale=None,
):
    """``act(x @ weight.T + bias + beta · residual)``: ``nn.Linear``'s product with its weight
    as ``nn.Linear`` keeps it, ``[out_features, in_features]``, read in place (no transposed
    copy), and the epilogue fused. ``x`` ``[..., K]`` (any leading dims), ``weight`` ``[N, K]``,
    ``bias`` ``[N]``, ``residual`` ``[..., N]``, ``activation`` one of none, relu, gelu (tanh
    form), silu. The result ``[..., N]`` has ``x``'s type (numpy: float32) unless ``out_dtype``
    says (float32, or ``torch.bfloat16`` for torch tensors); float32 accumulation.

    The kernels take bfloat16 ``x`` and ``weight`` (float32 ones are rounded first); where N and K
    are multiples of 8 it runs on the TMA GEMM (``ck_kernels::gemm::linear``), else on a SIMT
    kernel for any shape. Tensors that require grad get gradients for ``x``, ``weight``,
    ``bias`` and ``residual`` (without an activation).

    fp8: ``x`` and ``weight`` both ``torch.float8_e4m3fn`` with per-tensor scales ``x_scale``
    and ``weight_scale`` (floats: the values are ``x_scale · x`` and ``weight_scale · weight``;
    1 when left out) run on the fp8 TMA GEMM; K a multiple of 16, N of 8; the result is
    bfloat16 unless ``out_dtype=torch.float32``; no gradient. For example, with ``w_scale =
    w.abs().max() / 448`` (e4m3's largest value) and ``x_scale`` likewise or calibrated::

        w8 = (w / w_scale).to(torch.float8_e4m3fn)  # once
        x8 = (x / x_scale).to(torch.float8_e4m3fn)
        y = ck_rs.linear(x8, w8, x_scale=x_scale, weight_scale=w_scale)
    """
    if activation not in _ACTIVATIONS:
        raise _error(
            ValueError,
            "bad-activation",
            f"activation {activation!r}; use one of {', '.join(_ACTIVATIONS)}",
        )
    fp8 = _is_torch(x) and x.dtype == _FP8
    alpha = 1.0
    if fp8 or x_scale is not None or weight_scale is not None:
        alpha = _fp8_alpha(x, weight, x_scale, weight_scale)
    if _differentiable("linear", out, x, weight, bias, residual):
        if fp8:
            raise _error(
                ValueError,
                "no-backward",
                "ck_rs.linear on float8 operands has no backward; train in bfloat16, or call "
                "it under torch.no_grad()",
            )
        if out_dtype is not None and out_dtype != x.dtype:
            raise _error(
                ValueError,
                "no-backward",
                "ck_rs.linear(..., out_dtype=...) with tensors that require grad: the "
                "differentiable op returns x's type; convert the result instead",
            )
        return ops.record("linear", x, weight, bias, residual, activation, float(beta))
    kernel = _kernel("linear", x, weight, bias, residual)
    own_type = out_dtype is None or out_dtype == x.dtype
    if kernel is not None and out is None and not fp8 and alpha == 1.0 and own_type:
        return kernel(x, weight, bias, residual, activation, float(beta))
    extra = _given(bias=bias, residual=residual)
    c = _Call("linear", x=x, weight=weight, **extra)
    if out_dtype is None and c.torch and x.dtype in (_torch.bfloat16, _FP8):
        out_dtype = _torch.bfloat16
    bf16_out = _bf16_result(c, out_dtype)
    if c.cuda and x.dtype not in (_torch.bfloat16, _FP8):  # the GPU kernels read bf16 in place
        x, weight = x.to(_torch.bfloat16), weight.to(_torch.bfloat16)
    n = weight.shape[0] if len(weight.shape) == 2 else 0
    res = _product_out(c, out, tuple(x.shape[:-1]) + (n,), bf16_out, x)
    if extra and c.torch:  # the epilogue's inputs in the result's type
        extra = {key: _as_type(v, res.dtype) for key, v in extra.items()}
    if fp8:  # their bytes: torch exports float8 through DLPack only from DLPack 1.1 on
        x, weight = x.view(_torch.uint8), weight.view(_torch.uint8)
    c.run(
        "linear_fp8" if fp8 else "linear",
        [x, weight, extra.get("residual"), extra.get("bias"), res],
        [float(alpha), float(beta), _ACTIVATIONS[activation]],
    )
    return res


def _fp8_alpha(x, weight, x_scale, weight_scale):
    """The product's alpha for float8 ``x`` and ``weight`` with their per-tensor scales:
    ``x_scale · weight_scale`` (each 1 when left out). Errors: scales without float8 operands,
    one operand float8 and not the other, a scale that is not a positive finite number."""
    if not (_is_torch(x) and x.dtype == _FP8 and _is_torch(weight) and weight.dtype == _FP8):
        if _is_torch(x) and _is_torch(weight) and _FP8 in (x.dtype, weight.dtype):
            raise _error(
                TypeError,
                "dtype-mismatch",
                f"`x` is {x.dtype} and `weight` {weight.dtype}; give both as torch.float8_e4m3fn",
            )
        raise _error(
            ValueError,
            "bad-scale",
            "x_scale and weight_scale are the scales of float8 operands; give torch.float8_e4m3fn "
            "x and weight, or fold a scale into the inputs",
        )
    alpha = 1.0
    for name, v in (("x_scale", x_scale), ("weight_scale", weight_scale)):
        if v is None:
            continue
        v = float(v)
        if not (_math.isfinite(v) and v > 0):
            raise _error(ValueError, "bad-scale", f"{name} is {v}; give a positive finite number")
        alpha *= v
    return alpha


def gated_linear(x, weight, *, activation="silu", out=None):
    """A gated linear unit in one launch: SwiGLU ``silu(x @ w_gate.T) * (x @ w_up.T)``, or GeGLU
    with ``activation="gelu"`` (tanh form). ``weight`` is the gate's and the up projection's
    weights stacked, ``[2F, K]``, gate rows first (``torch.cat([w_gate, w_up])``, serving
    stacks' merged ``gate_up_proj``); ``x`` ``[..., K]``; the result ``[..., F]`` is bfloat16
    (float32 on numpy), neither ``[..., F]`` product ever written. F and K multiples of 8;
    bfloat16 ``x`` and ``weight`` (float32 ones are rounded first). Tensors that require grad
    get gradients for ``x`` and ``weight``: then the call is two ops, ``linear`` writing both
    products and ``swiglu``/``geglu`` (their product), so the backward reads the products
    instead of recomputing them, as torch's own layer does."""
    if activation not in _GATES:
        raise _error(
            ValueError,
            "bad-activation",
            f"activation {activation!r}; a gated linear unit's is silu (SwiGLU) or gelu (GeGLU)",
        )
    if _differentiable("gated_linear", out, x, weight):
        gu = ops.record("linear", x.to(_torch.bfloat16), weight.to(_torch.bfloat16))
        return ops.record("swiglu" if activation == "silu" else "geglu", gu)
    c = _Call("gated_linear", x=x, weight=weight)
    if c.cuda and x.dtype != _torch.bfloat16:  # the GPU kernel reads bf16 in place
        x, weight = x.to(_torch.bfloat16), weight.to(_torch.bfloat16)
    f = weight.shape[0] // 2 if len(weight.shape) == 2 else 0
    # numpy has no bfloat16: there the kernel's bfloat16 result comes back widened to float32.
    res = _product_out(c, out, tuple(x.shape[:-1]) + (f,), c.torch, x)
    c.run("gated_linear", [x, weight, res], [_GATES.index(activation)])
    return res


def rope_qkv(qkv, cos, sin, heads, kv_heads, *, rotary_dim=None, interleaved=False):
    """Rotary position embedding on a fused QKV projection, written in attention's layout, in
    one pass: ``qkv`` ``[B, S, (heads + 2·kv_heads)·D]`` (each token's query heads, then key
    heads, then value heads) → ``(q, k, v)``, ``q`` ``[B, heads, S, D]`` and ``k``, ``v``
    ``[B, kv_heads, S, D]``, q's and k's first ``rotary_dim`` (default D) elements rotated.

    ``cos`` and ``sin`` are float32 tables ``[S, rotary_dim / 2]`` (one for every sequence) or
    ``[B·S, rotary_dim / 2]`` (a row per token: positions not starting at 0, packed
    sequences), the angles of each pair; Llama's frequency scaling is just another table.
    Pairs are the two halves of the rotary dims (``interleaved=False``: Llama, NeoX) or
    neighbours (``interleaved=True``: GPT-J). float32 or bfloat16 ``qkv``; D at most 128, a
    multiple of 8; ``rotary_dim`` a multiple of 16. A ``qkv`` that requires grad gets its
    gradient (the rotation undone, in torch ops); the tables get none."""
    if _differentiable("rope_qkv", None, qkv, cos, sin):
        return ops.record("rope_qkv", qkv, cos, sin, heads, kv_heads, rotary_dim, bool(interleaved))
    c = _Call("rope_qkv", qkv=qkv, cos=cos, sin=sin)
    if len(qkv.shape) != 3 or heads <= 0 or kv_heads <= 0 or qkv.shape[2] % (heads + 2 * kv_heads):
        raise _error(
            ValueError,
            "shape-mismatch",
            f"`qkv` is {tuple(qkv.shape)}; give [batch, seq, (heads + 2·kv_heads)·head_dim] with "
            f"heads {heads}, kv_heads {kv_heads}",
        )
    b, s, width = qkv.shape
    d = width // (heads + 2 * kv_heads)
    _rotary_tables(cos, rotary_dim, d)
    q = c.empty((b, heads, s, d), qkv)
    k, v = c.empty((b, kv_heads, s, d), qkv), c.empty((b, kv_heads, s, d), qkv)
    per_head = qkv.reshape(b, s, heads + 2 * kv_heads, d)  # the operator's rule: D of its own
    c.run("rope_qkv", [per_head, cos, sin, q, k, v], [heads, kv_heads, bool(interleaved)])
    return q, k, v


def _rotary_tables(cos, rotary_dim, head_dim):
    """Refuses tables whose width is not ``rotary_dim / 2`` (``rotary_dim`` defaults to the
    head dim; the operator takes it from the tables)."""
    rotary_dim = head_dim if rotary_dim is None else int(rotary_dim)
    if len(cos.shape) != 2 or 2 * cos.shape[1] != rotary_dim:
        raise _error(
            ValueError,
            "shape-mismatch",
            f"`cos` is {tuple(cos.shape)}; give [S or B·S, rotary_dim / 2 = {rotary_dim // 2}]",
        )


def rope_qkv_backward(dq, dk, dv, cos, sin, heads, kv_heads, *, rotary_dim=None, interleaved=False):
    """The backward of ``rope_qkv``: the gradients ``dq`` ``[B, heads, S, D]``, ``dk``, ``dv``
    ``[B, kv_heads, S, D]`` back in the projection's layout ``[B, S, (heads + 2·kv_heads)·D]``,
    the query's and key's rotary dims rotated back by minus each angle (the rotation's
    transpose), in one pass. Tables and rules as ``rope_qkv``'s."""
    c = _Call("rope_qkv_backward", dq=dq, dk=dk, dv=dv, cos=cos, sin=sin)
    if len(dq.shape) != 4 or len(dk.shape) != 4:
        raise _error(
            ValueError,
            "shape-mismatch",
            f"`dq` is {tuple(dq.shape)}, `dk` {tuple(dk.shape)}; give [batch, heads, seq, head_dim]",
        )
    b, _, s, d = dq.shape
    _rotary_tables(cos, rotary_dim, d)
    dqkv = c.empty((b, s, heads + 2 * kv_heads, d), dq)
    c.run("rope_qkv_backward", [dq, dk, dv, cos, sin, dqkv], [heads, kv_heads, bool(interleaved)])
    return dqkv.reshape(b, s, (heads + 2 * kv_heads) * d)


def qkv_projection(x, weight, cos, sin, heads, kv_heads, *, rotary_dim=None, interleaved=False):
    """A QKV projection with RoPE in its epilogue: ``x @ weight.T`` with the query and key
    heads rotated before the one store, in one launch. ``x`` ``[B, S, K]``, ``weight`` the
    query, key and value weights stacked as ``nn.Linear`` keeps them, ``[(heads + 2·kv_heads)·D,
    K]``; the result ``[B, S, (heads + 2·kv_heads)·D]`` keeps the projection's layout (each
    token's query heads, then key heads, then value heads), which ``attention_qkv`` reads in
    place. ``cos``, ``sin``, ``rotary_dim`` and ``interleaved`` as for ``rope_qkv``; here D is
    64 or 128 and, half-split, ``rotary_dim`` 64 or 128 (else use ``linear`` + ``rope_qkv``).
    The kernel takes bfloat16 ``x`` and ``weight`` (float32 ones are rounded first, and the
    result is float32 again).

    Tensors that require grad get gradients for ``x`` and ``weight``: the rotation undone (in
    torch ops), then ``linear``'s backward. A training step is quicker on ``linear`` +
    ``rope_qkv`` + ``attention``, whose RoPE backward is one kernel."""
    if _differentiable("qkv_projection", None, x, weight, cos, sin):
        return ops.record(
            "qkv_projection", x, weight, cos, sin, heads, kv_heads, rotary_dim, bool(interleaved)
        )
    c = _Call("qkv_projection", x=x, weight=weight, cos=cos, sin=sin)
    if len(x.shape) != 3 or len(weight.shape) != 2 or heads <= 0 or kv_heads <= 0:
        raise _error(
            ValueError,
            "shape-mismatch",
            f"`x` is {tuple(x.shape)} and `weight` {tuple(weight.shape)} with heads {heads}, "
            f"kv_heads {kv_heads}; give x [batch, seq, in_features], weight [(heads + "
            "2·kv_heads)·head_dim, in_features] and at least one head of each",
        )
    widen = c.cuda and x.dtype == _torch.float32
    if widen:  # the GPU kernel reads and writes bfloat16: convert on the device
        x, weight = x.to(_torch.bfloat16), weight.to(_torch.bfloat16)
    b, s, k = x.shape
    n, stacked = weight.shape[0], heads + 2 * kv_heads
    if n % stacked:
        raise _error(
            ValueError,
            "shape-mismatch",
            f"`weight` has {n} rows; give (heads + 2·kv_heads)·head_dim = {stacked}·head_dim",
        )
    d = n // stacked
    _rotary_tables(cos, rotary_dim, d)
    res = c.empty((b, s, n), x)
    # The operator's rule: per head, D a dimension of its own (views, no copies).
    tensors = [x, weight.reshape(stacked, d, weight.shape[1]), cos, sin, res.reshape(b, s, stacked, d)]
    c.run("qkv_projection", tensors, [heads, kv_heads, bool(interleaved)])
    return res.float() if widen else res


def grouped_mm(a, b, tokens, *, out=None, out_dtype=None, b_layout="kn"):
    """A mixture-of-experts layer's grouped product in one launch: expert ``g``'s rows of
    ``a`` (the ``tokens[g]`` after expert ``g - 1``'s) times ``b[g]``. ``a`` ``[sum(tokens),
    K]``, ``b`` ``[experts, K, N]`` — or with ``b_layout="nk"`` ``[experts, N, K]``, each
    expert's weight as ``nn.Linear`` keeps it (``a @ b[g].T``, read in place on the TMA
    kernel) — N and K multiples of 8; float32 accumulation. The result ``[sum(tokens), N]`` is
    float32, or bfloat16 with ``out_dtype=torch.bfloat16``.

    The kernel takes bfloat16 operands (float32 ones are rounded first). Where the experts have
    256 tokens or more on average it runs on the TMA GEMM, else on the ``cp.async`` one (see
    ``ck_kernels::gemm::grouped``). ``tokens`` is a sequence of ints on the host (e.g. the
    router's counts, ``counts.tolist()``)."""
    c = _Call("grouped_mm", a=a, b=b)
    # Any sequence of integers (Python, numpy or 0-d tensor ones) or a 1-D integer array or
    # tensor; a float, a bool, a nested list or a 0-d tensor refused.
    listed = tokens.tolist() if hasattr(tokens, "tolist") else tokens
    try:
        if isinstance(listed, (str, bytes)) or any(isinstance(t, bool) for t in listed):
            raise TypeError
        counts = [_index(t) for t in listed]
    except TypeError:
        raise _error(
            ValueError,
            "shape-mismatch",
            f"tokens is {tokens!r}; give one whole number per expert: a list or a 1-D integer tensor",
        ) from None
    tokens = counts
    if any(t < 0 for t in tokens):
        raise _error(
            ValueError,
            "shape-mismatch",
            f"token counts {tokens}: give each expert's number of rows of `a`, 0 or more",
        )
    if b_layout not in ("kn", "nk"):
        raise _error(ValueError, "bad-layout", f"b_layout {b_layout!r}; use kn ([experts, K, N]) or nk ([experts, N, K])")
    nk = b_layout == "nk"
    bf16_out = _bf16_result(c, out_dtype)
    if c.cuda and a.dtype != _torch.bfloat16:  # the GPU kernel reads bf16 in place
        a, b = a.to(_torch.bfloat16), b.to(_torch.bfloat16)
    n = (b.shape[1] if nk else b.shape[2]) if len(b.shape) == 3 else 0
    shape = (a.shape[0], n) if len(a.shape) == 2 and len(b.shape) == 3 else (0, 0)
    res = _product_out(c, out, shape, bf16_out, a)
    # The counts stay on the host: the launch is planned from them.
    counts = _torch.tensor(tokens, dtype=_torch.int32) if c.torch else _np.array(tokens, _np.int32)
    c.run("grouped_mm", [a, b, counts, res], [float(nk)])
    return res


def attention(q, k, v, *, causal=False, scale=None, out=None, return_lse=False, out_layout="bhsd"):
    """Fused attention forward: ``softmax(scale · q·kᵀ + mask) · v``.

    ``q`` ``[batch, heads, seq_q, head_dim]``, ``k`` and ``v`` ``[batch, kv_heads, seq_k,
    head_dim]`` (grouped-query attention when ``kv_heads`` divides ``heads``), head_dim 64 or
    128; ``scale`` defaults to ``1/√head_dim``; causal masking is aligned to the bottom-right
    corner when ``seq_q ≠ seq_k``. The kernel takes bfloat16: float32 inputs are rounded to
    bfloat16 and the output is float32 again. With ``return_lse=True`` returns ``(o, lse)``,
    the row log-sum-exp ``[batch, heads, seq_q]`` in float32. ``out_layout="bshd"`` writes
    ``o`` as ``[batch, seq_q, heads, head_dim]`` — what an output projection reads as
    ``[batch, seq_q, heads · head_dim]`` (``o.flatten(2)``, a view), with no transpose.

    Tensors that require grad get gradients for ``q``, ``k`` and ``v`` (``attention_backward``,
    deterministic under ``torch.use_deterministic_algorithms(True)``); the log-sum-exp is not
    differentiable."""
    if scale is not None and not (_math.isfinite(scale) and scale > 0):
        raise _error(ValueError, "bad-scale", f"the scale is {scale}; give a positive finite number")
    if _differentiable("attention", out, q, k, v):
        o, lse = ops.record("attention", q, k, v, bool(causal), scale, out_layout)
        return (o, lse) if return_lse else o
    kernel = _kernel("attention", q, k, v)
    if kernel is not None and out is None:
        o, lse = kernel(q, k, v, bool(causal), scale, out_layout)
        return (o, lse) if return_lse else o
    c = _Call("attention", q=q, k=k, v=v)
    widen = c.cuda and q.dtype == _torch.float32
    if widen:  # the GPU kernel reads bfloat16 in place: convert on the device
        q, k, v = (t.to(_torch.bfloat16) for t in (q, k, v))
    if out_layout not in ("bhsd", "bshd"):
        raise _error(ValueError, "bad-layout", f"out_layout {out_layout!r}; use bhsd or bshd")
    shape = tuple(q.shape)
    seq_first = out_layout == "bshd"
    if seq_first and len(shape) == 4:
        shape = (shape[0], shape[2], shape[1], shape[3])
    o = c.empty(shape, q) if (out is None or widen) else _out(c, out, shape, q)
    lse = c.empty(tuple(q.shape[:3]) if len(q.shape) == 4 else (0,), q, float32=True)
    scale = None if scale is None else float(scale)
    c.run("attention", (q, k, v, o, lse), (scale, float(bool(causal)), float(seq_first)))
    if widen:
        o = o.float() if out is None else out.copy_(o)
    return (o, lse) if return_lse else o


def attention_qkv(qkv, heads, kv_heads, *, causal=False, scale=None, return_lse=False):
    """``attention`` on a fused QKV projection's output, read in place: ``qkv`` ``[batch, seq,
    (heads + 2·kv_heads)·head_dim]`` (each token's query heads, then key heads, then value
    heads: ``qkv_projection``'s result, or ``linear``'s on the stacked weights), no transposed
    copy of Q, K or V. ``o`` ``[batch, seq, heads, head_dim]`` (``o.flatten(2)`` is what the
    output projection reads); with ``return_lse=True`` also the log-sum-exp ``[batch, heads,
    seq]``. Masking, scale, head dims and types as ``attention``'s.

    A ``qkv`` that requires grad gets its gradient (``attention_backward`` on copies of Q, K
    and V in its layout, the gradients put back in ``qkv``'s)."""
    if scale is not None and not (_math.isfinite(scale) and scale > 0):
        raise _error(ValueError, "bad-scale", f"the scale is {scale}; give a positive finite number")
    if _differentiable("attention_qkv", None, qkv):
        o, lse = ops.record("attention_qkv", qkv, heads, kv_heads, bool(causal), scale)
        return (o, lse) if return_lse else o
    c = _Call("attention_qkv", qkv=qkv)
    all_heads = heads + 2 * kv_heads
    if len(qkv.shape) != 3 or heads <= 0 or kv_heads <= 0 or qkv.shape[2] % all_heads:
        raise _error(
            ValueError,
            "shape-mismatch",
            f"`qkv` is {tuple(qkv.shape)}; give [batch, seq, (heads + 2·kv_heads)·head_dim] with "
            f"heads {heads}, kv_heads {kv_heads}",
        )
    widen = c.cuda and qkv.dtype == _torch.float32
    if widen:  # the GPU kernel reads bfloat16 in place: convert on the device
        qkv = qkv.to(_torch.bfloat16)
    b, s, width = qkv.shape
    d = width // all_heads
    qkv4 = qkv.reshape(b, s, all_heads, d)
    o = c.empty((b, s, heads, d), qkv)
    lse = c.empty((b, heads, s), qkv, float32=True)
    scale = None if scale is None else float(scale)
    c.run("attention_qkv", (qkv4, o, lse), (float(heads), float(kv_heads), scale, float(bool(causal))))
    if widen:
        o = o.float()
    return (o, lse) if return_lse else o


def attention_backward(
    q, k, v, o, lse, dout, *, causal=False, scale=None, deterministic=False, out_layout="bhsd"
):
    """The gradients ``(dq, dk, dv)`` of attention's output ``o`` (and log-sum-exp ``lse``, from
    ``attention(..., return_lse=True)`` on the same ``q``, ``k``, ``v``, ``causal`` and
    ``scale``) given its gradient ``dout``: ``o`` and ``dout`` ``[batch, heads, seq_q,
    head_dim]`` like ``q``, or ``[batch, seq_q, heads, head_dim]`` with ``out_layout="bshd"``
    (the forward's own ``out_layout``, read in place), ``dq`` like ``q``, ``dk`` and ``dv`` like
    ``k`` and ``v``, summed over each key/value head's query heads.

    FlashAttention's backward: the probabilities are recomputed from ``lse``, dQ's partial sums
    are added key tile by key tile — in any order, or with ``deterministic=True`` in one fixed
    order, so that two runs give the same bits. bfloat16 on the GPU; float32 inputs are rounded
    to bfloat16 and the gradients are float32 again."""
    c = _Call("attention_backward", q=q, k=k, v=v, o=o, lse=lse, dout=dout)
    if out_layout not in ("bhsd", "bshd"):
        raise _error(ValueError, "bad-layout", f"out_layout {out_layout!r}; use bhsd or bshd")
    if scale is not None and not (_math.isfinite(scale) and scale > 0):
        raise _error(ValueError, "bad-scale", f"the scale is {scale}; give a positive finite number")
    widen = c.cuda and q.dtype == _torch.float32
    if widen:  # the GPU kernels read bfloat16 in place: convert on the device
        q, k, v, o, dout = (t.to(_torch.bfloat16) for t in (q, k, v, o, dout))
    dq, dk, dv = c.empty(tuple(q.shape), q), c.empty(tuple(k.shape), k), c.empty(tuple(v.shape), v)
    scalars = (
        None if scale is None else float(scale),
        float(bool(causal)),
        float(bool(deterministic)),
        float(out_layout == "bshd"),
    )
    inputs = (q, k, v, o, lse, dout)
    # The scratch, by the description's lengths, from the caller's allocator (CUDA graphs see it).
    named = [(n, tuple(t.shape)) for n, t in zip(("q", "k", "v", "o", "lse", "dout"), inputs)]
    *_, rows, sums, counters = _native.shapes("attention_backward", named, scalars)
    if c.torch:
        rows, sums = (q.new_empty(n, dtype=_torch.float32) for n in (rows, sums))
        counters = q.new_empty(counters, dtype=_torch.int32)
    else:
        rows, sums = (_np.empty(n, dtype=_np.float32) for n in (rows, sums))
        counters = _np.empty(counters, dtype=_np.int32)
    c.run("attention_backward", (*inputs, dq, dk, dv, rows, sums, counters), scalars)
    if widen:
        dq, dk, dv = dq.float(), dk.float(), dv.float()
    return dq, dk, dv


def attention_varlen(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    causal=False,
    *,
    scale=None,
    return_lse=False,
):
    """Attention over sequences of different lengths packed end to end, with FlashAttention's
    ``flash_attn_varlen_func`` conventions.

    ``q`` ``[total_q, heads, head_dim]``, ``k`` and ``v`` ``[total_k, kv_heads, head_dim]``
    (grouped-query attention when ``kv_heads`` divides ``heads``), head_dim 64 or 128.
    Sequence ``b`` holds query rows ``cu_seqlens_q[b]:cu_seqlens_q[b + 1]`` and key rows
    ``cu_seqlens_k[b]:cu_seqlens_k[b + 1]`` (both int32 ``[batch + 1]``, on ``q``'s device);
    each sequence attends only to its own keys, with ``causal`` aligned to its bottom-right
    corner. ``max_seqlen_q`` (the longest sequence's queries) sizes the grid; ``max_seqlen_k``
    is taken for FlashAttention's signature and not needed. No work is spent on padding: the
    kernel walks the sequences' own 128-row tiles. Returns ``o`` like ``q`` and, with
    ``return_lse=True``, the log-sum-exp ``[heads, total_q]`` (float32). Rows of no sequence
    are not written. The bounds are read on the device (no synchronisation): on the GPU a
    sequence whose bounds decrease or pass the end gets NaN rows; on CPU tensors (the
    emulator, float32 allowed) they are refused (``bad-seqlens``).

    >>> import torch, ck_rs
    >>> q, k = torch.zeros(5, 1, 64), torch.zeros(5, 1, 64)
    >>> v = torch.arange(5.0).repeat_interleave(64).reshape(5, 1, 64)
    >>> cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    >>> ck_rs.attention_varlen(q, k, v, cu, cu, 3, 3)[:, 0, 0]  # each sequence's mean value
    tensor([0.5000, 0.5000, 3.0000, 3.0000, 3.0000])
    """
    c = _Call("attention_varlen", q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    if scale is not None and not (_math.isfinite(scale) and scale > 0):
        raise _error(ValueError, "bad-scale", f"the scale is {scale}; give a positive finite number")
    for name, n in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if not isinstance(n, int) or not 0 <= n <= 1 << 24:
            raise _error(
                ValueError, "argument-size", f"{name} is {n!r}; give the longest sequence's length (0 to 2^24)"
            )
    if len(q.shape) != 3:
        raise _error(
            ValueError,
            "shape-mismatch",
            f"q is {tuple(q.shape)}; give [total_q, heads, head_dim]: the sequences' rows end to end",
        )
    o = c.empty(tuple(q.shape), q)
    # The log-sum-exp and the scheduler's counter (zeros in, zeros out, one per call) from
    # torch's allocator, so that a CUDA graph captures the call.
    lse = c.empty((q.shape[1], q.shape[0]), q, float32=True)
    counter = c.zeros_int32(2, q)
    tensors = [q, k, v, cu_seqlens_q, cu_seqlens_k, o, lse, counter]
    # max_seqlen_q only sizes the grid: a batch of empty sequences still gets one block.
    scalars = [max(max_seqlen_q, 1), None if scale is None else float(scale), bool(causal)]
    c.run("attention_varlen", tensors, scalars)
    return (o, lse) if return_lse else o


_SCRATCH = {}  # a decode call's (shape, capacity, num_splits, device index) -> its scratch


def _scratch(batch, heads, kv_heads, sq, head_dim, capacity, num_splits, call):
    """A decode call's split scratch lengths ``(partial O, partial LSE)`` for the split count
    its launch plans (``num_splits``, or for 0 the heuristic's for the device's
    multiprocessors), asked once per shape."""
    if call.cuda:
        index = call.device.index if call.device.index is not None else _torch.cuda.current_device()
    else:
        index = -1  # the emulator
    key = (batch, heads, kv_heads, sq, head_dim, capacity, num_splits, index)
    lens = _SCRATCH.get(key)
    if lens is None:
        lens = _SCRATCH[key] = _native.decode_scratch(*key)
    return lens


def attention_with_kvcache(
    q,
    k_cache,
    v_cache,
    cache_seqlens,
    page_table=None,
    k=None,
    v=None,
    rotary_cos=None,
    rotary_sin=None,
    causal=True,
    num_splits=0,
    return_lse=False,
    *,
    scale=None,
    rotary_interleaved=False,
):
    """Decode attention against a KV cache, with FlashAttention's ``flash_attn_with_kvcache``
    conventions.

    ``q`` ``[batch, seq_q, heads, head_dim]`` holds the new tokens' queries (``seq_q`` from 1 to
    16 typically); ``k_cache``, ``v_cache`` are ``[batch, capacity, kv_heads, head_dim]``, or,
    with ``page_table`` ``[batch, max_pages]`` (int32), a pool of pages ``[pages, page_size,
    kv_heads, head_dim]`` (``page_size`` a power of two ≥ 16) that each sequence names in order;
    ``cache_seqlens`` ``[batch]`` (int32) the keys each sequence holds. Given new ``k``, ``v``
    ``[batch, seq_q, kv_heads, head_dim]``, they are written into the cache at positions
    ``cache_seqlens[b] …`` first (in place: the caches are modified), the keys rotated with
    ``rotary_cos``/``rotary_sin`` ``[positions, rotary_dim / 2]`` (float32; half-split as Llama,
    or ``rotary_interleaved=True`` as GPT-J) and the queries too. The new tokens are the last
    ``seq_q`` positions of their sequence: they see every cached key and, with ``causal``, each
    other. A sequence with no key gives zeros and LSE ``-inf``; a length out of range (negative,
    or past the cache's capacity with the new tokens) gives NaN, and a negative one appends
    nothing. The page table too is read on the device: an entry of a page a sequence reads that
    lies outside the pool reads as zeros on the GPU, and is refused on CPU tensors
    (``bad-page-table``); entries past a sequence's pages are never read (mark them -1).

    ``num_splits=0`` lets a heuristic split each sequence's keys among several blocks
    (FlashDecoding): chunks of one size across the batch, a long sequence in many and a short
    one in few, as many as fill whole waves of the GPU's multiprocessors; any other value
    splits every sequence evenly in that many (``python -m ck_rs.bench --decode-splits``
    times the two). The lengths are read on the device: the call never synchronises, so a
    CUDA graph may capture it and be replayed with new lengths.
    Returns ``o`` like ``q`` (bfloat16), and with ``return_lse=True`` also the log-sum-exp
    ``[batch, heads, seq_q]`` (float32). On CPU tensors it runs on the emulator (float32
    allowed, rounded to bfloat16).

    >>> import torch, ck_rs
    >>> q = torch.zeros(1, 1, 2, 64)
    >>> cache = torch.arange(8.0).repeat_interleave(64).reshape(1, 8, 1, 64)
    >>> o = ck_rs.attention_with_kvcache(q, cache, cache.clone(), torch.tensor([3], dtype=torch.int32))
    >>> o[0, 0, :, 0]  # equal scores: the mean of values 0, 1, 2
    tensor([1., 1.])
    """
    if scale is not None and not (_math.isfinite(scale) and scale > 0):
        raise _error(ValueError, "bad-scale", f"the scale is {scale}; give a positive finite number")
    if not isinstance(num_splits, int) or num_splits < 0:
        raise _error(ValueError, "argument-size", f"num_splits is {num_splits!r}; give 0 (the heuristic) or a count")
    optional = (page_table, k, v, rotary_cos, rotary_sin)
    kernel = _kernel("attention_with_kvcache", q, k_cache, v_cache, cache_seqlens, *optional)
    if kernel is not None:
        o, lse = kernel(q, k_cache, v_cache, cache_seqlens, *optional, bool(causal), num_splits, scale,
                        bool(rotary_interleaved))
        return (o, lse) if return_lse else o
    tensors = {"q": q, "k_cache": k_cache, "v_cache": v_cache, "cache_seqlens": cache_seqlens}
    for name, t in zip(("page_table", "k", "v", "rotary_cos", "rotary_sin"), optional):
        if t is not None:
            tensors[name] = t
    c = _Call("attention_with_kvcache", **tensors)
    if len(q.shape) != 4 or len(k_cache.shape) != 4:
        raise _error(
            ValueError,
            "shape-mismatch",
            f"q is {tuple(q.shape)} and k_cache {tuple(k_cache.shape)}; give q [batch, seq_q, heads, "
            "head_dim] and k_cache [batch, capacity, kv_heads, head_dim] (or [pages, page_size, "
            "kv_heads, head_dim] with a page table)",
        )
    batch, sq, heads, d = q.shape
    if page_table is None:
        capacity = k_cache.shape[1]
    else:
        capacity = k_cache.shape[1] * (page_table.shape[-1] if len(page_table.shape) == 2 else 0)
    # The splits' partial results and their tickets (none for one split: merged in the block).
    o_len, lse_len = _scratch(batch, heads, k_cache.shape[2], sq, d, capacity, num_splits, c)
    o = c.empty(tuple(q.shape), q)
    lse = c.empty((batch, heads, sq), q, float32=True)
    o_part = c.empty((o_len,), q, float32=True)
    lse_part = c.empty((lse_len,), q, float32=True)
    rotated = c.empty(tuple(q.shape), q) if rotary_cos is not None else None
    cap = c.capsule
    opt = lambda t: None if t is None else cap(t)  # noqa: E731
    _native.attention_kvcache(
        cap(q),
        cap(k_cache),
        cap(v_cache),
        cap(cache_seqlens),
        cap(o),
        cap(lse),
        cap(o_part),
        cap(lse_part),
        opt(page_table),
        opt(k),
        opt(v),
        opt(rotary_cos),
        opt(rotary_sin),
        opt(rotated),
        bool(causal),
        None if scale is None else float(scale),
        num_splits,
        bool(rotary_interleaved),
        c.stream,
    )
    return (o, lse) if return_lse else o


def _dims(param):
    """`param`'s shape rule as ``(rows, [(symbol, times), ...])``: whether it starts with the
    rows' leading dimensions (``...``), then each named extent and its multiple (``2*F``: F,
    twice)."""
    dims = param["dims"]
    rows = dims[:1] == ["..."]
    named = [(d[2:], 2) if d.startswith("2*") else (d, 1) for d in dims[1 if rows else 0 :]]
    return rows, named


def _sizes(desc, tensors):
    """The description's shape symbols from the given tensors' shapes (`...`: the rows'
    leading dimensions); the native call checks that every tensor agrees."""
    sizes = {}
    for p in desc["params"]:
        t = tensors.get(p["name"])
        if t is not None:
            _bind_sizes(_dims(p), tuple(t.shape), sizes)
    return sizes


def _bind_sizes(dims, shape, sizes):
    """Adds the symbols of one tensor's rule (`_dims`) for its `shape` to `sizes`."""
    rows, named = dims
    if rows:
        lead = max(len(shape) - len(named), 0)
        sizes.setdefault("...", shape[:lead])
        shape = shape[lead:]
    for (d, times), v in zip(named, shape):
        sizes.setdefault(d, v // times)


def _out_dims(param, scalars):
    """`param`'s shape rule (`_dims`) for a call's `scalars` (by name): its ``alt`` rule while
    the flag that names it is on."""
    alt = param.get("alt")
    if alt is not None and scalars.get(alt[0]):
        return _dims({"dims": alt[1]})
    return _dims(param)


def _shape(dims, sizes):
    """The shape of a tensor of rule `dims` (`_dims`) for `sizes` (`2*F`: twice the extent
    `F`)."""
    rows, named = dims
    lead = sizes.get("...", ()) if rows else ()
    return (*lead, *(times * sizes.get(d, 0) for d, times in named))


def _operator(desc):
    """A function for an operator of the registry that has no hand-written one: its inputs,
    its optional inputs (``None`` by default) and then its scalars (with their defaults; a
    choice by name), positional or by name; returns its outputs (one tensor, or a tuple in the
    description's order), allocated on its first input's device, of the call's element type
    (its first given tensor of that type's, else the operator's first: float32 for numpy)."""
    name = desc["name"]
    inputs = [p for p in desc["params"] if p["role"] in ("input", "optional_input")]
    required = [p["name"] for p in inputs if p["role"] == "input"]
    outputs = [p for p in desc["params"] if p["role"] == "output"]
    defaults = {p["name"]: None for p in inputs if p["role"] == "optional_input"}
    defaults.update((s["name"], _scalar_default(s)) for s in desc["scalars"])
    choices = {s["name"]: s["choices"] for s in desc["scalars"] if s["kind"] == "choice"}

    in_names = [p["name"] for p in inputs]
    names = required + list(defaults)
    order = [p["name"] for p in desc["params"]]
    # Shape rules read once: a call binds its inputs' and allocates its outputs' from these.
    in_dims = [_dims(p) for p in inputs]
    default_values = list(defaults.values())
    out_plan = [(p, p["elem"] == "f32") for p in outputs]
    typed = [p["name"] for p in inputs if p["elem"] == "op"]  # the call's element type
    # Its first input of the call's type, where that one is always given (the usual case).
    like_name = typed[0] if typed and typed[0] in required else None
    e4m3 = [p["name"] for p in inputs if p["elem"] == "e4m3"]
    default_bf16 = desc["dtypes"][0] == "bf16"
    scalar_names = [s["name"] for s in desc["scalars"]]
    plain = len(required) == len(in_names)  # no optional input

    def bind(args, kwargs):
        """The call's tensors by name (an optional one left out is None) and its scalars in
        order (defaults filled in)."""
        if not kwargs and plain and len(required) <= len(args) <= len(names):  # the usual call
            given = len(args) - len(required)
            return dict(zip(required, args)), [*args[len(required) :], *default_values[given:]]
        if not kwargs and len(required) <= len(args) <= len(names):
            given = dict(zip(names, args))
            tensors = {n: given.get(n, defaults.get(n)) for n in in_names}
            values = [given.get(k, v) for k, v in defaults.items() if k not in tensors]
            return tensors, values
        if len(args) > len(names):
            raise TypeError(f"{name}() takes at most {len(names)} arguments, {len(args)} given")
        given = dict(zip(names, args))
        if dup := sorted(given.keys() & kwargs.keys()):
            raise TypeError(f"{name}() got {dup} twice")
        given.update(kwargs)
        tensors = {}
        for n in in_names:
            if n not in given and n in required:
                raise TypeError(f"{name}() is missing the tensor `{n}`")
            tensors[n] = given.pop(n, None)
        scalars = [given.pop(k, v) for k, v in defaults.items() if k not in tensors]
        if given:
            raise TypeError(f"{name}() got unexpected arguments {sorted(given)}")
        return tensors, scalars

    def run(*args, **kwargs):
        tensors, scalars = bind(args, kwargs)
        given = tensors if plain else {n: t for n, t in tensors.items() if t is not None}
        if _torch is not None and _differentiable(name, None, *given.values()):
            # Through the op, whose autograd formula (or its error) keeps the gradient.
            return ops.record(name, *tensors.values(), *scalars)
        values = dict(zip(scalar_names, scalars))
        for k, allowed in choices.items():
            if values[k] not in allowed:
                raise _error(
                    ValueError,
                    "unknown-argument",
                    f"{k} {values[k]!r}; use one of {', '.join(allowed)}",
                )
        c = _Call(name, **given)
        sizes, first = {}, given[required[0]]
        for dims, t in zip(in_dims, tensors.values()):
            if plain or t is not None:
                _bind_sizes(dims, tuple(t.shape), sizes)
        if like_name is not None:
            like = given[like_name]
        else:
            like = next((given[n] for n in typed if n in given), None)
        if like is not None:  # the usual case: outputs like the call's first tensor of its type
            outs = {
                p["name"]: c.empty(_shape(_out_dims(p, values), sizes), like, float32=f32)
                for p, f32 in out_plan
            }
        else:  # no tensor tells the call's type: the operator's first (float32 for numpy)
            outs = {}
            for p, f32 in out_plan:
                bf16 = not f32 and c.torch and default_bf16
                outs[p["name"]] = _product_out(c, None, _shape(_out_dims(p, values), sizes), bf16, first)
        # In the description's order; an optional tensor left out is None, an e4m3 one its
        # bytes (torch exports float8 through DLPack only from DLPack 1.1 on). A flag is 0 or
        # 1, a choice its index, a scalar the operator derives None.
        for n in e4m3:
            if c.torch and tensors[n].dtype == _FP8:
                tensors[n] = tensors[n].view(_torch.uint8)
        if choices:
            scalars = [choices[k].index(v) if k in choices else v for k, v in values.items()]
        numbers = [None if v is None else float(v) for v in scalars]
        c.run(name, [tensors.get(n, outs.get(n)) for n in order], numbers)
        results = tuple(outs.values())
        return results[0] if len(results) == 1 else results

    run.__name__ = run.__qualname__ = name
    params = ", ".join(required + [f"{k}={v!r}" for k, v in defaults.items()])
    results = ", ".join(p["name"] for p in outputs)
    run.__doc__ = f"{desc['summary']}.\n\n``{name}({params}) -> {results}``"
    return run


def _scalar_default(s):
    """A scalar's default as Python takes it: a choice's name, a flag's bool, else the
    number (None where the operator derives it)."""
    if s["kind"] == "choice" and s["default"] is not None:
        return s["choices"][int(s["default"])]
    return s["default"]


for _desc in _OPERATORS:
    if _desc["name"] not in globals():
        globals()[_desc["name"]] = _operator(_desc)
        __all__.append(_desc["name"])

if _torch is not None:
    from . import _torch_ops as ops  # registers torch.ops.ck_rs.*

    _KERNELS.update({name: ops._OPS[name].impl for name in ops._CPP})
