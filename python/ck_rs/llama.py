"""A Llama-3-style decoder layer on ck_rs operators, beside the same layer in torch ops: the
model code behind ``examples/llama`` and ``python -m ck_rs.bench --layer``.

The layer (pre-norm, grouped-query attention with rotary embeddings, a SwiGLU MLP):

    h = x + o_proj(attention(rope(q), rope(k), v, causal))   q, k, v = qkv_proj(rmsnorm(x))
    y = h + down_proj(silu(gate_proj(z)) * up_proj(z))       z = rmsnorm(h)

``ck_layer`` runs it on ck_rs: ``qkv_projection`` (the three weights stacked as ``nn.Linear``
keeps them, RoPE in the GEMM's epilogue), ``attention_qkv`` reading Q, K and V in place from its
output and writing O as o_proj reads it, ``linear`` for the projections with the residual adds
fused into ``o_proj`` and ``down_proj``, ``gated_linear`` for the MLP's two projections and their
product in one launch, and ``rmsnorm``. ``ck_layer_rope_pass`` is the same layer with RoPE as a
pass of its own (``linear``, then ``rope_qkv`` writing Q, K and V in attention's layout, then
``attention``): its backward is all kernels, so a training step takes it. ``torch_layer`` is the
reference written with torch ops alone; run in float32 it is what both bfloat16 layers are
measured against. ``bench`` times them against eager torch and ``torch.compile``; ``profile``
lists the kernels of one call.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import ck_rs


@dataclass
class Config:
    hidden: int = 4096
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    mlp: int = 14336
    eps: float = 1e-5
    rope_theta: float = 500000.0

    @staticmethod
    def small():
        """A layer small enough for the emulator (every dimension a multiple of 8, head dim
        64 or 128 as the attention kernel takes)."""
        return Config(hidden=256, heads=4, kv_heads=2, head_dim=64, mlp=384)


def weights(cfg, device, dtype=torch.bfloat16, seed=0):
    """Random weights with nn.Linear's layout ([out_features, in_features]) and its scale."""
    g = torch.Generator().manual_seed(seed)

    def linear(n, k):
        return (torch.randn(n, k, generator=g) / math.sqrt(k)).to(device=device, dtype=dtype)

    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    return {
        "norm1": (1 + 0.1 * torch.randn(cfg.hidden, generator=g)).to(device=device, dtype=dtype),
        "q": linear(q, cfg.hidden),
        "k": linear(kv, cfg.hidden),
        "v": linear(kv, cfg.hidden),
        "o": linear(cfg.hidden, q),
        "norm2": (1 + 0.1 * torch.randn(cfg.hidden, generator=g)).to(device=device, dtype=dtype),
        "gate": linear(cfg.mlp, cfg.hidden),
        "up": linear(cfg.mlp, cfg.hidden),
        "down": linear(cfg.hidden, cfg.mlp),
    }


def stacked(w):
    """What ck_layer reads: the QKV weights stacked into one [q + 2·kv, hidden] projection, the
    gate's and up projection's into one [2·mlp, hidden] (as serving stacks merge them)."""
    return dict(
        w,
        qkv=torch.cat([w["q"], w["k"], w["v"]]),
        gate_up=torch.cat([w["gate"], w["up"]]),
    )


def rope_tables(cfg, seq, device, dtype):
    """cos and sin [seq, head_dim] of Llama's rotary embedding (half-split)."""
    inv = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(device=device, dtype=dtype), angles.sin().to(device=device, dtype=dtype)


def pair_tables(cfg, seq, device):
    """What ck_rs.rope_qkv reads: float32 cos and sin [seq, head_dim / 2], one angle per pair."""
    cos, sin = rope_tables(cfg, seq, device, torch.float32)
    return cos[:, : cfg.head_dim // 2].contiguous(), sin[:, : cfg.head_dim // 2].contiguous()


def rope(t, cos, sin):
    """Rotates [B, S, H, D] by the half-split rule: (x1, x2) → (x1·cos − x2·sin, x2·cos + x1·sin)."""
    half = t.shape[-1] // 2
    rotated = torch.cat([-t[..., half:], t[..., :half]], dim=-1)
    return t * cos[:, None, :] + rotated * sin[:, None, :]


def torch_layer(x, w, cfg, cos, sin):
    """The reference: torch ops alone, in x's dtype."""
    b, s, _ = x.shape
    h = F.rms_norm(x, (cfg.hidden,), w["norm1"], cfg.eps)
    q = F.linear(h, w["q"]).view(b, s, cfg.heads, cfg.head_dim)
    k = F.linear(h, w["k"]).view(b, s, cfg.kv_heads, cfg.head_dim)
    v = F.linear(h, w["v"]).view(b, s, cfg.kv_heads, cfg.head_dim)
    q, k = rope(q, cos, sin), rope(k, cos, sin)
    o = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True
    )
    x = x + F.linear(o.transpose(1, 2).reshape(b, s, -1), w["o"])
    z = F.rms_norm(x, (cfg.hidden,), w["norm2"], cfg.eps)
    return x + F.linear(F.silu(F.linear(z, w["gate"])) * F.linear(z, w["up"]), w["down"])


def ck_layer(x, w, cfg, cos, sin):
    """The same layer on ck_rs operators (w from `stacked`; cos, sin from `pair_tables`). No
    pass but the operators': Q and K leave the QKV projection rotated, attention reads them
    where the projection wrote them and writes O as [B, S, H, D] (o_proj's input as it is), the
    residual adds are in the projections' epilogues, the MLP's product in its gated GEMM."""
    h = ck_rs.rmsnorm(x, w["norm1"], cfg.eps)
    qkv = ck_rs.qkv_projection(h, w["qkv"], cos, sin, cfg.heads, cfg.kv_heads)
    o = ck_rs.attention_qkv(qkv, cfg.heads, cfg.kv_heads, causal=True).flatten(2)
    x = ck_rs.linear(o, w["o"], residual=x)
    z = ck_rs.rmsnorm(x, w["norm2"], cfg.eps)
    return ck_rs.linear(ck_rs.gated_linear(z, w["gate_up"]), w["down"], residual=x)


def ck_layer_rope_pass(x, w, cfg, cos, sin):
    """`ck_layer` with RoPE as a pass of its own: `rope_qkv` rotates the plain projection's
    output and lays Q, K and V out for `attention` in one kernel — one more pass over them, but
    its backward is one kernel too (`qkv_projection`'s undoes the rotation in torch ops), so a
    training step takes this one."""
    h = ck_rs.rmsnorm(x, w["norm1"], cfg.eps)
    q, k, v = ck_rs.rope_qkv(ck_rs.linear(h, w["qkv"]), cos, sin, cfg.heads, cfg.kv_heads)
    o = ck_rs.attention(q, k, v, causal=True, out_layout="bshd").flatten(2)
    x = ck_rs.linear(o, w["o"], residual=x)
    z = ck_rs.rmsnorm(x, w["norm2"], cfg.eps)
    return ck_rs.linear(ck_rs.gated_linear(z, w["gate_up"]), w["down"], residual=x)


E4M3_MAX = 448.0  # e4m3's largest finite value


def fp8_weights(ws):
    """`stacked` weights with their four projections also in fp8: `w8[name] = (e4m3 weight,
    its per-tensor scale)` (`weight ≈ scale · e4m3`), quantised once; `x_scale` holds each
    projection input's scale, calibrated on the first call (`ck_layer_fp8`)."""
    w8 = {}
    for name in ("qkv", "o", "gate_up", "down"):
        w = ws[name].float()
        scale = w.abs().max().item() / E4M3_MAX
        w8[name] = ((w / scale).to(torch.float8_e4m3fn), scale)
    return dict(ws, w8=w8, x_scale={})


def ck_layer_fp8(x, w, cfg, cos, sin):
    """`ck_layer` with its four projections on fp8 (e4m3) operands and per-tensor scales
    (w from `fp8_weights`): each projection's input is quantised by torch (divide, clamp, cast:
    three passes) with a static scale, its amax / 448 on the first call, and `linear` runs on
    the e4m3 operands; the MLP is `linear` writing [g, u] then `swiglu` (the gated GEMM has no
    fp8 form). Everything else as `ck_layer`, in bfloat16."""

    def project(t, name, **epilogue):
        w8, w_scale = w["w8"][name]
        if name not in w["x_scale"]:
            w["x_scale"][name] = max(t.abs().max().float().item(), 1e-12) / E4M3_MAX
        x_scale = w["x_scale"][name]
        t8 = (t / x_scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
        return ck_rs.linear(t8, w8, x_scale=x_scale, weight_scale=w_scale, **epilogue)

    h = ck_rs.rmsnorm(x, w["norm1"], cfg.eps)
    q, k, v = ck_rs.rope_qkv(project(h, "qkv"), cos, sin, cfg.heads, cfg.kv_heads)
    o = ck_rs.attention(q, k, v, causal=True, out_layout="bshd").flatten(2)
    x = project(o, "o", residual=x)
    z = ck_rs.rmsnorm(x, w["norm2"], cfg.eps)
    return project(ck_rs.swiglu(project(z, "gate_up")), "down", residual=x)


def ck_layer_ops(x, w, cfg, cos, sin):
    """`ck_layer` on the `torch.ops.ck_rs` custom ops, which `torch.compile(fullgraph=True)`
    keeps in its graph (their fake implementations give it the shapes)."""
    ops = torch.ops.ck_rs
    h = ops.rmsnorm(x, w["norm1"], cfg.eps)
    qkv = ops.qkv_projection(h, w["qkv"], cos, sin, cfg.heads, cfg.kv_heads)
    o, _ = ops.attention_qkv(qkv, cfg.heads, cfg.kv_heads, True)
    x = ops.linear(o.flatten(2), w["o"], None, x)
    z = ops.rmsnorm(x, w["norm2"], cfg.eps)
    return ops.linear(ops.gated_linear(z, w["gate_up"]), w["down"], None, x)


def stack(layer, x, ws, cfg, cos, sin):
    """`layer` applied once per set of weights in `ws`."""
    for w in ws:
        x = layer(x, w, cfg, cos, sin)
    return x


def errors(cfg, batch, seq, device, layers=1, fp8=False):
    """The relative errors (norm) of the ck_rs layer and of torch's, both bfloat16, against
    the float32 reference run on the same bfloat16 weights and input; with `fp8`, also the
    error of `ck_layer_fp8` (its activation scales calibrated on this input)."""
    ws = [weights(cfg, device, seed=i) for i in range(layers)]
    x = torch.randn(batch, seq, cfg.hidden, generator=torch.Generator().manual_seed(7)).to(device, torch.bfloat16)
    cos, sin = rope_tables(cfg, seq, device, torch.bfloat16)
    cos32, sin32 = rope_tables(cfg, seq, device, torch.float32)
    with torch.no_grad():
        want = stack(torch_layer, x.float(), [{k: t.float() for k, t in w.items()} for w in ws], cfg, cos32, sin32)
        ours = stack(ck_layer, x, [stacked(w) for w in ws], cfg, *pair_tables(cfg, seq, device))
        theirs = stack(torch_layer, x, ws, cfg, cos, sin)
        if fp8:
            pairs = pair_tables(cfg, seq, device)
            ours8 = stack(ck_layer_fp8, x, [fp8_weights(stacked(w)) for w in ws], cfg, *pairs)
    err = lambda y: ((y.float() - want).norm() / want.norm()).item()
    return (err(ours), err(theirs)) + ((err(ours8),) if fp8 else ())


def time_ms(fn, iters=20):
    """Median of `iters` timed calls (CUDA events) after 3 warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


CK_WEIGHTS = ("norm1", "qkv", "o", "norm2", "gate_up", "down")
TORCH_WEIGHTS = ("norm1", "q", "k", "v", "o", "norm2", "gate", "up", "down")


def runs(cfg, batch, seq, step, device="cuda", fp8=False):
    """The versions of the layer at (batch, seq) as calls without arguments: ck_rs, eager
    torch, torch.compile (default mode, SDPA attention). With `step`, each call is a training
    step's forward and backward (ck_rs: `ck_layer_rope_pass`): the gradients of x and of every
    weight for a fixed dY, by `torch.autograd.grad` (nothing accumulates between calls); else a
    forward under no_grad, and `ck_layer_rope_pass` beside `ck_layer`. With `fp8` (forward
    only), also `ck_layer_fp8`."""
    if fp8 and step:
        raise SystemExit("error[no-backward]: --fp8 times the forward only (fp8 linear has no backward)")
    dev = torch.device(device)
    w = weights(cfg, dev)
    ws = stacked(w)
    x = torch.randn(batch, seq, cfg.hidden, device=dev, dtype=torch.bfloat16)
    cos, sin = rope_tables(cfg, seq, dev, torch.bfloat16)
    pairs = pair_tables(cfg, seq, dev)
    compiled = torch.compile(torch_layer)
    calls = {
        "ck": (ck_layer_rope_pass if step else ck_layer, ws, CK_WEIGHTS, pairs),
        "eager": (torch_layer, w, TORCH_WEIGHTS, (cos, sin)),
        "compile": (compiled, w, TORCH_WEIGHTS, (cos, sin)),
    }
    if not step:
        calls["rope_pass"] = (ck_layer_rope_pass, ws, CK_WEIGHTS, pairs)
    if fp8:
        calls["fp8"] = (ck_layer_fp8, fp8_weights(ws), (), pairs)
    if not step:
        def forward(layer, w, _, tables):
            def call():
                with torch.no_grad():
                    return layer(x, w, cfg, *tables)
            return call
        return {k: forward(*c) for k, c in calls.items()}
    dy = torch.randn_like(x)
    xg = x.detach().requires_grad_()

    def train(layer, w, names, tables):
        w = dict(w, **{n: w[n].detach().requires_grad_() for n in names})
        inputs = [xg] + [w[n] for n in names]
        return lambda: torch.autograd.grad(layer(xg, w, cfg, *tables), inputs, dy)
    return {k: train(*c) for k, c in calls.items()}


def bench(cfg, shapes, step=False, rounds=3, fp8=False):
    """The layer's time on ck_rs, in eager torch and under torch.compile (default mode, SDPA
    attention), interleaved over `rounds`, per (batch, seq) — the forward, or with `step` the
    forward and backward; and each bfloat16 layer's forward error against the float32 run.
    With `fp8`, `ck_layer_fp8` too: its time, × compile, and error."""
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {'forward + backward' if step else 'forward'}")
    fp8_head = f" {'fp8 ms':>8} {'vs compile':>10} {'err fp8':>10}" if fp8 else ""
    pass_head = "" if step else f" {'rope pass ms':>12} {'vs compile':>10}"
    print(f"{'B x S':>10} {'ck_rs ms':>9} {'eager ms':>9} {'compile ms':>10} {'vs eager':>9} {'vs compile':>10} {'err ck_rs':>10} {'err torch':>10}{pass_head}{fp8_head}")
    for b, s in shapes:
        fns = runs(cfg, b, s, step, fp8=fp8)
        fns["compile"]()  # compiles outside the timing
        best = {k: [] for k in fns}
        for _ in range(rounds):
            for k, fn in fns.items():
                best[k].append(time_ms(fn))
        del fns
        t = {k: min(v) for k, v in best.items()}
        nan = (float("nan"),) * (3 if fp8 else 2)
        e = errors(cfg, b, s, "cuda", fp8=fp8) if b * s <= 8192 else nan
        fp8_cols = f" {t['fp8']:8.3f} {t['compile'] / t['fp8']:10.3f} {e[2]:10.2e}" if fp8 else ""
        pass_cols = "" if step else f" {t['rope_pass']:12.3f} {t['compile'] / t['rope_pass']:10.3f}"
        print(f"{f'{b} x {s}':>10} {t['ck']:9.3f} {t['eager']:9.3f} {t['compile']:10.3f} {t['eager'] / t['ck']:9.3f} {t['compile'] / t['ck']:10.3f} {e[0]:10.2e} {e[1]:10.2e}{pass_cols}{fp8_cols}")


def profile(cfg, batch, seq, step=False, top=12):
    """Where the layer's time goes: the GPU kernels of one call of each version (ck_rs,
    torch.compile) — a forward, or with `step` a forward and backward — by total time, from
    torch.profiler."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    fns = runs(cfg, batch, seq, step)
    for name in ("ck", "compile"):
        fn = fns[name]
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
        events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
        events.sort(key=lambda e: -e.device_time_total)
        total = sum(e.device_time_total for e in events)
        wall = start.elapsed_time(end)
        label = "ck_rs" if name == "ck" else "torch.compile"
        print(f"\n{label}, {batch} x {seq}: {total / 1e3:.3f} ms of kernels in {wall:.3f} ms between events")
        for e in events[:top]:
            print(f"  {e.device_time_total / 1e3:8.3f} ms  {e.count:3d}x  {e.key[:90]}")
