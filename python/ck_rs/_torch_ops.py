"""The operators as PyTorch operators (``torch.ops.ck_rs.*``), each with a fake (meta)
implementation, so that ``torch.compile`` keeps them in its graph without a break.

The hottest ops (rmsnorm, gemm, linear, attention, attention_with_kvcache) have C++ kernels and
formulas (``csrc/``, built by ``_cpp`` against this torch), which skip Python on every call; where
those could not be built, they are registered as every other op is.

Each op is registered below torch's ``custom_op`` layer, with ``torch.library.Library``: the
eager implementation as its CPU and CUDA kernels, and an autograd kernel of its own
(``_Op.autograd``) that

- records the op for autograd (``_Op.function``, an ``autograd.Function``) where grad is enabled
  and an input requires it;
- otherwise, where the tensors are plain CPU or CUDA tensors and no mode (fake tensors,
  functionalization, tracing) waits below autograd, calls the implementation directly — the
  fast path, which skips the dispatcher's second trip through Python;
- else redispatches below autograd, as torch's own autograd kernels do.

The ``ck_rs.*`` functions and the formulas below skip the dispatcher altogether where nothing
traces (``_untraced``: plain tensors, no dispatch mode, no functorch transform, not compiling):
``_Op.record`` calls the ``autograd.Function`` itself, ``_Op.call`` the implementation; each
trip through the dispatcher into Python and back costs ~5 µs, and a training step of a small
layer makes dozens.

An op with a backward operator has its formula here, saving only what that backward reads:
``rmsnorm`` (x, gamma), ``add_rmsnorm`` (r, gamma), ``layernorm`` (x, gamma and its own mean
and rstd outputs), ``softmax`` (its output), ``linear`` (x and the weight; without an
activation), ``gated_linear`` (x and the weight: the products are recomputed), ``rope_qkv``
(the cos/sin tables), ``qkv_projection`` (x, the weight and the tables), ``attention`` and
``attention_qkv`` (the inputs, o and the log-sum-exp; the log-sum-exp output is not
differentiable). On the others ``backward()`` raises ``error[no-backward]`` rather than losing the
gradient; a backward op's own backward (double backward) raises ``error[no-double-backward]``."""

from typing import Callable, Optional

import torch
from torch import _C

import ck_rs

from . import _cpp

_lib = torch.library.Library("ck_rs", "DEF")

# The ops whose kernels (CPU, CUDA, autograd) are C++ (``_cpp``, built against this torch): their
# Python implementation is then what ``ck_rs.*`` runs on numpy arrays and with ``out=``.
_CPP = _cpp.load()

# Below autograd (the redispatch), and below ADInplaceOrView too (where a plain tensor's next
# key is its backend's).
_BELOW_AUTOGRAD = _C._after_autograd_keyset
_BELOW_VIEWS = _C._after_ADInplaceOrView_keyset
_BACKENDS = (_C.DispatchKey.CUDA, _C.DispatchKey.CPU)
_PLAIN = {}  # a call's key set (its bits) -> whether only the backend's kernel is below autograd


_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
_compiling = torch.compiler.is_compiling


def _untraced(args):
    """Whether a call on ``args`` may skip the dispatcher: every tensor among them plain (not
    a fake, functional or other subclass tensor), and no dispatch mode, functorch transform or
    compiler tracing active — each of those must see the op itself."""
    if _C._len_torch_dispatch_stack() or _C._are_functorch_transforms_active() or _compiling():
        return False
    for a in args:
        if isinstance(a, torch.Tensor) and type(a) not in _PLAIN_TYPES:
            return False
    return True


def _plain(keyset):
    """Whether a call with ``keyset`` has nothing below autograd but its backend's kernel:
    plain CPU or CUDA tensors, no fake tensors, no mode. Cached by the key set's bits (comparing
    dispatch keys from Python costs more than the rest of the check)."""
    bits = keyset.raw_repr()
    plain = _PLAIN.get(bits)
    if plain is None:
        plain = _PLAIN[bits] = (keyset & _BELOW_VIEWS).highestPriorityTypeId() in _BACKENDS
    return plain


class _Op:
    """One ``torch.ops.ck_rs`` operator: its schema, its eager implementation (the CPU and CUDA
    kernels), its fake implementation, and its autograd formula (``backward`` and
    ``setup_context`` as ``torch.library.register_autograd`` takes them) if it has one."""

    def __init__(self, schema, impl, fake):
        name = schema[: schema.index("(")]
        _lib.define(schema)
        torch.library.register_fake(f"ck_rs::{name}", fake, lib=_lib)
        self.name, self.impl, self.python = name, impl, impl
        self.overload = getattr(torch.ops.ck_rs, name).default
        # An op with C++ kernels (`_CPP`) has its autograd kernel and formula there too; its
        # Python implementation and formula are what runs where the C++ could not be built.
        self.cpp = name in _CPP
        if self.cpp:
            self.impl = self.overload._op
        else:
            for key in ("CPU", "CUDA"):
                _lib.impl(name, impl, key)
            _lib.impl(name, self.autograd, "Autograd", with_keyset=True)
        # The dispatcher drops trailing arguments equal to their defaults; a formula sees all.
        self.defaults = [a.default_value for a in self.overload._schema.arguments]
        self._set_formula(None, None)

    def record(self, *args):
        """The op on ``args`` (the schema's arguments in order), its gradient recorded: the
        ``autograd.Function`` applied from here where nothing traces, else through the
        dispatcher (whose autograd kernel applies the same function); an op with C++ kernels
        straight to the op, whose C++ autograd kernel records the formula."""
        if self.cpp:
            return self.impl(*args)
        if _untraced(args):
            return self.apply_plain(*args, None)
        return self.overload(*args)

    def call(self, *args):
        """The op on ``args`` where no gradient is recorded (a formula's own ops): the
        implementation called from here where nothing traces and no input needs a gradient,
        else through the dispatcher."""
        if _untraced(args) and not (_C.is_grad_enabled() and _C._any_requires_grad(*args)):
            return self.impl(*args)
        return self.overload(*args)

    def autograd(self, keyset, *args):
        if _C.is_grad_enabled() and _C._any_requires_grad(*args):
            if _plain(keyset):
                # `Function.apply` in C++, without the Python wrapper's pass over the arguments
                # for functorch's dead wrappers, which plain tensors are not.
                return self.apply_plain(*args, keyset)
            return self.function.apply(*args, keyset)
        if _plain(keyset):
            return self.impl(*args)  # the fast path: nothing below autograd to go through
        with _C._AutoDispatchBelowAutograd():
            return self.overload.redispatch(keyset & _BELOW_AUTOGRAD, *args)

    def _set_formula(self, backward, setup_context):
        """Records the op for autograd with `backward` and `setup_context` (None: an op without
        a backward, whose ``backward()`` raises ``error[no-backward]``)."""
        self.function = self._function(backward, setup_context)
        self.apply_plain = super(torch.autograd.Function, self.function).apply

    def _function(self, backward, setup_context):
        op = self

        def forward(ctx, *args):
            *args, keyset = args  # None: applied by `record`, nothing traces
            if keyset is None or _plain(keyset):  # the fast path, as in `autograd`
                result = op.impl(*args)
            else:
                with _C._AutoDispatchBelowAutograd():
                    result = op.overload.redispatch(keyset & _BELOW_AUTOGRAD, *args)
            if setup_context is not None:
                inputs = (*args, *op.defaults[len(args) :])
                setup_context(ctx, inputs, result)
            return result

        def backward_(ctx, *grads):
            if backward is None:
                raise RuntimeError(
                    f"error[no-backward]: ck_rs::{op.name} has no backward pass yet; compute "
                    "this part with torch ops where a gradient must flow through it"
                )
            ctx.needs_input_grad = ctx.needs_input_grad[:-1]  # not the keyset's
            grads_in = backward(ctx, *grads)
            grads_in = grads_in if isinstance(grads_in, tuple) else (grads_in,)
            return (*grads_in, None)

        return type(
            f"ck_rs_{self.name}",
            (torch.autograd.Function,),
            {"forward": staticmethod(forward), "backward": staticmethod(backward_)},
        )


_OPS = {}


def _op(schema: str, impl: Callable, fake: Callable):
    """Defines ``ck_rs::<schema>`` with ``impl`` (the eager function, called with the schema's
    arguments) and ``fake``; returns the ``torch.ops.ck_rs`` packet."""
    op = _Op(schema, impl, fake)
    _OPS[op.name] = op
    return getattr(torch.ops.ck_rs, op.name)


def _register_autograd(name: str, backward: Callable, setup_context: Optional[Callable] = None):
    """The autograd formula of ``ck_rs::<name>``: ``backward(ctx, *grads)`` returns a gradient
    per schema argument (None where there is none); ``setup_context(ctx, inputs, output)``, with
    every argument in ``inputs`` (defaults filled in), saves what it reads."""
    _OPS[name]._set_formula(backward, setup_context)


def record(name: str, *args):
    """``ck_rs::<name>`` on ``args`` with its gradient recorded (``_Op.record``): what the
    ``ck_rs.*`` functions call on tensors that require grad."""
    return _OPS[name].record(*args)


def _call(name: str, *args):
    """``ck_rs::<name>`` on ``args`` inside a formula (``_Op.call``)."""
    return _OPS[name].call(*args)


rmsnorm = _op(
    "rmsnorm(Tensor x, Tensor gamma, float eps=1e-06) -> Tensor",
    ck_rs.rmsnorm,
    lambda x, gamma, eps=1e-6: torch.empty_like(x),
)

add_rmsnorm = _op(
    "add_rmsnorm(Tensor x, Tensor residual, Tensor gamma, float eps=1e-06) -> (Tensor, Tensor)",
    ck_rs.add_rmsnorm,
    lambda x, residual, gamma, eps=1e-6: (torch.empty_like(x), torch.empty_like(x)),
)


def _layernorm_fake(x, gamma, beta, eps=1e-5):
    rows = x.shape[:-1]
    return torch.empty_like(x), x.new_empty(rows, dtype=torch.float32), x.new_empty(rows, dtype=torch.float32)


# ``(y, mean, rstd)``, as ``aten::native_layer_norm``: the statistics are what the backward reads.
layernorm = _op(
    "layernorm(Tensor x, Tensor gamma, Tensor beta, float eps=1e-05) -> (Tensor, Tensor, Tensor)",
    lambda x, gamma, beta, eps=1e-5: ck_rs.layernorm(x, gamma, beta, eps, return_stats=True),
    _layernorm_fake,
)

softmax = _op("softmax(Tensor x) -> Tensor", ck_rs.softmax, lambda x: torch.empty_like(x))

gemm = _op(
    "gemm(Tensor a, Tensor b, ScalarType? out_dtype=None) -> Tensor",
    lambda a, b, out_dtype=None: ck_rs.gemm(a, b, out_dtype=out_dtype),
    lambda a, b, out_dtype=None: a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or torch.float32),
)

linear = _op(
    "linear(Tensor x, Tensor weight, Tensor? bias=None, Tensor? residual=None, "
    'str activation="none", float beta=1.0) -> Tensor',
    lambda x, weight, bias=None, residual=None, activation="none", beta=1.0: ck_rs.linear(
        x, weight, bias, residual, activation=activation, beta=beta, out_dtype=x.dtype
    ),
    lambda x, weight, bias=None, residual=None, activation="none", beta=1.0: x.new_empty(
        (*x.shape[:-1], weight.shape[0])
    ),
)

gated_linear = _op(
    'gated_linear(Tensor x, Tensor weight, str activation="silu") -> Tensor',
    lambda x, weight, activation="silu": ck_rs.gated_linear(x, weight, activation=activation),
    lambda x, weight, activation="silu": x.new_empty(
        (*x.shape[:-1], weight.shape[0] // 2), dtype=torch.bfloat16
    ),
)


def _rope_qkv_fake(qkv, cos, sin, heads, kv_heads, rotary_dim=None, interleaved=False):
    b, s, width = qkv.shape
    d = width // (heads + 2 * kv_heads)
    q = qkv.new_empty((b, heads, s, d))
    return q, qkv.new_empty((b, kv_heads, s, d)), qkv.new_empty((b, kv_heads, s, d))


rope_qkv = _op(
    "rope_qkv(Tensor qkv, Tensor cos, Tensor sin, int heads, int kv_heads, int? rotary_dim=None, "
    "bool interleaved=False) -> (Tensor, Tensor, Tensor)",
    lambda qkv, cos, sin, heads, kv_heads, rotary_dim=None, interleaved=False: ck_rs.rope_qkv(
        qkv, cos, sin, heads, kv_heads, rotary_dim=rotary_dim, interleaved=interleaved
    ),
    _rope_qkv_fake,
)

qkv_projection = _op(
    "qkv_projection(Tensor x, Tensor weight, Tensor cos, Tensor sin, int heads, int kv_heads, "
    "int? rotary_dim=None, bool interleaved=False) -> Tensor",
    lambda x, weight, cos, sin, heads, kv_heads, rotary_dim=None, interleaved=False:
    ck_rs.qkv_projection(
        x, weight, cos, sin, heads, kv_heads, rotary_dim=rotary_dim, interleaved=interleaved
    ),
    lambda x, weight, cos, sin, heads, kv_heads, rotary_dim=None, interleaved=False: x.new_empty(
        (*x.shape[:-1], weight.shape[0])
    ),
)

grouped_mm = _op(
    "grouped_mm(Tensor a, Tensor b, int[] tokens) -> Tensor",
    ck_rs.grouped_mm,
    lambda a, b, tokens: a.new_empty((a.shape[0], b.shape[2]), dtype=torch.float32),
)


def _rope_qkv_backward_fake(dq, dk, dv, cos, sin, heads, kv_heads, rotary_dim=None, interleaved=False):
    b, _, s, d = dq.shape
    return dq.new_empty((b, s, (heads + 2 * kv_heads) * d))


rope_qkv_backward = _op(
    "rope_qkv_backward(Tensor dq, Tensor dk, Tensor dv, Tensor cos, Tensor sin, int heads, "
    "int kv_heads, int? rotary_dim=None, bool interleaved=False) -> Tensor",
    lambda dq, dk, dv, cos, sin, heads, kv_heads, rotary_dim=None, interleaved=False:
    ck_rs.rope_qkv_backward(
        dq, dk, dv, cos, sin, heads, kv_heads, rotary_dim=rotary_dim, interleaved=interleaved
    ),
    _rope_qkv_backward_fake,
)


def _attention_fake(q, k, v, causal=False, scale=None, out_layout="bhsd"):
    b, h, s, d = q.shape
    o = q.new_empty((b, s, h, d)) if out_layout == "bshd" else torch.empty_like(q)
    return o, q.new_empty(q.shape[:3], dtype=torch.float32)


# ``(o, lse)``: the row log-sum-exp is what a backward reads.
attention = _op(
    "attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None, "
    'str out_layout="bhsd") -> (Tensor, Tensor)',
    lambda q, k, v, causal=False, scale=None, out_layout="bhsd": ck_rs.attention(
        q, k, v, causal=causal, scale=scale, return_lse=True, out_layout=out_layout
    ),
    _attention_fake,
)


def _attention_qkv_fake(qkv, heads, kv_heads, causal=False, scale=None):
    b, s, width = qkv.shape
    d = width // (heads + 2 * kv_heads)
    return qkv.new_empty((b, s, heads, d)), qkv.new_empty((b, heads, s), dtype=torch.float32)


# ``(o, lse)``, O as ``[batch, seq, heads, head_dim]``.
attention_qkv = _op(
    "attention_qkv(Tensor qkv, int heads, int kv_heads, bool causal=False, float? scale=None) "
    "-> (Tensor, Tensor)",
    lambda qkv, heads, kv_heads, causal=False, scale=None: ck_rs.attention_qkv(
        qkv, heads, kv_heads, causal=causal, scale=scale, return_lse=True
    ),
    _attention_qkv_fake,
)


def _attention_backward_fake(q, k, v, o, lse, dout, causal=False, scale=None, deterministic=False,
                             out_layout="bhsd"):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


# ``(dq, dk, dv)``.
attention_backward = _op(
    "attention_backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor dout, "
    'bool causal=False, float? scale=None, bool deterministic=False, str out_layout="bhsd") '
    "-> (Tensor, Tensor, Tensor)",
    lambda q, k, v, o, lse, dout, causal=False, scale=None, deterministic=False, out_layout="bhsd":
    ck_rs.attention_backward(
        q, k, v, o, lse, dout, causal=causal, scale=scale, deterministic=deterministic,
        out_layout=out_layout,
    ),
    _attention_backward_fake,
)


def _kvcache_fake(q, k_cache, v_cache, cache_seqlens, page_table=None, k=None, v=None,
                  rotary_cos=None, rotary_sin=None, causal=True, num_splits=0, scale=None,
                  rotary_interleaved=False):
    b, s, h, _ = q.shape
    return torch.empty_like(q), q.new_empty((b, h, s), dtype=torch.float32)


# ``(o, lse)``; the caches are written in place when new ``k``, ``v`` are given.
attention_with_kvcache = _op(
    "attention_with_kvcache(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, "
    "Tensor cache_seqlens, Tensor? page_table=None, Tensor? k=None, Tensor? v=None, "
    "Tensor? rotary_cos=None, Tensor? rotary_sin=None, bool causal=True, int num_splits=0, "
    "float? scale=None, bool rotary_interleaved=False) -> (Tensor, Tensor)",
    lambda q, k_cache, v_cache, cache_seqlens, page_table=None, k=None, v=None, rotary_cos=None,
    rotary_sin=None, causal=True, num_splits=0, scale=None, rotary_interleaved=False:
    ck_rs.attention_with_kvcache(
        q, k_cache, v_cache, cache_seqlens, page_table, k, v, rotary_cos, rotary_sin,
        causal=causal, num_splits=num_splits, return_lse=True, scale=scale,
        rotary_interleaved=rotary_interleaved,
    ),
    _kvcache_fake,
)


def _varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, scale=None):
    return torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


# ``(o, lse)``, the log-sum-exp ``[heads, total_q]`` as FlashAttention's.
attention_varlen = _op(
    "attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
    "int max_seqlen_q, int max_seqlen_k, bool causal=False, float? scale=None) -> (Tensor, Tensor)",
    lambda q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, scale=None:
    ck_rs.attention_varlen(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
        scale=scale, return_lse=True,
    ),
    _varlen_fake,
)


def _register(desc):
    """The op of an operator of the registry that has no hand-written one above."""
    name = desc["name"]
    inputs = [p for p in desc["params"] if p["role"] in ("input", "optional_input")]
    outputs = [p for p in desc["params"] if p["role"] == "output"]
    args = [
        f"Tensor? {p['name']}=None" if p["role"] == "optional_input" else f"Tensor {p['name']}"
        for p in inputs
    ]
    for s in desc["scalars"]:
        if s["kind"] == "flag":
            args.append(f"bool {s['name']}={s['default']!r}")
        elif s["kind"] == "count":
            args.append(f"int {s['name']}")
        elif s["kind"] == "choice":
            args.append(f"str {s['name']}=\"{ck_rs._scalar_default(s)}\"")
        elif s["default"] is None:  # derived by the operator
            args.append(f"float? {s['name']}=None")
        else:
            args.append(f"float {s['name']}={s['default']!r}")
    scalar_names = [s["name"] for s in desc["scalars"]]
    result = "Tensor" if len(outputs) == 1 else f"({', '.join(['Tensor'] * len(outputs))})"
    typed = [i for i, p in enumerate(inputs) if p["elem"] == "op"]  # the call's element type
    default = torch.bfloat16 if desc["dtypes"][0] == "bf16" else torch.float32

    def fake(*args):
        tensors = dict(zip((p["name"] for p in inputs), args))
        sizes = ck_rs._sizes(desc, tensors)
        scalars = dict(zip(scalar_names, args[len(inputs) :]))
        first = args[0]
        like = next((args[i] for i in typed if args[i] is not None), None)
        dtype = default if like is None else like.dtype
        outs = tuple(
            first.new_empty(
                ck_rs._shape(ck_rs._out_dims(p, scalars), sizes),
                dtype=torch.float32 if p["elem"] == "f32" else dtype,
            )
            for p in outputs
        )
        return outs[0] if len(outs) == 1 else outs

    return _op(f"{name}({', '.join(args)}) -> {result}", getattr(ck_rs, name), fake)


for _desc in ck_rs._OPERATORS:
    if _desc["name"] not in globals():
        globals()[_desc["name"]] = _register(_desc)


def _rmsnorm_setup(ctx, inputs, output):
    x, gamma, eps = inputs
    ctx.save_for_backward(x, gamma)
    ctx.eps = eps


def _rmsnorm_backward(ctx, dy):
    x, gamma = ctx.saved_tensors
    dx, dgamma = _call("rmsnorm_backward", dy.contiguous(), x, gamma, ctx.eps)
    return dx, dgamma, None


_register_autograd("rmsnorm", _rmsnorm_backward, _rmsnorm_setup)


def _add_rmsnorm_setup(ctx, inputs, output):
    _, _, gamma, eps = inputs
    ctx.save_for_backward(output[1], gamma)  # r = x + residual, what y is the RMSNorm of
    ctx.eps = eps


def _add_rmsnorm_backward(ctx, dy, dr):
    r, gamma = ctx.saved_tensors
    if dr is None:
        d, dgamma = _call("rmsnorm_backward", dy.contiguous(), r, gamma, ctx.eps)
    else:  # dr added to RMSNorm's dx in the same pass
        d, dgamma = _call("add_rmsnorm_backward", dy.contiguous(), dr.contiguous(), r, gamma, ctx.eps)
    return d, d, dgamma, None


_register_autograd("add_rmsnorm", _add_rmsnorm_backward, _add_rmsnorm_setup)


def _layernorm_setup(ctx, inputs, output):
    x, gamma, _, _ = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, gamma, mean, rstd)
    ctx.mark_non_differentiable(mean, rstd)


def _layernorm_backward(ctx, dy, _dmean, _drstd):
    x, gamma, mean, rstd = ctx.saved_tensors
    dx, dgamma, dbeta = _call("layernorm_backward", dy.contiguous(), x, gamma, mean, rstd)
    return dx, dgamma, dbeta, None


_register_autograd("layernorm", _layernorm_backward, _layernorm_setup)


def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_backward(ctx, dy):
    (y,) = ctx.saved_tensors
    return _call("softmax_backward", dy.contiguous(), y)


_register_autograd("softmax", _softmax_backward, _softmax_setup)


def _attention_setup(ctx, inputs, output):
    q, k, v, causal, scale, out_layout = inputs
    o, lse = output
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal, ctx.scale, ctx.seq_first = causal, scale, out_layout == "bshd"


def _attention_backward(ctx, do, _dlse):
    """FlashAttention's backward from the saved Q, K, V, O and log-sum-exp, on the
    ``ck_rs::attention_backward`` op (deterministic under
    ``torch.use_deterministic_algorithms``). O and dO are read in the forward's layout."""
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = _call(
        "attention_backward", q, k, v, o, lse, do.contiguous().to(o.dtype), ctx.causal, ctx.scale,
        torch.are_deterministic_algorithms_enabled(), "bshd" if ctx.seq_first else "bhsd",
    )
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None


_register_autograd("attention", _attention_backward, _attention_setup)


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
        return _call("gemm", a, b, torch.bfloat16)
    return _call("gemm", a, b, None).to(dtype)


def _linear_grads(ctx, dy2, x, weight):
    """A product ``x · Wᵀ``'s gradients from ``dy2`` (its rows): ``dx = dy · W``, ``dW = dyᵀ ·
    x`` (``dyᵀ`` a view, which ``gemm`` reads as it lies), each where asked for."""
    dx = wgt = None
    if ctx.needs_input_grad[0]:
        dx = _product(dy2, weight.to(x.dtype), x.dtype).reshape(x.shape)
    if ctx.needs_input_grad[1]:
        wgt = _product(dy2.t(), x.reshape(-1, weight.shape[1]), weight.dtype)
    return dx, wgt


def _linear_backward(ctx, dy):
    """``dx = dy · W``, ``dW = dyᵀ · x``, ``dbias = Σ_rows dy``, ``dresidual = beta · dy``."""
    if ctx.activation != "none":
        raise RuntimeError(
            f"error[no-backward]: ck_rs::linear has no backward through activation="
            f"{ctx.activation!r} yet; apply the activation in torch after a linear without one"
        )
    x, weight = ctx.saved_tensors
    n, k = weight.shape
    dy2 = dy.reshape(-1, n).to(x.dtype).contiguous()
    dx, wgt = _linear_grads(ctx, dy2, x, weight)
    dbias = dy2.sum(0, dtype=torch.float32).to(dy.dtype) if ctx.has_bias else None
    dres = (dy if ctx.beta == 1 else dy * ctx.beta) if ctx.has_residual else None
    return dx, wgt, dbias, dres, None, None


_register_autograd("linear", _linear_backward, _linear_setup)


def _gated_setup(ctx, inputs, output):
    x, weight, activation = inputs
    ctx.save_for_backward(x, weight)
    ctx.activation = activation


def _gated_backward(ctx, dy):
    """``y = act(g) · u`` with ``[g, u] = x · Wᵀ`` (W the stacked ``[2F, K]`` weight): the fused
    forward never wrote the products, so they are recomputed (``linear``), then ``dgu =
    swiglu_backward(dy, [g, u])`` (or ``geglu_backward``), ``dx = dgu · W`` and ``dW = dguᵀ ·
    x`` (``dguᵀ`` a view ``gemm`` reads as it lies). ``ck_rs.gated_linear`` on tensors that
    require grad keeps the products instead and never comes here."""
    x, weight = ctx.saved_tensors
    two_f, k = weight.shape
    x2 = x.reshape(-1, k).to(torch.bfloat16)
    w16 = weight.to(torch.bfloat16)
    gu = _call("linear", x2, w16, None, None, "none", 1.0)
    dgu = _call(
        "swiglu_backward" if ctx.activation == "silu" else "geglu_backward",
        dy.reshape(-1, two_f // 2).to(torch.bfloat16).contiguous(),
        gu,
    )
    dx = dw = None
    if ctx.needs_input_grad[0]:
        dx = _product(dgu, w16, x.dtype).reshape(x.shape)
    if ctx.needs_input_grad[1]:
        dw = _product(dgu.t(), x2, weight.dtype)
    return dx, dw, None


_register_autograd("gated_linear", _gated_backward, _gated_setup)


def _glu_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _glu_backward(backward):
    """The formula of ``swiglu`` / ``geglu``: their backward kernel on the saved products."""
    return lambda ctx, dy: _call(backward, dy.contiguous(), ctx.saved_tensors[0])


_register_autograd("swiglu", _glu_backward("swiglu_backward"), _glu_setup)
_register_autograd("geglu", _glu_backward("geglu_backward"), _glu_setup)


def _rope_setup(ctx, inputs, output):
    qkv, cos, sin, heads, kv_heads, rotary_dim, interleaved = inputs
    ctx.save_for_backward(cos, sin)
    ctx.shape, ctx.dtype, ctx.heads, ctx.kv_heads = qkv.shape, qkv.dtype, heads, kv_heads
    ctx.rotary_dim, ctx.interleaved = rotary_dim, interleaved


def _rope_backward(ctx, dq, dk, dv):
    """The forward rotates each head row of q and k by its token's angle, then moves the heads to
    ``[B, H, S, D]``; its gradient is the transpose: the heads moved back and rotated by minus
    the angle, one pass of ``rope_qkv_backward``. cos/sin are tables, without a gradient."""
    _no_table_grads(ctx, "rope_qkv", 1)
    cos, sin = ctx.saved_tensors
    b, s, width = ctx.shape
    d = width // (ctx.heads + 2 * ctx.kv_heads)
    like = next(g for g in (dq, dk, dv) if g is not None)

    def grad(g, n):  # a missing gradient is zeros; each in the forward's dtype, contiguous
        if g is None:
            return like.new_zeros((b, n, s, d), dtype=ctx.dtype)
        return g.to(ctx.dtype).contiguous()

    dqkv = _call(
        "rope_qkv_backward",
        grad(dq, ctx.heads), grad(dk, ctx.kv_heads), grad(dv, ctx.kv_heads), cos, sin,
        ctx.heads, ctx.kv_heads, ctx.rotary_dim, ctx.interleaved,
    )
    return dqkv, None, None, None, None, None, None


_register_autograd("rope_qkv", _rope_backward, _rope_setup)


def _no_table_grads(ctx, op, cos_at):
    """``error[no-backward]`` where the cos/sin tables (inputs ``cos_at`` and the next) ask for a
    gradient."""
    if ctx.needs_input_grad[cos_at] or ctx.needs_input_grad[cos_at + 1]:
        raise RuntimeError(
            f"error[no-backward]: ck_rs::{op} gives no gradient for cos and sin (tables of "
            "angles); detach them, or compute learned angles' rotation with torch ops"
        )


def _rotated_back(dy, cos, sin, heads, kv_heads, rotary_dim, interleaved):
    """``dy`` ``[B, S, (H + 2·Hkv)·D]`` with its query and key heads rotated by minus each angle:
    the transpose of the rotation ``qkv_projection`` applies, in torch ops (float32)."""
    b, s, width = dy.shape
    all_heads = heads + 2 * kv_heads
    d = width // all_heads
    r = d if rotary_dim is None else rotary_dim
    g = dy.reshape(b * s, all_heads, d).float().clone()
    rows = torch.arange(b * s, device=dy.device) % cos.shape[0]
    c, sn = cos[rows][:, None, :], sin[rows][:, None, :]  # [T, 1, R/2]
    qk = g[:, : heads + kv_heads, :r]
    if interleaved:
        x1, x2 = qk[..., 0::2].clone(), qk[..., 1::2].clone()
        qk[..., 0::2], qk[..., 1::2] = x1 * c + x2 * sn, x2 * c - x1 * sn
    else:
        x1, x2 = qk[..., : r // 2].clone(), qk[..., r // 2 :].clone()
        qk[..., : r // 2], qk[..., r // 2 :] = x1 * c + x2 * sn, x2 * c - x1 * sn
    return g.reshape(b, s, width).to(dy.dtype)


def _qkv_projection_setup(ctx, inputs, output):
    x, weight, cos, sin, heads, kv_heads, rotary_dim, interleaved = inputs
    ctx.save_for_backward(x, weight, cos, sin)
    ctx.rope = (heads, kv_heads, rotary_dim, interleaved)


def _qkv_projection_backward(ctx, dy):
    """The rotation's transpose on ``dy`` (torch ops), then ``linear``'s gradients."""
    _no_table_grads(ctx, "qkv_projection", 2)
    x, weight, cos, sin = ctx.saved_tensors
    dy = _rotated_back(dy, cos, sin, *ctx.rope)
    dx, dw = _linear_grads(ctx, dy.reshape(-1, weight.shape[0]).to(x.dtype).contiguous(), x, weight)
    return dx, dw, None, None, None, None, None, None


_register_autograd("qkv_projection", _qkv_projection_backward, _qkv_projection_setup)


def _attention_qkv_setup(ctx, inputs, output):
    qkv, heads, kv_heads, causal, scale = inputs
    o, lse = output
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(qkv, o, lse)
    ctx.heads, ctx.kv_heads, ctx.causal, ctx.scale = heads, kv_heads, causal, scale


def _attention_qkv_backward(ctx, do, _dlse):
    """``attention_backward`` on Q, K and V copied out of ``qkv`` (``[B, H, S, D]``), O and dO
    read in place, and dQ, dK, dV put back in ``qkv``'s layout."""
    qkv, o, lse = ctx.saved_tensors
    b, s, width = qkv.shape
    h, hkv = ctx.heads, ctx.kv_heads
    heads4 = qkv.reshape(b, s, h + 2 * hkv, width // (h + 2 * hkv)).transpose(1, 2)
    q, k, v = (heads4[:, a:z].contiguous() for a, z in ((0, h), (h, h + hkv), (h + hkv, h + 2 * hkv)))
    dq, dk, dv = _call(
        "attention_backward", q, k, v, o, lse, do.contiguous().to(o.dtype), ctx.causal, ctx.scale,
        torch.are_deterministic_algorithms_enabled(), "bshd",
    )
    dqkv = torch.cat([t.transpose(1, 2) for t in (dq, dk, dv)], dim=2).reshape(b, s, width)
    return dqkv.to(qkv.dtype), None, None, None, None


_register_autograd("attention_qkv", _attention_qkv_backward, _attention_qkv_setup)


def _no_double_backward(name):
    def backward(ctx, *grads):
        raise RuntimeError(
            f"error[no-double-backward]: ck_rs::{name} has no backward of its own (double "
            "backward, e.g. a gradient penalty); compute that term with torch ops"
        )

    return backward


# Every backward of the registry, and the hand-written ones.
for _name in [d["name"] for d in ck_rs._OPERATORS if d["name"].endswith("_backward")] + [
    "attention_backward",
    "rope_qkv_backward",
]:
    _register_autograd(_name, _no_double_backward(_name))
