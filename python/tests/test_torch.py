"""The operators on torch tensors: CPU (the emulator) and CUDA (the GPU), torch in, torch out;
the custom ops inside ``torch.compile``. Skipped where torch (or a GPU) is missing."""

import numpy as np
import pytest

import ck_rs
import reference as ref

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def randn(*shape, device="cpu", dtype=None):
    g = torch.Generator().manual_seed(sum(shape) * 31 + len(shape))
    return torch.randn(*shape, generator=g).to(device=device, dtype=dtype or torch.float32)


def np64(t):
    return t.detach().float().cpu().double().numpy()


from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402 (after importorskip)


class SeenOps(TorchDispatchMode):
    """A dispatch mode that records the ops reaching it (below autograd), in order."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,n", [(1, 1), (3, 5000), (130, 257), (65, 4099)])
def test_row_operators(device, dtype, m, n):
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    x, res, g, b = (randn(*s, device=device, dtype=dtype) for s in [(m, n), (m, n), (n,), (n,)])
    y = ck_rs.rmsnorm(x, g)
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == dtype
    assert ref.rel_err(np64(y), ref.rmsnorm(np64(x), np64(g), 1e-6)) < tol
    y, r = ck_rs.add_rmsnorm(x, res, g)
    assert ref.rel_err(np64(r), np64(x) + np64(res)) < tol
    assert ref.rel_err(np64(y), ref.rmsnorm(np64(r), np64(g), 1e-6)) < tol
    y = ck_rs.layernorm(x, g, b)
    assert ref.rel_err(np64(y), ref.layernorm(np64(x), np64(g), np64(b), 1e-5)[0]) < tol
    y = ck_rs.softmax(x)
    assert ref.rel_err(np64(y), ref.softmax(np64(x))) < tol


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gemm(device, dtype):
    a, b = randn(130, 257, device=device, dtype=dtype), randn(257, 72, device=device, dtype=dtype)
    c = ck_rs.gemm(a, b)
    assert c.dtype == torch.float32 and c.device == a.device
    assert ref.rel_err(np64(c), np64(a) @ np64(b)) < 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_gemm_reads_a_transposed_view_as_it_lies(device, monkeypatch):
    """``a`` given as ``dy.t()`` (a weight gradient's operand): read from its ``[K, M]`` storage
    where M and N are whole vectors (bfloat16 result, or float32 with a residual added), copied
    elsewhere; every result against fp64."""
    calls = []
    native = ck_rs._native.call
    count = lambda op, *a: (op == "gemm_a_km" and calls.append(1)) or native(op, *a)  # noqa: E731
    monkeypatch.setattr(ck_rs._native, "call", count)
    monkeypatch.setattr(ck_rs, "_KERNELS", {})  # the function's routing, not the C++ kernel's
    dy = randn(77, 136, device=device, dtype=torch.bfloat16)  # [tokens, M]
    x = randn(77, 264, device=device, dtype=torch.bfloat16)  # [tokens, N]
    want = np64(dy).T @ np64(x)
    c = ck_rs.gemm(dy.t(), x, out_dtype=torch.bfloat16)
    assert c.dtype == torch.bfloat16 and c.shape == (136, 264) and len(calls) == 1
    assert ref.rel_err(np64(c), want) < 1e-2
    grad = randn(136, 264, device=device)
    c = ck_rs.gemm(dy.t(), x, residual=grad, beta=1.0)
    assert c.dtype == torch.float32 and len(calls) == 2
    assert ref.rel_err(np64(c), want + np64(grad)) < 1e-5
    # M = 36 is no whole number of vectors, and a bias has no such kernel: both copied.
    odd = randn(77, 36, device=device, dtype=torch.bfloat16)
    c = ck_rs.gemm(odd.t(), x)
    bias, dy80, x80 = (randn(*s, device=device, dtype=torch.bfloat16) for s in ((264,), (80, 136), (80, 264)))
    c2 = ck_rs.gemm(dy80.t(), x80, bias=bias)
    assert len(calls) == 2
    assert ref.rel_err(np64(c), np64(odd).T @ np64(x)) < 1e-5
    assert ref.rel_err(np64(c2), np64(dy80).T @ np64(x80) + np64(bias)) < 1e-5


GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def few_tiles_long_k():
    """1024 x 1024 x 8192: few tiles of a long K, whose K stages the GEMM shares out over the
    idle multiprocessors (stream-K, with a workspace per stream); its fp64 product."""
    a = randn(1024, 8192, device="cuda", dtype=torch.bfloat16)
    b = randn(8192, 1024, device="cuda", dtype=torch.bfloat16)
    return a, b, np64(a) @ np64(b)


@GPU
def test_gemm_shares_k_out_on_the_current_and_a_side_stream():
    a, b, want = few_tiles_long_k()
    for out_dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 4e-3)):
        assert ref.rel_err(np64(ck_rs.gemm(a, b, out_dtype=out_dtype)), want) < tol
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            cs = [ck_rs.gemm(a, b, out_dtype=out_dtype) for _ in range(3)]
        side.synchronize()
        for c in cs:
            assert ref.rel_err(np64(c), want) < tol


@GPU
def test_a_first_backward_builds_tensor_maps_on_the_autograd_thread():
    """torch runs a backward on a worker thread of its own, which has no current CUDA context
    until something binds one: the weight gradient's TMA maps, built there first in a fresh
    process, must bind it (they failed with CUDA_ERROR_INVALID_CONTEXT)."""
    import subprocess
    import sys

    script = (
        "import torch, ck_rs\n"
        "x = torch.randn(256, 512, device='cuda', dtype=torch.bfloat16, requires_grad=True)\n"
        "w = torch.randn(128, 512, device='cuda', dtype=torch.bfloat16, requires_grad=True)\n"
        "dy = torch.randn(256, 128, device='cuda', dtype=torch.bfloat16)\n"
        "dx, dw = torch.autograd.grad(ck_rs.linear(x, w), (x, w), dy)\n"
        "err = lambda a, b: ((a.double() - b).norm() / b.norm()).item()\n"
        "print(err(dx, dy.double() @ w.double()), err(dw, dy.double().t() @ x.double()))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert all(float(e) < 1e-2 for e in run.stdout.split()), run.stdout


@GPU
def test_gemm_in_a_cuda_graph_replays_right():
    # A stream being captured gets no workspace (a graph may be replayed on any stream).
    a, b, want = few_tiles_long_k()
    ck_rs.gemm(a, b)  # the tensor maps, cached before the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = ck_rs.gemm(a, b)
    for _ in range(2):
        g.replay()
    torch.cuda.synchronize()
    assert ref.rel_err(np64(c), want) < 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_grouped_mm(device):
    # 257 rows per expert with rows on average: the TMA kernel; on the GPU at a size where
    # experts' rows end inside tiles and 16-row boxes.
    tokens, n, k = ([300, 0, 390, 1, 337], 264, 136) if device == "cuda" else ([257, 0, 255], 8, 8)
    a = randn(sum(tokens), k, device=device, dtype=torch.bfloat16)
    b = randn(len(tokens), k, n, device=device, dtype=torch.bfloat16)
    starts = np.cumsum([0] + tokens)
    want = np.concatenate([np64(a)[s:e] @ np64(b)[g] for g, (s, e) in enumerate(zip(starts, starts[1:]))])
    c = ck_rs.grouped_mm(a, b, tokens, out_dtype=torch.bfloat16)
    assert c.dtype == torch.bfloat16 and c.device == a.device and c.shape == (sum(tokens), n)
    assert ref.rel_err(np64(c), want) < 4e-3
    c = torch.ops.ck_rs.grouped_mm(a, b, tokens)
    assert c.dtype == torch.float32 and ref.rel_err(np64(c), want) < 1e-5
    # The experts' weights as nn.Linear keeps them, [experts, N, K], read in place.
    w = b.transpose(1, 2).contiguous()
    c = ck_rs.grouped_mm(a, w, tokens, b_layout="nk")
    assert c.shape == (sum(tokens), n) and ref.rel_err(np64(c), want) < 1e-5
    with pytest.raises(ValueError, match=r"^error\[shape-mismatch\]"):
        ck_rs.grouped_mm(a, w[:, :, :-8].contiguous(), tokens, b_layout="nk")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_attention(device, dtype, causal):
    q = randn(1, 4, 130, 128, device=device, dtype=dtype)
    k, v = randn(1, 2, 257, 128, device=device, dtype=dtype), randn(1, 2, 257, 128, device=device, dtype=dtype)
    o, lse = ck_rs.attention(q, k, v, causal=causal, return_lse=True)
    assert o.dtype == dtype and o.device == q.device and lse.dtype == torch.float32
    want, wlse = ref.attention(*(ref.bf16_round(np64(t).astype(np.float32)) for t in (q, k, v)), causal, 128**-0.5)
    assert ref.rel_err(np64(o), want) < 1e-2
    np.testing.assert_allclose(np64(lse), wlse, atol=1e-3)


def test_torch_and_numpy_do_not_mix():
    with pytest.raises(TypeError, match=r"^error\[kind-mismatch\]"):
        ck_rs.rmsnorm(torch.ones(2, 8), np.ones(8, np.float32))


GRAD_CALLS = {
    "gemm": lambda x, g: ck_rs.gemm(x, x.T),
    "attention_varlen": lambda x, g: ck_rs.attention_varlen(
        *[x.reshape(4, 1, 64)] * 3, *[torch.tensor([0, 4], dtype=torch.int32)] * 2, 4, 4
    ),
}


@pytest.mark.parametrize("op", GRAD_CALLS)
def test_an_input_that_requires_grad_is_an_error_not_a_lost_gradient(op):
    x = randn(4, 64).requires_grad_()
    rule = rf"^error\[no-backward\]: `\w+` requires grad but ck_rs\.{op} has no backward"
    with pytest.raises(ValueError, match=rule):
        GRAD_CALLS[op](x, torch.ones(64))


def test_requires_grad_inputs_are_read_under_no_grad():
    x = randn(4, 64).requires_grad_()
    with torch.no_grad():
        y = ck_rs.rmsnorm(x, torch.ones(64))
    assert not y.requires_grad
    assert ref.rel_err(np64(y), ref.rmsnorm(np64(x), np.ones(64), 1e-6)) < 1e-5


def test_a_custom_op_without_backward_keeps_the_graph_and_its_backward_is_an_error():
    x = randn(64, 64).requires_grad_()
    y = torch.ops.ck_rs.gemm(x, x)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match=r"^error\[no-backward\]: ck_rs::gemm has no backward"):
        y.sum().backward()


ROW_GRADS = {
    # name: (ck_rs call, the same function in torch; inputs (x, second, gamma, beta))
    "add_rmsnorm": (
        lambda x, r, g, b: ck_rs.add_rmsnorm(x, r, g),
        lambda x, r, g, b: (torch.nn.functional.rms_norm(x + r, (x.shape[-1],), g, 1e-6), x + r),
    ),
    "layernorm": (
        lambda x, r, g, b: ck_rs.layernorm(x, g, b),
        lambda x, r, g, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, 1e-5),
    ),
    "softmax": (lambda x, r, g, b: ck_rs.softmax(x), lambda x, r, g, b: torch.softmax(x, -1)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 1), (2, 3, 257), (9, 4099), (3, 9000)])
@pytest.mark.parametrize("op", ROW_GRADS)
def test_row_operator_gradients_match_torch_autograd_in_fp64(op, device, dtype, shape):
    """The gradients of every input (through each output) against torch's autograd of the same
    function in float64."""
    ours, theirs = ROW_GRADS[op]
    n = shape[-1]
    inputs = [randn(*shape), randn(*shape) * 0.5, randn(n) + 1.5, randn(n)]
    inputs = [t.to(device=device, dtype=dtype).requires_grad_() for t in inputs]
    wide = [t.detach().double().requires_grad_() for t in inputs]
    outs, want = ours(*inputs), theirs(*wide)
    outs, want = (outs, want) if isinstance(outs, tuple) else ((outs,), (want,))
    grads = [randn(*o.shape, device=device, dtype=dtype) for o in outs]
    torch.autograd.backward(outs, grads)
    torch.autograd.backward(want, [g.double() for g in grads])
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    for i, (got, ref64) in enumerate(zip(inputs, wide)):
        if ref64.grad is None:
            assert got.grad is None or not got.grad.any(), f"input {i}"
            continue
        assert got.grad is not None and got.grad.dtype == dtype, f"input {i}"
        err = grad_error(got.grad, ref64.grad, grads[0])
        assert err < tol, f"{op} input {i}: {err}"


def grad_error(got, want, upstream):
    """Norm-wise error of a gradient against float64, relative to itself or, where it cancels to
    much less (a row of one element normalises to a constant: its x gradient is 0 up to
    rounding of terms the upstream gradient's size), to the upstream gradient's size."""
    scale = max(want.norm().item(), upstream.double().norm().item())
    return (got.double() - want).norm().item() / scale


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 1), (2, 3, 257), (9, 4099), (3, 9000)])
def test_rmsnorm_gradients_match_torch_autograd_in_fp64(device, dtype, shape):
    """``ck_rs.rmsnorm`` (eager, and through the custom op) on tensors that require grad: the
    gradients of x and gamma against torch's autograd of the same function in float64."""
    x = randn(*shape, device=device, dtype=dtype).requires_grad_()
    g = (randn(shape[-1], device=device, dtype=dtype) + 1.5).requires_grad_()
    dy = randn(*shape, device=device, dtype=dtype)
    x64, g64 = (t.detach().double().requires_grad_() for t in (x, g))
    want = torch.nn.functional.rms_norm(x64, (shape[-1],), g64, 1e-6)
    want.backward(dy.double())
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    for call in (ck_rs.rmsnorm, torch.ops.ck_rs.rmsnorm):
        x.grad = g.grad = None
        y = call(x, g)
        assert y.requires_grad and y.dtype == dtype
        y.backward(dy)
        assert x.grad.dtype == dtype and g.grad.dtype == dtype
        for got, ref64 in ((x.grad, x64.grad), (g.grad, g64.grad)):
            assert grad_error(got, ref64, dy) < tol, f"{call}: {grad_error(got, ref64, dy)}"


def test_rmsnorm_with_out_cannot_record_a_gradient():
    x = randn(4, 64).requires_grad_()
    with pytest.raises(ValueError, match=r"^error\[no-backward\]: ck_rs\.rmsnorm\(\.\.\., out="):
        ck_rs.rmsnorm(x, torch.ones(64), out=torch.empty(4, 64))


def test_rmsnorm_double_backward_is_an_error():
    x = randn(4, 64).requires_grad_()
    (gx,) = torch.autograd.grad(torch.ops.ck_rs.rmsnorm(x, torch.ones(64)).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match=r"error\[no-double-backward\]"):
        gx.sum().backward()


def opcheck_cases():
    """An example call of every ``torch.ops.ck_rs`` operator (small: the emulator runs each
    several times)."""
    x, g, b = randn(4, 64), randn(64) + 1.5, randn(64)
    a16, w16 = randn(16, 32).bfloat16(), randn(24, 32).bfloat16()
    q, k = randn(1, 4, 8, 64).bfloat16(), randn(1, 2, 8, 64).bfloat16()
    qkv, cos = randn(1, 8, 8 * 16), randn(8, 8)
    ops = torch.ops.ck_rs
    return {
        "rmsnorm": (ops.rmsnorm, (x.clone().requires_grad_(), g.clone().requires_grad_(), 1e-6)),
        "add_rmsnorm": (ops.add_rmsnorm, (x, randn(4, 64), g, 1e-6)),
        "layernorm": (ops.layernorm, (x, g, b, 1e-5)),
        "softmax": (ops.softmax, (x,)),
        "gemm": (ops.gemm, (a16, w16.t().contiguous(), torch.bfloat16)),
        "linear": (ops.linear, (a16.clone().requires_grad_(), w16, None, None, "none", 1.0)),
        "gated_linear": (ops.gated_linear, (a16.clone().requires_grad_(), randn(32, 32).bfloat16(), "silu")),
        "rope_qkv": (ops.rope_qkv, (qkv.requires_grad_(), cos, randn(8, 8), 4, 2)),
        "rope_qkv_backward": (ops.rope_qkv_backward, (randn(1, 4, 8, 16), randn(1, 2, 8, 16), randn(1, 2, 8, 16), cos, randn(8, 8), 4, 2)),
        "grouped_mm": (ops.grouped_mm, (a16, randn(2, 32, 8).bfloat16(), [7, 9])),
        "attention": (ops.attention, (q, k, randn(1, 2, 8, 64).bfloat16(), True)),
        "rmsnorm_backward": (ops.rmsnorm_backward, (randn(4, 64), x, g, 1e-6)),
        "add_rmsnorm_backward": (ops.add_rmsnorm_backward, (randn(4, 64), randn(4, 64), x, g, 1e-6)),
        "swiglu": (ops.swiglu, (randn(3, 2, 2 * 24).requires_grad_(),)),
        "geglu_backward": (ops.geglu_backward, (randn(5, 24).bfloat16(), randn(5, 2 * 24).bfloat16())),
        "attention_grad": (ops.attention, (q.clone().requires_grad_(), k, randn(1, 2, 8, 64).bfloat16(), False)),
        "attention_backward": (ops.attention_backward, attention_backward_args(q, k)),
    }


def attention_backward_args(q, k):
    v, do = randn(1, 2, 8, 64).bfloat16(), randn(1, 4, 8, 64).bfloat16()
    o, lse = ck_rs.attention(q, k, v, return_lse=True)
    return (q, k, v, o, lse, do, True)


@pytest.mark.parametrize("name", list(opcheck_cases()))
def test_every_op_passes_torch_library_opcheck(name):
    """torch's own checks of a registered operator: the schema, the autograd registration, the
    fake implementation against the real one, and AOTAutograd's dispatch."""
    op, args = opcheck_cases()[name]
    results = torch.library.opcheck(op.default, args)
    assert all(r == "SUCCESS" for r in results.values()), results


def test_the_fast_path_leaves_modes_fake_tensors_and_autograd_to_the_dispatcher():
    """``torch.ops.ck_rs.*`` runs the eager function straight from its autograd kernel only for
    plain tensors with nothing waiting below autograd; a dispatch mode (what tracing installs),
    fake tensors and tensors that require grad each reach the registered op."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    x, g = randn(4, 64), randn(64) + 1.5
    want = ref.rmsnorm(np64(x), np64(g), 1e-6)

    with SeenOps() as seen:
        y = torch.ops.ck_rs.rmsnorm(x, g)
    assert seen.ops == [torch.ops.ck_rs.rmsnorm.default], seen.ops  # the op, not its insides
    assert ref.rel_err(np64(y), want) < 1e-5

    with FakeTensorMode() as mode:
        fake = torch.ops.ck_rs.rmsnorm(mode.from_tensor(x), mode.from_tensor(g))
    assert isinstance(fake, FakeTensor) and fake.shape == x.shape

    graph = str(make_fx(lambda x, g: torch.ops.ck_rs.rmsnorm(x, g))(x, g).graph)
    assert "ck_rs.rmsnorm.default" in graph, graph

    y = torch.ops.ck_rs.rmsnorm(x.clone().requires_grad_(), g)
    assert "ck_rs_rmsnormBackward" in y.grad_fn.name()
    assert ref.rel_err(np64(y), want) < 1e-5


def test_the_python_fast_path_leaves_modes_and_autograd_to_the_dispatcher():
    """An op whose kernels are Python (``softmax``): its autograd kernel calls the eager function
    itself for plain tensors (no redispatch), redispatches under a mode, and ``ck_rs.softmax`` on
    a tensor that requires grad records the formula without the dispatcher."""

    assert "softmax" not in ck_rs._torch_ops._CPP
    x = randn(4, 64)
    want = ref.softmax(np64(x))

    # Which route a call takes: the op's redispatches below autograd, recorded.
    op = ck_rs._torch_ops._OPS["softmax"]

    class Recorder:
        def __init__(self, overload):
            self.overload, self.calls = overload, 0

        def redispatch(self, *args):
            self.calls += 1
            return self.overload.redispatch(*args)

        def __call__(self, *args):
            self.calls += 1
            return self.overload(*args)

    rec = Recorder(op.overload)
    op.overload = rec
    try:
        y = torch.ops.ck_rs.softmax(x)  # plain tensors: the fast path
        assert rec.calls == 0 and y.grad_fn is None and ref.rel_err(np64(y), want) < 1e-5
        with SeenOps():
            torch.ops.ck_rs.softmax(x)  # a mode waits below autograd: the dispatcher
        assert rec.calls == 1
        # ck_rs.softmax on a tensor that requires grad: the op's formula recorded without the
        # dispatcher where nothing traces, through the op under a mode; its backward's op
        # likewise.
        xg = x.clone().requires_grad_()
        y = ck_rs.softmax(xg)
        assert rec.calls == 1 and type(y.grad_fn).__name__ == "ck_rs_softmaxBackward"
        with SeenOps() as seen:
            ck_rs.softmax(xg).sum().backward()
        assert rec.calls == 3  # the op, then its autograd kernel's redispatch below autograd
        assert seen.ops[0] == torch.ops.ck_rs.softmax.default, seen.ops
        assert torch.ops.ck_rs.softmax_backward.default in seen.ops, seen.ops
    finally:
        op.overload = rec.overload


def test_layernorm_custom_op_returns_the_statistics():
    x, g, b = randn(4, 64), torch.ones(64), torch.zeros(64)
    y, mean, rstd = torch.ops.ck_rs.layernorm(x, g, b, 1e-5)
    want_y, want_mean, want_rstd = ref.layernorm(np64(x), np.ones(64), np.zeros(64), 1e-5)
    assert ref.rel_err(np64(mean), want_mean) < 1e-6 and ref.rel_err(np64(rstd), want_rstd) < 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_a_training_step_compiles_with_the_ops_in_the_graph(device):
    """A forward compiled with fullgraph=True (no graph break around the custom op) and its
    backward through AOTAutograd's joint graph, where the op's autograd formula puts
    ``rmsnorm_backward``: the loss and the gradients are eager's."""
    x = randn(8, 256, device=device).requires_grad_()
    g = randn(256, device=device).requires_grad_()

    def loss(x, g):
        y = torch.ops.ck_rs.rmsnorm(x, g, 1e-6)
        return (y * y).sum()

    loss(x, g).backward()
    eager = (x.grad.clone(), g.grad.clone())
    x.grad = g.grad = None
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def record(gm, example_inputs):  # the forward's and the backward's graphs, as text
        graphs.append(str(gm.graph))
        return make_boxed_func(gm.forward)

    compiled = torch.compile(loss, fullgraph=True, backend=aot_autograd(fw_compiler=record, bw_compiler=record))
    compiled(x, g).backward()
    torch.testing.assert_close((x.grad, g.grad), eager)
    assert "ck_rs.rmsnorm.default" in graphs[0], graphs[0]
    assert any("ck_rs.rmsnorm_backward.default" in g for g in graphs[1:]), graphs


@pytest.mark.parametrize("device", DEVICES)
def test_custom_ops_compile_without_graph_breaks(device):
    def block(x, res, g):
        y, r = torch.ops.ck_rs.add_rmsnorm(x, res, g)
        return torch.ops.ck_rs.softmax(y * 2.0) + r

    x, res, g = randn(8, 256, device=device), randn(8, 256, device=device), randn(256, device=device)
    eager = block(x, res, g)
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")(x, res, g)
    torch.testing.assert_close(compiled, eager)


@pytest.mark.parametrize("device", DEVICES)
def test_ops_from_descriptions_take_optional_tensors_and_choices(device):
    """The generic ops: an optional tensor is `Tensor? = None` in the schema, a choice a `str`
    by name; both compile without a graph break (the fake allocates the call's element type)."""
    a_km = randn(40, 16, device=device, dtype=torch.bfloat16)  # a as [K, M]
    b = randn(40, 24, device=device, dtype=torch.bfloat16)
    r = randn(16, 24, device=device)
    want = np64(a_km).T @ np64(b)
    c = torch.ops.ck_rs.gemm_a_km(a_km, b)
    assert c.dtype == torch.float32 and ref.rel_err(np64(c), want) < 1e-5
    c = torch.ops.ck_rs.gemm_a_km(a_km, b, r, beta=-1.0)
    assert ref.rel_err(np64(c), want - np64(r)) < 1e-5
    step = torch.compile(lambda a, b, r: torch.ops.ck_rs.gemm_a_km(a, b, r) * 2.0, fullgraph=True, backend="aot_eager")
    assert ref.rel_err(np64(step(a_km, b, r)), 2.0 * (want + np64(r))) < 1e-5
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is None:
        return
    x, w = torch.round(randn(3, 32) * 4), torch.round(randn(8, 32) * 4)  # exact in e4m3
    y = torch.ops.ck_rs.linear_fp8(x.to(device, fp8), w.to(device, fp8), alpha=0.0625, activation="relu")
    assert y.dtype == torch.bfloat16  # the operator's first type, no tensor of the call's type given
    assert ref.rel_err(np64(y), np.maximum(np64(x) @ np64(w).T * 0.0625, 0)) < 1e-2
    with pytest.raises(ValueError, match=r"error\[unknown-argument\]: activation 'tanh'"):
        torch.ops.ck_rs.linear_fp8(x.to(device, fp8), w.to(device, fp8), activation="tanh")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_calls_are_ordered_on_a_side_stream():
    s = torch.cuda.Stream()
    x, g = randn(4096, 4096, device="cuda"), randn(4096, device="cuda")
    with torch.cuda.stream(s):
        x2 = x * 3.0  # queued on s, not yet done when the kernel is queued behind it
        y = ck_rs.rmsnorm(x2, g)
        z = y + 1.0
    s.synchronize()
    want = ref.rmsnorm(np64(x) * 3.0, np64(g), 1e-6) + 1.0
    assert ref.rel_err(np64(z), want) < 1e-5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_misaligned_tensor_is_an_error():
    x = torch.ones(2 * 8 + 1, device="cuda")[1:].view(2, 8)  # 4 bytes into its allocation
    with pytest.raises(ValueError, match=r"^error\[misaligned-buffer\]"):
        ck_rs.rmsnorm(x, torch.ones(8, device="cuda"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cpu_and_cuda_tensors_do_not_mix():
    with pytest.raises(ValueError, match=r"^error\[device-mismatch\]"):
        ck_rs.rmsnorm(torch.ones(2, 8, device="cuda"), torch.ones(8))
    with pytest.raises(ValueError, match=r"^error\[device-mismatch\]"):
        ck_rs.gemm(torch.ones(2, 8), torch.ones(8, 8, device="cuda"))


def test_cpu_and_meta_tensors_do_not_mix():
    # Neither is a CUDA tensor (both have device index -1): the devices themselves differ.
    with pytest.raises(ValueError, match=r"^error\[device-mismatch\]"):
        ck_rs.rmsnorm(torch.ones(2, 8), torch.ones(8, device="meta"))


@pytest.mark.parametrize("device", DEVICES)
def test_gemm_bf16_result_with_bias_and_gelu(device):
    a, b = randn(130, 72, device=device, dtype=torch.bfloat16), randn(72, 136, device=device, dtype=torch.bfloat16)
    bias = randn(136, device=device)
    c = ck_rs.gemm(a, b, bias=bias, activation="gelu", out_dtype=torch.bfloat16)
    assert c.dtype == torch.bfloat16 and c.device == a.device
    x = np64(a) @ np64(b) + np64(bias.to(torch.bfloat16))
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    assert ref.rel_err(np64(c), want) < 4e-3


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m,n,k", [(5, 37, 23), (2 * 67, 264, 136)])
def test_linear_matches_f_linear_and_keeps_the_gradients(device, m, n, k):
    # nn.Linear's weight as it is; bf16 in, bf16 out; gradients of x, weight, bias, residual
    # against fp64 autograd of the same bf16 values.
    dtype = torch.bfloat16
    x = randn(m, k, device=device, dtype=dtype).reshape(2, m // 2, k) if m % 2 == 0 else randn(m, k, device=device, dtype=dtype)
    w, bias = randn(n, k, device=device, dtype=dtype), randn(n, device=device, dtype=dtype)
    res = randn(*x.shape[:-1], n, device=device, dtype=dtype)
    with torch.no_grad():
        y = ck_rs.linear(x, w, bias, res, activation="silu")
    assert y.dtype == dtype and y.shape == (*x.shape[:-1], n)
    z = torch.nn.functional.linear(x.double(), w.double(), bias.double()) + res.double()
    assert ref.rel_err(np64(y), np64(torch.nn.functional.silu(z))) < 1e-2
    leaves = [t.detach().clone().requires_grad_() for t in (x, w, bias, res)]
    y = ck_rs.linear(*leaves, beta=0.5)
    assert y.grad_fn is not None
    dy = randn(*y.shape, device=device, dtype=dtype)
    y.backward(dy)
    want = [t.detach().double().requires_grad_() for t in (x, w, bias, res)]
    (torch.nn.functional.linear(want[0], want[1], want[2]) + 0.5 * want[3]).backward(dy.double())
    for got, exp in zip(leaves, want):
        assert ref.rel_err(np64(got.grad), np64(exp.grad)) < 2e-2


@pytest.mark.parametrize("device", DEVICES)
def test_linear_with_an_activation_refuses_its_backward(device):
    x = randn(4, 16, device=device, dtype=torch.bfloat16).requires_grad_()
    w = randn(8, 16, device=device, dtype=torch.bfloat16)
    y = ck_rs.linear(x, w, activation="gelu")
    with pytest.raises(RuntimeError, match=r"error\[no-backward\]"):
        y.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_linear_on_float8_operands_with_per_tensor_scales(device):
    """e4m3 ``x`` and ``weight`` (nn.Linear's layout) with their scales: the product of the
    dequantised operands in fp64, plus the epilogue; bfloat16 by default, float32 asked for."""
    fp8 = torch.float8_e4m3fn
    x, w, d = randn(33, 64, device=device), randn(24, 64, device=device), randn(33, 24, device=device)
    xs, ws = x.abs().max().item() / 448, w.abs().max().item() / 448
    x8, w8 = (x / xs).to(fp8), (w / ws).to(fp8)
    want = (np64(x8) * xs) @ (np64(w8) * ws).T
    y = ck_rs.linear(x8, w8, residual=d.bfloat16(), x_scale=xs, weight_scale=ws)
    assert y.dtype == torch.bfloat16 and y.shape == (33, 24)
    assert ref.rel_err(np64(y), want + np64(d.bfloat16())) < 1e-2
    y32 = ck_rs.linear(x8, w8, x_scale=xs, weight_scale=ws, out_dtype=torch.float32)
    assert y32.dtype == torch.float32 and ref.rel_err(np64(y32), want) < 1e-3
    with pytest.raises(TypeError, match=r"error\[dtype-mismatch\]"):
        ck_rs.linear(x8, w.bfloat16())
    with pytest.raises(ValueError, match=r"error\[bad-scale\]"):
        ck_rs.linear(x8, w8, x_scale=-1.0)
    with pytest.raises(ValueError, match=r"error\[bad-scale\]"):
        ck_rs.linear(x.bfloat16(), w.bfloat16(), x_scale=2.0)
    with pytest.raises(ValueError, match=r"error\[shape-unsupported\]: the fp8 GEMM .*\(pad"):
        ck_rs.linear(x8, w8[:20])  # N = 20: not a whole 16-byte row of C
    with pytest.raises(ValueError, match=r"error\[no-backward\]"):
        ck_rs.linear(x8.float().requires_grad_().to(fp8), w8)
    # The native call reads the operands' bytes (what ck_rs passes) or, where torch exports
    # them, float8 capsules (DLPack 1.1), and nothing else as e4m3.
    from torch.utils.dlpack import to_dlpack

    stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else None
    c = torch.empty(33, 24, device=device)
    try:
        operands = (to_dlpack(x8), to_dlpack(w8))
    except (RuntimeError, BufferError):  # this torch cannot export float8
        operands = None
    scalars = [xs * ws, 1.0, 0]  # alpha, beta, activation none
    if operands is not None:
        ck_rs._native.call("linear_fp8", [*operands, None, None, to_dlpack(c)], scalars, stream)
        assert ref.rel_err(np64(c), want) < 1e-3
    with pytest.raises(TypeError, match=r"error\[dtype-mismatch\]: `x` is bfloat16"):
        bf16_x = [to_dlpack(x.bfloat16()), to_dlpack(w8.view(torch.uint8)), None, None, to_dlpack(c)]
        ck_rs._native.call("linear_fp8", bf16_x, scalars, stream)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_compiles_with_fullgraph_forward_and_backward(device):
    x = randn(2, 8, 64, device=device, dtype=torch.bfloat16).requires_grad_()
    w = randn(32, 64, device=device, dtype=torch.bfloat16).requires_grad_()

    def loss(x, w):
        return torch.ops.ck_rs.linear(x, w).float().square().sum()

    loss(x, w).backward()
    eager = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    torch.compile(loss, fullgraph=True, backend="aot_eager")(x, w).backward()
    torch.testing.assert_close((x.grad, w.grad), eager)


@pytest.mark.parametrize("device", DEVICES)
def test_attention_compiles_with_fullgraph_forward_and_backward(device):
    """``torch.compile(fullgraph=True)`` of attention's forward and backward keeps both ck_rs
    ops in AOTAutograd's graphs (the forward's and the backward's), with eager's gradients."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def keep(gm, _):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    q, k, v, _ = attention_inputs(1, 4, 2, 70, 130, 64, device)
    leaves = [t.requires_grad_() for t in (q, k, v)]

    def loss(q, k, v):
        return torch.ops.ck_rs.attention(q, k, v, True)[0].float().square().sum()

    loss(*leaves).backward()
    eager = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    backend = aot_autograd(fw_compiler=keep, bw_compiler=keep)
    torch.compile(loss, fullgraph=True, backend=backend)(*leaves).backward()
    torch.testing.assert_close([t.grad for t in leaves], eager)
    forward, backward = (g.code for g in graphs)
    assert "ck_rs.attention.default" in forward, forward
    assert "ck_rs.attention_backward.default" in backward, backward


@pytest.mark.parametrize("device", DEVICES)
def test_gated_linear_matches_torch_swiglu(device):
    m, f, k = 130, 264, 136
    x = randn(m, k, device=device, dtype=torch.bfloat16)
    wg, wu = randn(f, k, device=device, dtype=torch.bfloat16), randn(f, k, device=device, dtype=torch.bfloat16)
    y = ck_rs.gated_linear(x, torch.cat([wg, wu]))
    assert y.dtype == torch.bfloat16 and y.shape == (m, f)
    xd = x.double()
    want = torch.nn.functional.silu(xd @ wg.double().T) * (xd @ wu.double().T)
    assert ref.rel_err(np64(y), np64(want)) < 1e-2
    compiled = torch.compile(lambda x, w: torch.ops.ck_rs.gated_linear(x, w), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, torch.cat([wg, wu])), y)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_gated_linear_gradients_match_torch_autograd_in_fp64(device, activation):
    """SwiGLU and GeGLU (tanh form): the gradients of x (any leading dims) and of the stacked
    weight against torch's autograd of the same function in float64 (on the bfloat16 values),
    eager and through the op."""
    b, s, f, k = 2, 65, 136, 72
    x = randn(b, s, k, device=device, dtype=torch.bfloat16).requires_grad_()
    w = (randn(2 * f, k, device=device, dtype=torch.bfloat16) * 0.2).requires_grad_()
    dy = randn(b, s, f, device=device, dtype=torch.bfloat16)
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    h = x64 @ w64.T
    act = torch.nn.functional.silu if activation == "silu" else (
        lambda g: torch.nn.functional.gelu(g, approximate="tanh")
    )
    (act(h[..., :f]) * h[..., f:]).backward(dy.double())
    for call in (ck_rs.gated_linear, torch.ops.ck_rs.gated_linear):
        x.grad = w.grad = None
        y = call(x, w, activation=activation)
        assert y.requires_grad
        y.backward(dy)
        assert x.grad.dtype == torch.bfloat16 and w.grad.shape == (2 * f, k)
        for got, want in ((x.grad, x64.grad), (w.grad, w64.grad)):
            assert grad_error(got, want, dy) < 2e-2, f"{call} {activation}: {grad_error(got, want, dy)}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_swiglu_and_geglu_and_their_gradients_match_torch_in_fp64(device, activation):
    """The gated unit's elementwise half on the stacked products ``[..., 2F]`` (F odd: element
    accesses), float32 and bfloat16, and the gradient of ``gu`` through autograd."""
    f = 37
    gu64 = randn(3, 5, 2 * f, device=device, dtype=torch.float64) * 3
    act = torch.nn.functional.silu if activation == "silu" else (
        lambda g: torch.nn.functional.gelu(g, approximate="tanh")
    )
    call = ck_rs.swiglu if activation == "silu" else ck_rs.geglu
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 1e-2)):
        gu = gu64.to(dtype).requires_grad_()
        want64 = gu.detach().double().requires_grad_()
        want = act(want64[..., :f]) * want64[..., f:]
        y = call(gu)
        assert y.dtype == dtype and y.shape == (3, 5, f) and y.grad_fn is not None
        assert ref.rel_err(np64(y), np64(want)) < tol
        dy = randn(3, 5, f, device=device, dtype=torch.float64).to(dtype)
        y.backward(dy)
        want.backward(dy.double())
        assert ref.rel_err(np64(gu.grad), np64(want64.grad)) < tol


@pytest.mark.parametrize("device", DEVICES)
def test_gated_linear_that_records_a_gradient_keeps_its_products(device):
    """``ck_rs.gated_linear`` on tensors that require grad runs ``linear`` (writing ``[g, u]``)
    and ``swiglu``, whose backward reads the products instead of recomputing them."""
    x = randn(9, 64, device=device, dtype=torch.bfloat16).requires_grad_()
    w = (randn(2 * 40, 64, device=device, dtype=torch.bfloat16) * 0.2).requires_grad_()
    y = ck_rs.gated_linear(x, w)
    assert "swiglu" in type(y.grad_fn).__name__, y.grad_fn
    with torch.no_grad():
        torch.testing.assert_close(y, ck_rs.gated_linear(x, w), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_qkv_gradient_matches_torch_autograd_in_fp64(device, interleaved):
    """The gradient of qkv through q, k and v (a rotary_dim below D, one angle table row per
    token) against torch's autograd of the rotation in float64; tables that require grad are an
    error at backward()."""
    b, s, heads, kv_heads, d, r = 2, 33, 4, 2, 64, 32
    qkv = randn(b, s, (heads + 2 * kv_heads) * d, device=device).requires_grad_()
    angles = randn(b * s, r // 2, device=device)
    cos, sin = angles.cos(), angles.sin()
    q, k, v = ck_rs.rope_qkv(qkv, cos, sin, heads, kv_heads, rotary_dim=r, interleaved=interleaved)
    grads = [randn(*t.shape, device=device) for t in (q, k, v)]
    torch.autograd.backward((q, k, v), grads)

    x = qkv.detach().double().requires_grad_()
    t = x.view(b, s, heads + 2 * kv_heads, d)
    c, sn = cos.double().view(b, s, 1, r // 2), sin.double().view(b, s, 1, r // 2)
    rot, rest = t[..., :r], t[..., r:]
    x1, x2 = (rot[..., 0::2], rot[..., 1::2]) if interleaved else (rot[..., : r // 2], rot[..., r // 2 :])
    y1, y2 = x1 * c - x2 * sn, x2 * c + x1 * sn
    y = torch.stack([y1, y2], -1).flatten(-2) if interleaved else torch.cat([y1, y2], -1)
    t2 = torch.cat([y, rest], -1)
    want = [t2[:, :, :heads], t2[:, :, heads : heads + kv_heads], t[:, :, heads + kv_heads :]]
    torch.autograd.backward([w.transpose(1, 2) for w in want], [g.double() for g in grads])
    assert grad_error(qkv.grad, x.grad, grads[0]) < 1e-5

    q, k, v = ck_rs.rope_qkv(qkv, cos.requires_grad_(), sin, heads, kv_heads, rotary_dim=r)
    with pytest.raises(RuntimeError, match=r"^error\[no-backward\]: ck_rs::rope_qkv gives no gradient for cos"):
        q.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_the_llama_example_layer_is_as_close_to_float32_as_torch(device):
    """ck_rs.llama (examples/llama's layer): two small decoder layers on ck_rs ops against the
    float32 reference, no further from it than the same layers in torch bfloat16 (with a margin
    for the small size's noise)."""
    from ck_rs import llama

    ours, theirs = llama.errors(llama.Config.small(), 2, 24, device, layers=2)
    assert ours <= 1.5 * theirs, (ours, theirs)


@pytest.mark.parametrize("device", DEVICES)
def test_the_llama_example_fp8_layer_errs_as_fp8_quantisation_does(device):
    """ck_rs.llama's layer with fp8 projections against the float32 reference: its error is
    that of per-tensor e4m3 quantisation, as a float32 simulation written here (each
    projection's input and weight rounded to e4m3 at its amax / 448 scale) measures it."""
    from ck_rs import llama

    cfg, seq = llama.Config.small(), 24
    w = llama.weights(cfg, device)
    x = torch.randn(2, seq, cfg.hidden, generator=torch.Generator().manual_seed(7)).to(device, torch.bfloat16)
    wf = {k: t.float() for k, t in w.items()}
    cos, sin = llama.rope_tables(cfg, seq, device, torch.float32)
    want = llama.torch_layer(x.float(), wf, cfg, cos, sin)

    def e4m3(t):
        scale = t.abs().max().item() / 448
        return (t / scale).clamp(-448, 448).to(torch.float8_e4m3fn).float() * scale

    def quantised_layer(x):
        b, s = x.shape[:2]
        lin = lambda t, weight: torch.nn.functional.linear(e4m3(t), e4m3(weight))
        h = torch.nn.functional.rms_norm(x, (cfg.hidden,), wf["norm1"], cfg.eps)
        qkv = lin(h, torch.cat([wf["q"], wf["k"], wf["v"]])).view(b, s, -1, cfg.head_dim)
        q, k, v = qkv.split([cfg.heads, cfg.kv_heads, cfg.kv_heads], 2)
        q, k = llama.rope(q, cos, sin), llama.rope(k, cos, sin)
        o = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True
        )
        x = x + lin(o.transpose(1, 2).reshape(b, s, -1), wf["o"])
        z = torch.nn.functional.rms_norm(x, (cfg.hidden,), wf["norm2"], cfg.eps)
        g, u = lin(z, torch.cat([wf["gate"], wf["up"]])).chunk(2, -1)
        return x + lin(torch.nn.functional.silu(g) * u, wf["down"])

    with torch.no_grad():
        ours = llama.ck_layer_fp8(x, llama.fp8_weights(llama.stacked(w)), cfg, *llama.pair_tables(cfg, seq, device))
        simulated = quantised_layer(x.float())
    err = lambda y: ((y.float() - want).norm() / want.norm()).item()
    assert 0.5 * err(simulated) <= err(ours) <= 1.25 * err(simulated), (err(ours), err(simulated))


@pytest.mark.parametrize("device", DEVICES)
def test_rope_qkv_and_seq_first_attention_match_torch(device):
    b, s, heads, kv_heads, d = 2, 130, 4, 2, 128
    qkv = randn(b, s, (heads + 2 * kv_heads) * d, device=device, dtype=torch.bfloat16)
    inv = 500000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.outer(torch.arange(s, dtype=torch.float64), inv)
    cos, sin = angles.cos().float().to(device), angles.sin().float().to(device)
    q, k, v = ck_rs.rope_qkv(qkv, cos, sin, heads, kv_heads)
    x = qkv.double().view(b, s, heads + 2 * kv_heads, d)
    c2, s2 = torch.cat([cos, cos], -1).double()[:, None], torch.cat([sin, sin], -1).double()[:, None]
    rot = lambda t: t * c2 + torch.cat([-t[..., d // 2 :], t[..., : d // 2]], -1) * s2
    want_q, want_k = rot(x[:, :, :heads]).transpose(1, 2), rot(x[:, :, heads : heads + kv_heads]).transpose(1, 2)
    assert ref.rel_err(np64(q), np64(want_q)) < 1e-2 and ref.rel_err(np64(k), np64(want_k)) < 1e-2
    assert torch.equal(v, qkv.view(b, s, -1, d)[:, :, heads + kv_heads :].transpose(1, 2))
    o_first = ck_rs.attention(q, k, v, causal=True)
    o_seq = ck_rs.attention(q, k, v, causal=True, out_layout="bshd")
    assert o_seq.shape == (b, s, heads, d) and torch.equal(o_seq, o_first.transpose(1, 2))


def rotate64(t, cos, sin, rotary_dim, interleaved):
    """``t`` ``[B, S, heads, D]`` (float64) rotated by the definition: pairs of its first
    ``rotary_dim`` elements (halves, or neighbours) at the angles of ``cos``/``sin`` ``[S,
    rotary_dim / 2]``."""
    r = rotary_dim
    c, sn = cos.double()[:, None], sin.double()[:, None]
    rot, rest = t[..., :r], t[..., r:]
    x1, x2 = (rot[..., 0::2], rot[..., 1::2]) if interleaved else (rot[..., : r // 2], rot[..., r // 2 :])
    y1, y2 = x1 * c - x2 * sn, x2 * c + x1 * sn
    y = torch.stack([y1, y2], -1).flatten(-2) if interleaved else torch.cat([y1, y2], -1)
    return torch.cat([y, rest], -1)


def projection_inputs(b, s, k, heads, kv_heads, d, r, device):
    x = randn(b, s, k, device=device, dtype=torch.bfloat16)
    w = (randn((heads + 2 * kv_heads) * d, k, device=device) / k**0.5).to(torch.bfloat16)
    angles = torch.outer(torch.arange(3, 3 + s, dtype=torch.float64), 0.9 ** torch.arange(r // 2))
    return x, w, angles.cos().float().to(device), angles.sin().float().to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("interleaved,d,r", [(False, 128, 128), (False, 128, 64), (True, 64, 48)])
def test_qkv_projection_rotates_q_and_k_in_its_epilogue(device, interleaved, d, r):
    """The projection with RoPE in its epilogue against x·Wᵀ and the rotation in float64
    (positions from 3, GQA, a rotary dim below D), and attention_qkv on its output against
    attention on the same Q, K, V copied out: the same bits."""
    b, s, k, heads, kv_heads = 2, 130, 64, 4, 2
    x, w, cos, sin = projection_inputs(b, s, k, heads, kv_heads, d, r, device)
    qkv = ck_rs.qkv_projection(x, w, cos, sin, heads, kv_heads, rotary_dim=r, interleaved=interleaved)
    assert qkv.shape == (b, s, (heads + 2 * kv_heads) * d) and qkv.dtype == torch.bfloat16
    t = (x.double() @ w.double().t()).view(b, s, heads + 2 * kv_heads, d)
    qk = rotate64(t[:, :, : heads + kv_heads], cos, sin, r, interleaved)
    want = torch.cat([qk, t[:, :, heads + kv_heads :]], 2).reshape(qkv.shape)
    assert ref.rel_err(np64(qkv), np64(want)) < 1e-2

    o, lse = ck_rs.attention_qkv(qkv, heads, kv_heads, causal=True, return_lse=True)
    heads4 = qkv.view(b, s, -1, d).transpose(1, 2)
    q, kk, v = (heads4[:, a:z].contiguous() for a, z in ((0, 4), (4, 6), (6, 8)))
    o2, lse2 = ck_rs.attention(q, kk, v, causal=True, return_lse=True, out_layout="bshd")
    assert o.shape == (b, s, heads, d) and torch.equal(o, o2) and torch.equal(lse, lse2)


@pytest.mark.parametrize("device", DEVICES)
def test_qkv_projection_and_attention_qkv_gradients_match_torch_autograd(device):
    """x's and W's gradients through attention_qkv(qkv_projection(x, W)) against torch's
    autograd of the definition in float64."""
    b, s, k, heads, kv_heads, d = 1, 40, 64, 2, 1, 64
    x, w, cos, sin = projection_inputs(b, s, k, heads, kv_heads, d, d, device)
    x, w = x.requires_grad_(), w.requires_grad_()
    o = ck_rs.attention_qkv(ck_rs.qkv_projection(x, w, cos, sin, heads, kv_heads), heads, kv_heads, causal=True)
    do = randn(*o.shape, device=device, dtype=torch.bfloat16)
    o.backward(do)

    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    t = (x64 @ w64.t()).view(b, s, heads + 2 * kv_heads, d)
    q, kk = rotate64(t[:, :, :heads], cos, sin, d, False), rotate64(t[:, :, heads : heads + 1], cos, sin, d, False)
    o64 = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), kk.transpose(1, 2), t[:, :, heads + 1 :].transpose(1, 2), is_causal=True, enable_gqa=True
    ).transpose(1, 2)
    o64.backward(do.double())
    assert grad_error(x.grad, x64.grad, do) < 2e-2
    assert grad_error(w.grad, w64.grad, do) < 2e-2


def test_qkv_projection_refuses_what_its_epilogue_cannot_rotate():
    x, w, cos, sin = projection_inputs(1, 4, 64, 2, 1, 64, 32, "cpu")
    with pytest.raises(ValueError, match=r"^error\[shape-unsupported\].*use rope_qkv"):
        ck_rs.qkv_projection(x, w, cos, sin, 2, 1, rotary_dim=32)
    with pytest.raises(ValueError, match=r"^error\[shape-mismatch\].*at least one head of each"):
        ck_rs.qkv_projection(x, w, cos, sin, 4, 0)
    with pytest.raises(ValueError, match=r"^error\[shape-mismatch\]"):
        ck_rs.attention_qkv(torch.zeros(1, 4, 4 * 64 + 1, dtype=torch.bfloat16), 2, 1)
    with pytest.raises(ValueError, match=r"^error\[head-dim-unsupported\]"):
        ck_rs.attention_qkv(torch.zeros(1, 4, 4 * 80, dtype=torch.bfloat16), 2, 1)


@pytest.mark.parametrize("device", DEVICES)
def test_the_llama_example_layer_compiles_with_fullgraph(device):
    """ck_rs.llama's layer on the torch.ops.ck_rs custom ops, compiled with fullgraph=True
    (no graph break around any op), gives the eager functions' result."""
    from ck_rs import llama

    cfg, seq = llama.Config.small(), 24
    w = llama.stacked(llama.weights(cfg, device))
    x = torch.randn(2, seq, cfg.hidden, generator=torch.Generator().manual_seed(3)).to(device, torch.bfloat16)
    pairs = llama.pair_tables(cfg, seq, device)
    with torch.no_grad():
        eager = llama.ck_layer(x, w, cfg, *pairs)
        compiled = torch.compile(llama.ck_layer_ops, fullgraph=True, backend="aot_eager")(x, w, cfg, *pairs)
    torch.testing.assert_close(compiled, eager)


def attention_inputs(b, h, hkv, sq, sk, d, device):
    """q, k, v and the output's gradient: bfloat16, each from its own seed (randn's seed is
    the shape's, and q = k would peak every row's softmax on its own key)."""
    shapes = [(b, h, sq, d), (b, hkv, sk, d), (b, hkv, sk, d), (b, h, sq, d)]
    return [
        torch.randn(*s, generator=torch.Generator().manual_seed(i)).to(device, torch.bfloat16)
        for i, s in enumerate(shapes)
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_attention_backward_reads_o_and_dout_in_the_forwards_layout(device):
    """O and dO as ``[batch, seq, heads, D]`` (``out_layout="bshd"``, read in place) give the
    gradients of the same O and dO as ``[batch, heads, seq, D]``, bit for bit in the
    deterministic mode."""
    q, k, v, do = attention_inputs(2, 4, 2, 70, 150, 64, device)
    o, lse = ck_rs.attention(q, k, v, causal=True, return_lse=True)
    want = ck_rs.attention_backward(q, k, v, o, lse, do, causal=True, deterministic=True)
    seq_first = lambda t: t.transpose(1, 2).contiguous()
    got = ck_rs.attention_backward(
        q, k, v, seq_first(o), lse, seq_first(do), causal=True, deterministic=True, out_layout="bshd"
    )
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    with pytest.raises(ValueError, match=r"error\[shape-mismatch\]"):
        ck_rs.attention_backward(q, k, v, o, lse, do, causal=True, out_layout="bshd")


def attention_f64(q, k, v, causal, scale=None):
    """Attention in float64 torch ops (grouped heads expanded, the causal mask aligned to the
    bottom-right corner): the function whose autograd is the reference."""
    q, k, v = (t.double() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(-1, -2) * (scale or q.shape[-1] ** -0.5)
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        i = torch.arange(sq).unsqueeze(1)
        seen = torch.arange(sk).unsqueeze(0) <= i + sk - sq
        s = s.masked_fill(~seen.to(s.device), float("-inf"))
    return torch.softmax(s, -1) @ v


ATTENTION_GRAD_SHAPES = {
    # device: [(batch, heads, kv_heads, sq, sk, head_dim)]
    "cpu": [(1, 4, 2, 70, 130, 64), (2, 2, 2, 64, 64, 128)],
    "cuda": [(2, 8, 2, 300, 513, 128), (1, 4, 4, 1024, 1024, 64)],
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", [0, 1])
def test_attention_gradients_match_torch_autograd_in_fp64(device, causal, case):
    """dq, dk, dv of ``ck_rs.attention`` (through ``attention_backward``) against torch's
    autograd of the same attention in float64, on the same bfloat16 inputs; grouped heads,
    Sq ≠ Sk under the bottom-right causal mask."""
    q, k, v, g = attention_inputs(*ATTENTION_GRAD_SHAPES[device][case], device)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = ck_rs.attention(*leaves, causal=causal)
    assert o.requires_grad
    (o.float() * g.float()).sum().backward()
    want = [t.clone().requires_grad_() for t in (q, k, v)]
    (attention_f64(*want, causal) * g.double()).sum().backward()
    for name, got, w in zip("qkv", leaves, want):
        assert got.grad.dtype == torch.bfloat16, name
        assert ref.rel_err(np64(got.grad), np64(w.grad)) < 2e-2, name


@pytest.mark.parametrize("device", DEVICES)
def test_attention_backward_is_deterministic_under_torch_deterministic_algorithms(device):
    """Under ``torch.use_deterministic_algorithms(True)`` the gradients are the same bits on
    every run (dQ's partial sums added in one order); ``attention_backward`` takes the mode as
    an argument."""
    q, k, v, g = attention_inputs(*ATTENTION_GRAD_SHAPES[device][0], device)

    def grads():
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        ck_rs.attention(*leaves, causal=True).backward(g)
        return [t.grad for t in leaves]

    torch.use_deterministic_algorithms(True)
    try:
        first, second = grads(), grads()
    finally:
        torch.use_deterministic_algorithms(False)
    for a, b_ in zip(first, second):
        assert torch.equal(a, b_)
    o, lse = ck_rs.attention(q, k, v, causal=True, return_lse=True)
    explicit = ck_rs.attention_backward(q, k, v, o, lse, g, causal=True, deterministic=True)
    for a, b_ in zip(first, explicit):
        assert torch.equal(a, b_)


def test_attention_backward_bad_inputs_are_errors():
    """A non-contiguous dO, a saved tensor of another shape, an LSE of another type: each an
    ``error[rule]``, never a crash; the backward of the backward is an error too."""
    q, k, v = randn(1, 2, 64, 64), randn(1, 1, 64, 64), randn(1, 1, 64, 64)
    o, lse = ck_rs.attention(q, k, v, return_lse=True)
    g = randn(1, 64, 2, 64)
    with pytest.raises(ValueError, match=r"^error\[\S+\]: `dout`.*contiguous"):
        ck_rs.attention_backward(q, k, v, o, lse, g.transpose(1, 2))
    with pytest.raises(ValueError, match=r"^error\[shape-mismatch\]: `o`"):
        ck_rs.attention_backward(q, k, v, o[:, :1], lse, g.transpose(1, 2).contiguous())
    with pytest.raises(TypeError, match=r"^error\[dtype-mismatch\]: `lse`"):
        ck_rs.attention_backward(q, k, v, o, lse.bfloat16(), g.transpose(1, 2).contiguous())
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = torch.ops.ck_rs.attention(*leaves)[0]
    (gq,) = torch.autograd.grad(o.sum(), leaves[0], create_graph=True)
    with pytest.raises(RuntimeError, match=r"error\[no-double-backward\]"):
        gq.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_the_llama_training_example_follows_torch(device):
    """examples/llama/train.py: two small Llama-style layers on ck_rs ops trained for 50 AdamW
    steps from the same weights and batches as the same model on torch ops. After one backward
    every parameter's gradient is as close to a float32 torch run's as torch bfloat16's is (1.5×
    its error, plus 1e-2), and the loss curves agree step by step within 2 % (measured: 3e-3 on
    the emulator)."""
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "llama"))
    import train

    bad, (ours, theirs) = train.compare("tiny", 50, torch.device(device))
    assert not bad, bad
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, theirs))
    assert worst < 2e-2, worst
    assert ours[-1] < 0.9 * ours[0], (ours[0], ours[-1])


def _cpp_cases(device):
    """Calls of the ops with C++ kernels: (op, arguments) over their dtypes and paths."""
    bf = torch.bfloat16
    x, g = randn(5, 3, 96, device=device), randn(96, device=device) + 1.5
    a, b = randn(40, 24, device=device), randn(24, 32, device=device)
    w, bias, res = randn(32, 24, device=device), randn(32, device=device), randn(5, 40, 32, device=device)
    xl = randn(5, 40, 24, device=device)
    q, k = randn(2, 4, 33, 64, device=device), randn(2, 2, 47, 64, device=device)
    v = randn(2, 2, 47, 64, device=device)
    # Decode: a contiguous cache, then a paged one with new keys appended and rotated (in place:
    # each route appends the same rows at the same positions).
    dq, cache = randn(3, 2, 8, 64, device=device).to(bf), randn(3, 40, 2, 64, device=device).to(bf)
    lens = torch.tensor([0, 17, 37], dtype=torch.int32, device=device)
    pages, table = randn(9, 16, 2, 64, device=device).to(bf), torch.randperm(9, device=device)
    table = table.to(torch.int32).reshape(3, 3)
    new = randn(3, 2, 2, 64, device=device).to(bf)
    cos, sin = randn(48, 16, device=device), randn(48, 16, device=device)
    short = torch.tensor([0, 5, 30], dtype=torch.int32, device=device)
    return [
        ("attention_with_kvcache", (dq, cache, cache.clone(), lens, None, None, None, None, None, True, 0, None, False)),
        ("attention_with_kvcache", (dq, pages, pages.clone(), short, table, new, new.clone(), cos, sin, True, 2, None, True)),
    ] + ([  # float32 on the emulator only
        ("attention_with_kvcache", (dq.float(), cache.float(), cache.float(), lens, None, None, None, None, None, False, 3, 0.2, False)),
    ] if device == "cpu" else []) + [
        ("rmsnorm", (x, g, 1e-5)),
        ("rmsnorm", (x.to(bf), g.to(bf), 1e-6)),
        ("gemm", (a, b, None)),  # f32 operands: sgemm
        ("gemm", (a.to(bf), b.to(bf), None)),
        ("gemm", (a.to(bf), b.to(bf), bf)),
        ("gemm", (a, b, bf)),
        ("gemm", (randn(24, 40, device=device).to(bf).t(), b.to(bf), None)),  # read as [K, M]
        ("linear", (xl, w, bias, res, "gelu", 0.5)),
        ("linear", (xl.to(bf), w.to(bf), None, res.to(bf), "none", 1.0)),
        ("linear", (xl.to(bf), w.to(bf), bias, None, "silu", 1.0)),
        ("attention", (q.to(bf), k.to(bf), v.to(bf), True, None, "bhsd")),
        ("attention", (q, k, v, False, 0.3, "bshd")),
    ]


def _cpp_errors(device):
    """Bad calls of the ops with C++ kernels, each an error the Python implementation raises."""
    x, g = randn(4, 64, device=device), randn(64, device=device)
    a, b = randn(16, 16, device=device), randn(16, 16, device=device)
    q = randn(1, 2, 8, 64, device=device)
    lens = torch.tensor([3], dtype=torch.int32, device=device)
    return [
        ("rmsnorm", (x.to(torch.int64), g, 1e-6)),
        ("rmsnorm", (x, randn(63, device=device), 1e-6)),
        ("rmsnorm", (x.t(), randn(4, device=device), 1e-6)),  # not contiguous
        ("gemm", (a, b, torch.float16)),
        ("gemm", (a, randn(15, 16, device=device), None)),
        ("linear", (a, b, None, None, "tanh", 1.0)),
        ("linear", (a.to(torch.float16), b, None, None, "none", 1.0)),
        ("attention", (q, q, q, False, -1.0, "bhsd")),
        ("attention", (q, q, q, False, None, "sbhd")),
        ("attention", (q, randn(1, 3, 8, 64, device=device), q, False, None, "bhsd")),
        ("attention_with_kvcache", (q, q, q, lens, None, None, None, None, None, True, -1, None, False)),
        # A split count past 1024: refused by the plan that sizes the scratch.
        ("attention_with_kvcache", (q, q, q, lens, None, None, None, None, None, True, 5000, None, False)),
        ("attention_with_kvcache", (q, q, q, lens.long(), None, None, None, None, None, True, 0, None, False)),
        ("attention_with_kvcache", (q[0], q, q, lens, None, None, None, None, None, True, 0, None, False)),
        ("attention_with_kvcache", (q, q, q, lens, None, None, None, None, None, True, 0, 0.0, False)),
        ("attention_with_kvcache", (q, q, q, lens, None, q, None, None, None, True, 0, None, False)),
    ]


def _cpp_built():
    import os
    import shutil

    if os.environ.get("CK_RS_CPP_OPS") == "0" or not (shutil.which("c++") or shutil.which("g++")):
        pytest.skip("no C++ compiler here (or CK_RS_CPP_OPS=0): the ops keep their Python kernels")
    assert ck_rs._torch_ops._CPP == {"rmsnorm", "gemm", "linear", "attention", "attention_with_kvcache"}


@pytest.mark.parametrize("device", DEVICES)
def test_the_cpp_kernels_give_the_python_implementations_results(device, monkeypatch):
    """``torch.ops.ck_rs.{rmsnorm, gemm, linear, attention, attention_with_kvcache}`` run C++
    kernels built against this torch; the same call through the op's Python implementation (what runs where none could be
    built) gives the same bits, the same types and shapes."""
    _cpp_built()
    for name, args in _cpp_cases(device):
        got = getattr(torch.ops.ck_rs, name)(*args)
        with monkeypatch.context() as m:
            m.setattr(ck_rs, "_KERNELS", {})  # the functions' own path, not the C++ kernels
            want = ck_rs._torch_ops._OPS[name].python(*args)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape and g.device == w.device, (name, g, w)
            assert torch.equal(g, w), name


@pytest.mark.parametrize("device", DEVICES)
def test_the_cpp_kernels_raise_the_python_implementations_errors(device, monkeypatch):
    """A bad call raises the exception type and rule its Python implementation raises."""
    import re

    _cpp_built()
    for name, args in _cpp_errors(device):
        with pytest.raises((TypeError, ValueError)) as want, monkeypatch.context() as m:
            m.setattr(ck_rs, "_KERNELS", {})
            ck_rs._torch_ops._OPS[name].python(*args)
        rule = re.match(r"error\[[a-z-]+\]", str(want.value)).group(0)
        with pytest.raises(type(want.value), match=re.escape(rule)):
            getattr(torch.ops.ck_rs, name)(*args)


def test_a_cpp_kernel_op_records_its_formula_only_where_a_gradient_is_needed():
    """The C++ autograd kernel: no gradient needed, no node (a mode below autograd sees the op
    itself); a gradient needed, the op's C++ formula, whose backward equals torch autograd's of
    the same function; under no_grad, no node."""

    _cpp_built()

    x, g = randn(4, 64), randn(64) + 1.5
    with SeenOps() as seen:
        assert torch.ops.ck_rs.rmsnorm(x, g).grad_fn is None
    assert seen.ops == [torch.ops.ck_rs.rmsnorm.default], seen.ops
    xg, gg = x.clone().requires_grad_(), g.clone().requires_grad_()
    with SeenOps() as seen:
        y = torch.ops.ck_rs.rmsnorm(xg, gg)
    assert seen.ops == [torch.ops.ck_rs.rmsnorm.default], seen.ops
    assert "ck_rs_rmsnormBackward" in y.grad_fn.name()
    y.pow(2).sum().backward()
    x64, g64 = x.double().requires_grad_(), g.double().requires_grad_()
    torch.nn.functional.rms_norm(x64, (64,), g64, 1e-6).pow(2).sum().backward()
    assert ref.rel_err(np64(xg.grad), np64(x64.grad)) < 1e-4
    assert ref.rel_err(np64(gg.grad), np64(g64.grad)) < 1e-4
    with torch.no_grad():
        assert torch.ops.ck_rs.rmsnorm(xg, gg).grad_fn is None


@pytest.mark.parametrize("device", DEVICES)
def test_the_cpp_formulas_give_the_python_formulas_gradients(device):
    """Each op's C++ autograd formula against its Python one (``_torch_ops.py``, what records
    where the C++ could not be built), applied to the same inputs: the same gradient bits for
    every input; ``gemm``'s backward is an error in both."""
    _cpp_built()
    bf = torch.bfloat16
    xl, w = randn(5, 40, 24, device=device), randn(32, 24, device=device)
    bias, res = randn(32, device=device), randn(5, 40, 32, device=device)
    q, k = randn(2, 4, 33, 64, device=device), randn(2, 2, 47, 64, device=device)
    v = randn(2, 2, 47, 64, device=device)
    cases = [
        ("rmsnorm", (randn(3, 96, device=device), randn(96, device=device) + 1.5, 1e-5)),
        ("linear", (xl, w, bias, res, "none", 0.5)),
        ("linear", (xl.to(bf), w.to(bf), None, res.to(bf), "none", 1.0)),
        ("attention", (q.to(bf), k.to(bf), v.to(bf), True, None, "bhsd")),
        ("attention", (q, k, v, False, 0.3, "bshd")),
    ]
    for name, args in cases:
        grads = []
        for route in ("cpp", "python"):
            leaves = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
            op = ck_rs._torch_ops._OPS[name]
            out = getattr(torch.ops.ck_rs, name)(*leaves) if route == "cpp" else op.apply_plain(*leaves, None)
            out = out[0] if isinstance(out, tuple) else out
            torch.manual_seed(1)
            out.backward(torch.randn_like(out))
            grads.append([a.grad for a in leaves if isinstance(a, torch.Tensor)])
        for c, p in zip(*grads):
            assert torch.equal(c, p), name
    a, b = randn(16, 8, device=device).requires_grad_(), randn(8, 16, device=device)
    for y in (torch.ops.ck_rs.gemm(a, b), ck_rs._torch_ops._OPS["gemm"].apply_plain(a, b, None, None)):
        with pytest.raises(RuntimeError, match=r"^error\[no-backward\]: ck_rs::gemm has no backward"):
            y.sum().backward()
    q, cache = randn(1, 1, 2, 64, device=device).to(bf).requires_grad_(), randn(1, 8, 1, 64, device=device).to(bf)
    lens = torch.tensor([5], dtype=torch.int32, device=device)
    kvcache = ck_rs._torch_ops._OPS["attention_with_kvcache"]
    args = (q, cache, cache, lens, None, None, None, None, None, True, 0, None, False)
    for o, _ in (torch.ops.ck_rs.attention_with_kvcache(*args), kvcache.apply_plain(*args, None)):
        with pytest.raises(RuntimeError, match=r"^error\[no-backward\]: ck_rs::attention_with_kvcache has no"):
            o.float().sum().backward()


@pytest.mark.parametrize("setting", ["switched off", "unwritable cache"])
def test_without_the_cpp_library_the_python_kernels_serve(setting, tmp_path):
    """Where the C++ library is switched off, or cannot be built, the ops keep their Python
    kernels (with a warning saying why, where it was wanted) and give the same results."""
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    if setting == "switched off":
        env["CK_RS_CPP_OPS"] = "0"
    else:
        (tmp_path / "file").write_text("")
        env["CK_RS_CACHE"] = str(tmp_path / "file" / "cache")  # below a file: not a folder
    script = (
        "import warnings; warnings.simplefilter('always')\n"
        "import torch, ck_rs\n"
        "assert not ck_rs._torch_ops._CPP, ck_rs._torch_ops._CPP\n"
        "x, g = torch.ones(2, 8), torch.ones(8)\n"
        "y = torch.ops.ck_rs.rmsnorm(x, g, 1e-6)\n"
        "assert abs(y - 1).max() < 1e-5, y\n"
        "print('python kernels')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "python kernels" in done.stdout, done.stderr
    warned = "did not build" in done.stderr or "no C++ compiler" in done.stderr
    assert warned == (setting == "unwritable cache"), done.stderr
