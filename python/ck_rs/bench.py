"""``python -m ck_rs.bench``: on a CUDA GPU, the per-call cost of small calls (RMSNorm, GEMM,
linear, decode attention, decode against a KV cache) through each path into ck_rs (the eager function, the
``torch.ops.ck_rs`` op, the eager function on tensors that require grad) next to torch's own
call, in three interleaved rounds (``--per-call-only`` stops there); then the bandwidth (bytes
read + written over time) of the operators next to torch's and, where Triton is installed,
Triton's (``ck_rs.peers``) on large tensors; then, timed in turn, ``ck_rs.gemm`` against
``torch.matmul`` (``torch.addmm`` with a residual), ``ck_rs.linear`` against ``F.linear`` on a
Llama-3-8B layer's projections, ``ck_rs.gated_linear`` against SwiGLU under ``torch.compile``,
and ``ck_rs.grouped_mm`` against ``torch._grouped_mm`` (``--gemm-only`` for those alone); then
``ck_rs.attention_varlen`` against the fixed-length ``ck_rs.attention`` on the same tokens and
FlashAttention-2's varlen forward in torch (``--varlen-only`` for that alone); then
``ck_rs.attention_backward`` against SDPA's backward on its flash and cuDNN backends
(``--attention-bwd-only``); then ``ck_rs.attention_with_kvcache`` against SDPA's decode, as TB/s
of the KV cache read (``--decode-only``); ``--decode-splits`` times the split-count heuristic
against forced counts; ``--decode-graph`` a 32-layer decode step captured in a CUDA graph, its
replay against its kernels' time. ``--layer`` times a Llama-3-8B decoder layer on ck_rs
(``ck_rs.llama``) against the same layer in eager torch and under ``torch.compile``, and their
errors against a float32 run."""

import argparse
import time

import torch
import torch.nn.functional as F

import ck_rs

try:  # Triton is optional
    from ck_rs import peers as triton_peers
except ImportError:
    triton_peers = None


# GPU cycles a spin kernel holds the GPU for, per call a sample queues (~50 µs at 2 GHz: more
# than a call's host work).
HOLD_CYCLES_PER_CALL = 100_000


def sample_ms(fn, batch=10):
    """The time per call of ``batch`` back-to-back calls of ``fn``, by CUDA events. A spin kernel
    holds the GPU while the host queues the calls, so the events time their kernels back to
    back: without it the GPU, idle after the last sample, waits for the first call's host work
    (~20 µs, a third of a small decode call at a batch of 3) — what a decode loop never pays."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(HOLD_CYCLES_PER_CALL * batch)
    s.record()
    for _ in range(batch):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / batch


def median(times):
    return sorted(times)[len(times) // 2]


def median_ms(fn, iters=25, batch=10):
    """Median over ``iters`` samples (``sample_ms``) after 5 warm-up calls."""
    for _ in range(5):
        fn()
    return median([sample_ms(fn, batch) for _ in range(iters)])


def in_turn_ms(ours, peer, iters=25, batch=10):
    """Medians over ``iters`` samples of each, ours and the peer's taken in turn (ours, peer,
    peer, ours, ...): a GPU held down by its power cap slows both alike, where timing one
    after the other would compare two clocks."""
    for _ in range(5):
        ours()
        peer()
    samples = ([], [])
    for i in range(iters):
        for which in ((0, 1) if i % 2 == 0 else (1, 0)):
            samples[which].append(sample_ms((ours, peer)[which], batch))
    return median(samples[0]), median(samples[1])


def wall_us(fn, calls):
    """Wall µs per call over ``calls`` back-to-back calls after 300 of warm-up, the GPU drained
    before and after: the host's cost of a call, which is what a small tensor pays."""
    for _ in range(300):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def per_call_cases(dev):
    """``(case, path, ours, torch's equivalent)`` for the small calls a model spends its launch
    overhead on: each path into ck_rs (the eager function, the ``torch.ops.ck_rs`` op, the
    eager function on tensors that require grad) next to the same call in torch."""
    x, g = torch.randn(1, 1024, device=dev), torch.randn(1024, device=dev)
    xr, gr = x.clone().requires_grad_(), g.clone().requires_grad_()
    a = torch.randn(64, 1024, device=dev).bfloat16()
    w = torch.randn(1024, 1024, device=dev).bfloat16() * 0.03
    b = w.t().contiguous()
    ar, wr = a.clone().requires_grad_(), w.clone().requires_grad_()
    q = torch.randn(1, 32, 1, 128, device=dev).bfloat16()
    k, v = (torch.randn(1, 8, 1024, 128, device=dev).bfloat16() for _ in range(2))
    rms = lambda x, g: F.rms_norm(x, (1024,), g, 1e-6)
    bf16 = torch.bfloat16
    sdpa = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    # The same decode step against a KV cache [B, S, Hkv, D] of 1024 tokens, and SDPA on its views.
    qc = q.transpose(1, 2).contiguous()
    kc, vc = (t.transpose(1, 2).contiguous() for t in (k, v))
    lens = torch.full((1,), 1024, device=dev, dtype=torch.int32)
    kvcache = lambda: ck_rs.attention_with_kvcache(qc, kc, vc, lens)
    kvcache_op = lambda: torch.ops.ck_rs.attention_with_kvcache(qc, kc, vc, lens)
    sdpa_views = lambda: F.scaled_dot_product_attention(
        q, kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True
    )
    return [
        ("rmsnorm 1x1024 f32", "eager", lambda: ck_rs.rmsnorm(x, g), lambda: rms(x, g)),
        ("rmsnorm 1x1024 f32", "torch.ops", lambda: torch.ops.ck_rs.rmsnorm(x, g), lambda: rms(x, g)),
        ("rmsnorm 1x1024 f32", "requires grad", lambda: ck_rs.rmsnorm(xr, gr), lambda: rms(xr, gr)),
        ("gemm 64x1024x1024 bf16", "eager", lambda: ck_rs.gemm(a, b, out_dtype=bf16), lambda: torch.mm(a, b)),
        ("gemm 64x1024x1024 bf16", "torch.ops", lambda: torch.ops.ck_rs.gemm(a, b, bf16), lambda: torch.mm(a, b)),
        ("linear 64x1024 -> 1024 bf16", "eager", lambda: ck_rs.linear(a, w), lambda: F.linear(a, w)),
        ("linear 64x1024 -> 1024 bf16", "torch.ops", lambda: torch.ops.ck_rs.linear(a, w), lambda: F.linear(a, w)),
        ("linear 64x1024 -> 1024 bf16", "requires grad", lambda: ck_rs.linear(ar, wr), lambda: F.linear(ar, wr)),
        ("attention decode 1x32/8x1024", "eager", lambda: ck_rs.attention(q, k, v), sdpa),
        ("attention decode 1x32/8x1024", "torch.ops", lambda: torch.ops.ck_rs.attention(q, k, v), sdpa),
        ("kv-cache decode 1x32/8x1024", "eager", kvcache, sdpa_views),
        ("kv-cache decode 1x32/8x1024", "torch.ops", kvcache_op, sdpa_views),
    ]


def per_call(dev, calls):
    cases = per_call_cases(dev)
    served = ", ".join(sorted(ck_rs._torch_ops._CPP)) or "none (CK_RS_CPP_OPS=0 or no compiler)"
    print(f"\nper call, wall us ({calls} calls after 300 of warm-up), three interleaved rounds;")
    print(f"ops with C++ kernels: {served}")
    rounds = [[] for _ in cases]
    for _ in range(3):
        for i, (_, _, ours, peer) in enumerate(cases):
            rounds[i].append((wall_us(ours, calls), wall_us(peer, calls)))
    print(f"{'case':>30} {'path':>14} {'ck_rs':>20} {'torch':>20} {'ratio':>11}")
    for (case, path, _, _), r in zip(cases, rounds):
        ours = " / ".join(f"{o:5.1f}" for o, _ in r)
        theirs = " / ".join(f"{t:5.1f}" for _, t in r)
        ratios = sorted(o / t for o, t in r)
        print(f"{case:>30} {path:>14} {ours:>20} {theirs:>20} {ratios[0]:5.2f}-{ratios[-1]:4.2f}")


def gemm_in_turn(dev):
    print("\nbf16 GEMM, TFLOP/s: ck_rs.gemm and torch (cuBLAS) timed in turn, medians of 25 x 10 calls")
    print(f"{'case':>30} {'ck_rs':>8} {'torch':>8} {'ratio':>8}")
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024)):
        a = torch.randn(m, k, device=dev).bfloat16()
        b = torch.randn(k, n, device=dev).bfloat16()
        c16 = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
        c32 = torch.empty(m, n, device=dev)
        d = torch.randn(m, n, device=dev).bfloat16()
        cases = [
            ("bf16 C", lambda: ck_rs.gemm(a, b, out=c16, out_dtype=torch.bfloat16),
             lambda: torch.mm(a, b, out=c16)),
            ("bf16 C + residual", lambda: ck_rs.gemm(a, b, residual=d, out=c16, out_dtype=torch.bfloat16),
             lambda: torch.addmm(d, a, b, out=c16)),
            ("f32 C", lambda: ck_rs.gemm(a, b, out=c32),
             lambda: torch.mm(a, b, out_dtype=torch.float32)),
        ]
        for name, ours, peer in cases:
            try:
                ref = peer().float()
            except (TypeError, RuntimeError) as e:  # an older torch without mm(out_dtype=)
                print(f"{name + f' {m}x{n}x{k}':>30}  no torch peer ({e})")
                continue
            got = ours().float()
            err = ((got - ref).norm() / ref.norm()).item()
            if not err < 1e-2:
                raise SystemExit(f"error[wrong-result]: ck_rs.gemm {name} {m}x{n}x{k} differs from torch by {err:.2e}")
            t_ours, t_peer = in_turn_ms(ours, peer)
            tf = lambda ms: 2 * m * n * k / ms / 1e9
            print(f"{name + f' {m}x{n}x{k}':>30} {tf(t_ours):8.0f} {tf(t_peer):8.0f} {t_peer / t_ours:8.3f}")


# A Llama-3-8B decoder layer's projections, (name, N, K, with the residual): the fused QKV
# (32 + 2 x 8 heads of 128), q/k/v alone, o_proj and down_proj adding the residual stream,
# gate/up.
LINEAR_CASES = (
    ("qkv", 6144, 4096, False),
    ("q/o", 4096, 4096, False),
    ("k/v", 1024, 4096, False),
    ("o + residual", 4096, 4096, True),
    ("gate/up", 14336, 4096, False),
    ("down + residual", 4096, 14336, True),
)


def linear_in_turn(dev, rows=(1024, 8192)):
    """``ck_rs.linear`` on ``nn.Linear``'s weights against ``F.linear`` (``torch.addmm`` with the
    residual: cuBLAS's beta = 1), bf16, timed in turn."""
    print("\nlinear (weight [N, K] as nn.Linear keeps it), bf16, TFLOP/s: ck_rs.linear and torch (cuBLAS) in turn")
    print(f"{'case':>34} {'ck_rs':>8} {'torch':>8} {'ratio':>8}")
    for m in rows:
        for name, n, k, with_residual in LINEAR_CASES:
            x = torch.randn(m, k, device=dev).bfloat16()
            w = (torch.randn(n, k, device=dev) / k**0.5).bfloat16()
            c = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            if with_residual:
                d = torch.randn(m, n, device=dev).bfloat16()
                ours = lambda: ck_rs.linear(x, w, residual=d, out=c)
                peer = lambda: torch.addmm(d, x, w.t(), out=c)
            else:
                ours = lambda: ck_rs.linear(x, w, out=c)
                peer = lambda: torch.mm(x, w.t(), out=c)
            ref = peer().float()
            err = ((ours().float() - ref).norm() / ref.norm()).item()
            case = f"{name} {m}x{n}x{k}"
            if not err < 1e-2:
                raise SystemExit(f"error[wrong-result]: ck_rs.linear {case} differs from torch by {err:.2e}")
            t_ours, t_peer = in_turn_ms(ours, peer)
            tf = lambda ms: 2 * m * n * k / ms / 1e9
            print(f"{case:>34} {tf(t_ours):8.0f} {tf(t_peer):8.0f} {t_peer / t_ours:8.3f}")


def gated_in_turn(dev, rows=(1024, 8192), f=14336, k=4096):
    """``ck_rs.gated_linear`` (SwiGLU in one launch) against ``silu(x @ w_gate.T) * (x @ w_up.T)``
    under ``torch.compile`` (which fuses the product's multiply into one kernel after two cuBLAS
    GEMMs) and in eager torch, on a Llama-3-8B MLP's gate/up projections, timed in turn."""
    print("\ngated linear (SwiGLU), bf16, TFLOP/s of the two products: ck_rs.gated_linear vs torch.compile / eager in turn")
    print(f"{'case':>34} {'ck_rs':>8} {'compile':>8} {'ratio':>8} {'eager':>8} {'ratio':>8}")
    swiglu = lambda x, wg, wu: F.silu(x @ wg.T) * (x @ wu.T)
    compiled = torch.compile(swiglu)
    for m in rows:
        x = torch.randn(m, k, device=dev).bfloat16()
        wg, wu = ((torch.randn(f, k, device=dev) / k**0.5).bfloat16() for _ in range(2))
        w = torch.cat([wg, wu])
        c = torch.empty(m, f, device=dev, dtype=torch.bfloat16)
        ours = lambda: ck_rs.gated_linear(x, w, out=c)
        ref = swiglu(x.float(), wg.float(), wu.float())
        err = ((ours().float() - ref).norm() / ref.norm()).item()
        case = f"swiglu {m}x{f}x{k}"
        if not err < 1e-2:
            raise SystemExit(f"error[wrong-result]: ck_rs.gated_linear {case} differs from torch by {err:.2e}")
        t_ours, t_comp = in_turn_ms(ours, lambda: compiled(x, wg, wu))
        t_ours2, t_eager = in_turn_ms(ours, lambda: swiglu(x, wg, wu))
        tf = lambda ms: 2 * 2 * m * f * k / ms / 1e9
        print(f"{case:>34} {tf(t_ours):8.0f} {tf(t_comp):8.0f} {t_comp / t_ours:8.3f} {tf(t_eager):8.0f} {t_eager / t_ours2:8.3f}")


# Mixture-of-experts layers: tokens per expert, N = K (the grouped cases of `ck bench gemm`).
GROUPED_CASES = (
    ([1024, 3072, 512, 2560, 1536, 2048, 4096, 1536], 4096),
    ([512] * 16, 4096),
    ([256] * 16, 4096),
    ([128] * 32, 4096),
    ([37 * g % 256 for g in range(64)], 2048),
)


def grouped_in_turn(dev):
    if not hasattr(torch, "_grouped_mm"):
        print(f"\nno torch._grouped_mm in torch {torch.__version__}: grouped GEMM not compared")
        return
    print(
        "\ngrouped bf16 GEMM, TFLOP/s: ck_rs.grouped_mm and torch._grouped_mm timed in turn, the"
        " experts' weights as [E, K, N] and as nn.Linear keeps them, [E, N, K] (torch: a"
        " transposed view)"
    )
    print(f"{'case':>30} {'ck_rs':>8} {'torch':>8} {'ratio':>8} {'ck_rs nk':>9} {'torch nk':>9} {'ratio':>8}")
    for tokens, n in GROUPED_CASES:
        a = torch.randn(sum(tokens), n, device=dev).bfloat16()
        b = torch.randn(len(tokens), n, n, device=dev).bfloat16()
        w = b.transpose(1, 2).contiguous()  # [E, N, K]
        offs = torch.tensor(tokens, device=dev, dtype=torch.int32).cumsum(0, dtype=torch.int32)
        ours = lambda: ck_rs.grouped_mm(a, b, tokens, out_dtype=torch.bfloat16)
        peer = lambda: torch._grouped_mm(a, b, offs=offs)
        ours_nk = lambda: ck_rs.grouped_mm(a, w, tokens, out_dtype=torch.bfloat16, b_layout="nk")
        peer_nk = lambda: torch._grouped_mm(a, w.transpose(1, 2), offs=offs)
        ref = peer().float()
        case = f"{len(tokens)} experts {sum(tokens)}x{n}x{n}"
        for fn in (ours, ours_nk):
            err = ((fn().float() - ref).norm() / ref.norm()).item()
            if not err < 1e-2:
                raise SystemExit(f"error[wrong-result]: ck_rs.grouped_mm {case} differs from torch by {err:.2e}")
        t_ours, t_peer = in_turn_ms(ours, peer)
        t_ours_nk, t_peer_nk = in_turn_ms(ours_nk, peer_nk)
        tf = lambda ms: 2 * sum(tokens) * n * n / ms / 1e9
        print(
            f"{case:>30} {tf(t_ours):8.0f} {tf(t_peer):8.0f} {t_peer / t_ours:8.3f}"
            f" {tf(t_ours_nk):9.0f} {tf(t_peer_nk):9.0f} {t_peer_nk / t_ours_nk:8.3f}"
        )


# Varlen prefill, (sequences, length, heads, kv_heads, head_dim, causal): a Llama-3-8B layer's
# attention at 8192 tokens, and a smaller-head case.
VARLEN_CASES = [
    (4, 2048, 32, 8, 128, False),
    (4, 2048, 32, 8, 128, True),
    (8, 1024, 32, 8, 128, True),
    (2, 8192, 32, 8, 128, True),
    (16, 1024, 16, 16, 64, True),
]


def ragged(batch, length, seed):
    """Lengths from length/4 to 7·length/4 in steps of 64, summing to batch · length."""
    g = torch.Generator().manual_seed(seed)
    lens, left = [], batch * length
    while left > 0:
        n = min(left, 64 * int(torch.randint(length // 256, 7 * length // 256 + 1, (1,), generator=g)) or 64)
        lens.append(n)
        left -= n
    return lens


def varlen_in_turn(dev):
    fa2 = getattr(torch.ops.aten, "_flash_attention_forward", None)
    print("\nvarlen attention, TFLOP/s (4·H·Σ sq·sk·D, halved when causal): ck_rs.attention_varlen, timed in")
    print("turn with ck_rs.attention on [B, H, S, D] (equal lengths: the same tokens) and FlashAttention-2's")
    print("varlen forward in torch (aten._flash_attention_forward)")
    print(f"{'case':>38} {'ck_rs':>8} {'fixed':>8} {'ratio':>7} {'FA2':>8} {'ratio':>7}")
    for b, s, h, hk, d, causal in VARLEN_CASES:
        q, k, v = (torch.randn(b * s, n, d, device=dev).bfloat16() for n in (h, hk, hk))
        for lens in ([s] * b, ragged(b, s, b * s)):
            cu = torch.tensor([0] + lens, device=dev, dtype=torch.int32).cumsum(0, dtype=torch.int32)
            mx = max(lens)
            ours = lambda: ck_rs.attention_varlen(q, k, v, cu, cu, mx, mx, causal)
            flops = sum(4.0 * h * n * n * d for n in lens) / (2 if causal else 1)
            tf = lambda ms: flops / ms / 1e9
            kind = "equal" if len(set(lens)) == 1 else f"ragged {len(lens)}"
            case = f"{kind} {b * s} tok h{h}/{hk} d{d}{' causal' if causal else ''}"
            fixed = "-"
            if len(set(lens)) == 1:
                qh, kh, vh = (t.unflatten(0, (b, s)).transpose(1, 2).contiguous() for t in (q, k, v))
                t_ours, t_fixed = in_turn_ms(ours, lambda: ck_rs.attention(qh, kh, vh, causal=causal))
                fixed = f"{tf(t_fixed):8.0f} {t_fixed / t_ours:7.3f}"
            peer = fa2 and (lambda: fa2(q, k, v, cu, cu, mx, mx, 0.0, causal, False))
            if peer:
                ref = peer()[0].float()
                err = ((ours().float() - ref).norm() / ref.norm()).item()
                if not err < 1e-2:
                    raise SystemExit(f"error[wrong-result]: ck_rs.attention_varlen {case} differs from FA2 by {err:.2e}")
                t_ours, t_peer = in_turn_ms(ours, peer)
                fa = f"{tf(t_peer):8.0f} {t_peer / t_ours:7.3f}"
            else:
                t_ours, fa = median_ms(ours), "-"
            print(f"{case:>38} {tf(t_ours):8.0f} {fixed:>16} {fa:>16}")


# (batch, cached lengths, heads, kv heads, new tokens, page size): decode against a KV cache.
DECODE_CASES = [
    (b, [n] * b, h, 8, 1, None) for h in (32, 64) for b in (1, 16, 64) for n in (2048, 32768, 131072)
] + [(4, [4641, 45118, 1730, 1696], 32, 8, 4, None)] + [(16, [32768] * 16, 32, 8, 1, p) for p in (16, 256)]


def copy_tb_s(dev):
    """TB/s of torch's device copy of 2 GiB (read + written): the bandwidth a kernel can reach."""
    x = torch.empty(1 << 30, dtype=torch.bfloat16, device=dev)
    y = torch.empty_like(x)
    t = median_ms(lambda: y.copy_(x), iters=9, batch=3)
    return 2 * x.numel() * 2 / t / 1e9


def decode_in_turn(dev, d=128):
    """``ck_rs.attention_with_kvcache`` against SDPA's flash and cuDNN backends on views of the
    same cache (``[B, Hkv, S, D]`` strided, ``enable_gqa``), timed in turn, as TB/s of K and V
    read (the floor: reading the cache once); the mixed batch against SDPA per sequence (its
    faster backend, summed), the paged cases against the contiguous one. Outputs checked
    against fp32 SDPA on the first sequence."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    copy = copy_tb_s(dev)
    print(f"\ndecode against a KV cache, TB/s of K and V read (× the {copy:.2f} TB/s of a 2 GiB copy), D {d},")
    print("timed in turn with SDPA's flash and cuDNN backends on views of the same cache (the mixed batch:")
    print("SDPA once per sequence; a paged cache: × best is × the contiguous cache's time)")
    print(f"{'case':>36} {'ck_rs':>6} {'µs':>8} {'× copy':>7} {'flash':>6} {'cudnn':>6} {'× best':>7}")
    backends = (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION))
    contiguous = {}
    for b, lens, h, hkv, sq, page in DECODE_CASES:
        cap = -(-(max(lens)) // 256) * 256
        kc, vc = (torch.randn(b, cap, hkv, d, device=dev, dtype=torch.bfloat16) for _ in range(2))
        q = torch.randn(b, sq, h, d, device=dev, dtype=torch.bfloat16)
        seqlens = torch.tensor(lens, dtype=torch.int32, device=dev)
        table, k_use, v_use = None, kc, vc
        if page:
            # The same keys in a pool of pages, each sequence's pages scattered through it.
            per_seq = cap // page
            table = torch.randperm(b * per_seq, device=dev).to(torch.int32).reshape(b, per_seq)
            k_use, v_use = (torch.empty(b * per_seq, page, hkv, d, device=dev, dtype=torch.bfloat16) for _ in range(2))
            k_use[table.flatten().long()] = kc.reshape(b * per_seq, page, hkv, d)
            v_use[table.flatten().long()] = vc.reshape(b * per_seq, page, hkv, d)
        ours = lambda: ck_rs.attention_with_kvcache(q, k_use, v_use, seqlens, table, causal=sq > 1)
        n0 = lens[0]
        mask = torch.ones(sq, n0, dtype=torch.bool, device=dev).tril(n0 - sq)
        view = lambda t, i, n: t[i : i + 1, :n].transpose(1, 2)
        ref = F.scaled_dot_product_attention(
            q[:1].transpose(1, 2).float(), view(kc, 0, n0).float(), view(vc, 0, n0).float(),
            attn_mask=mask, enable_gqa=True).transpose(1, 2)
        err = ((ours()[:1].float() - ref).norm() / ref.norm()).item()
        case = f"B{b} L{lens[0] if len(set(lens)) == 1 else lens} H{h}/{hkv} sq{sq}" + (f" page{page}" if page else "")
        if not err < 1e-2:
            raise SystemExit(f"error[wrong-result]: attention_with_kvcache {case} differs from SDPA by {err:.2e}")
        tb = lambda ms: sum(lens) * hkv * d * 2 * 2 / ms / 1e9
        cells, best, t_ours = {"flash": f"{'-':>6}", "cudnn": f"{'-':>6}"}, None, None
        if page:
            # Against the contiguous cache's time, measured just before.
            t_ours = median_ms(ours, iters=9, batch=3)
            best = contiguous.get((b, tuple(lens), h))
        elif len(set(lens)) == 1:
            qs, ks, vs = q.transpose(1, 2), kc[:, :n0].transpose(1, 2), vc[:, :n0].transpose(1, 2)
            peer = lambda: F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=True)
            for name, backend in backends:
                try:
                    # The backend chosen once, outside the timed calls (entering the context
                    # costs host time a call that short would pay).
                    with sdpa_kernel(backend):
                        t_o, t_p = in_turn_ms(ours, peer, iters=9, batch=3)
                except RuntimeError:  # a backend that refuses the case
                    continue
                t_ours = t_o if t_ours is None else min(t_ours, t_o)
                best = t_p if best is None else min(best, t_p)
                cells[name] = f"{tb(t_p):6.2f}"
            contiguous[(b, tuple(lens), h)] = t_ours
        else:
            # SDPA has no ragged decode: one call per sequence (its own pick of backend).
            masks = [torch.ones(sq, n, dtype=torch.bool, device=dev).tril(n - sq) for n in lens]

            def peer():
                for i, (n, m) in enumerate(zip(lens, masks)):
                    F.scaled_dot_product_attention(q[i : i + 1].transpose(1, 2), view(kc, i, n), view(vc, i, n),
                                                   attn_mask=m, enable_gqa=True)
            t_ours, best = in_turn_ms(ours, peer, iters=9, batch=3)
            cells["flash"], cells["cudnn"] = f"{'loop':>6}", f"{tb(best):6.2f}"
        vs_best = f"{best / t_ours:7.3f}" if best else f"{'-':>7}"
        print(f"{case:>36} {tb(t_ours):6.2f} {t_ours * 1e3:8.1f} {tb(t_ours) / copy:7.3f} {cells['flash']} {cells['cudnn']} {vs_best}",
              flush=True)
        del kc, vc, k_use, v_use
        torch.cuda.empty_cache()


# Forced split counts the heuristic (num_splits=0) is timed against.
FORCED_SPLITS = (1, 2, 4, 8, 16, 32)


def decode_splits(dev, d=128, cases=None):
    """The split-count heuristic (``num_splits=0``) against each forced count, timed in turn on
    the decode cases (contiguous) and a batch of many short sequences beside a few long ones:
    the heuristic's time, the best forced count, and that count's time over the heuristic's
    (above 1: the heuristic is faster)."""
    print("\ndecode against a KV cache: the split heuristic (num_splits=0) against forced counts "
          f"{FORCED_SPLITS}, in turn, D {d}")
    print(f"{'case':>36} {'heuristic µs':>13} {'best count':>11} {'its µs':>8} {'× heuristic':>12}")
    if cases is None:
        cases = [c for c in DECODE_CASES if c[5] is None] + [(64, [100] * 60 + [30000] * 4, 32, 8, 1, None)]
    for b, lens, h, hkv, sq, _ in cases:
        cap = -(-(max(lens)) // 256) * 256
        kc, vc = (torch.randn(b, cap, hkv, d, device=dev, dtype=torch.bfloat16) for _ in range(2))
        q = torch.randn(b, sq, h, d, device=dev, dtype=torch.bfloat16)
        seqlens = torch.tensor(lens, dtype=torch.int32, device=dev)
        call = lambda s: ck_rs.attention_with_kvcache(q, kc, vc, seqlens, causal=sq > 1, num_splits=s)
        want = call(1).float()
        t_heuristic, best = None, None
        for s in (0,) + FORCED_SPLITS:
            err = ((call(s).float() - want).norm() / want.norm()).item()
            if not err < 1e-2:
                raise SystemExit(f"error[wrong-result]: num_splits={s} differs from one split by {err:.2e}")
            if s == 0:
                continue
            t_h, t_s = in_turn_ms(lambda: call(0), lambda: call(s), iters=9, batch=3)
            t_heuristic = t_h if t_heuristic is None else min(t_heuristic, t_h)
            if best is None or t_s / t_h < best[2]:
                best = (s, t_s, t_s / t_h)
        shown = lens[0] if len(set(lens)) == 1 else sorted(set(lens))
        case = f"B{b} L{shown} H{h}/{hkv} sq{sq}"
        print(f"{case:>36} {t_heuristic * 1e3:13.1f} {best[0]:11d} {best[1] * 1e3:8.1f} {best[2]:12.3f}", flush=True)
        del kc, vc
        torch.cuda.empty_cache()


ATTENTION_CASES = [
    # (batch, heads, seq, head dim, causal): the forward benchmark's configurations
    (16, 16, 1024, 64, False), (16, 16, 1024, 128, False), (4, 16, 4096, 64, False),
    (4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (1, 16, 16384, 128, False),
    (1, 16, 16384, 128, True), (2, 16, 8192, 64, True),
]


def attention_backward_in_turn(dev):
    """``ck_rs.attention_backward`` (fast and deterministic) against the backward of
    ``F.scaled_dot_product_attention`` with its FlashAttention-2 and cuDNN backends, timed in
    turn, on the forward benchmark's configurations."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    print("\nattention backward, TFLOP/s (2.5 × the forward's 4·B·H·S²·D, halved when causal): ours (fast,")
    print("deterministic) timed in turn with torch.autograd.grad of SDPA's output on its flash and cuDNN backends")
    print(f"{'case':>22} {'ck_rs':>7} {'det':>7} {'flash':>7} {'cudnn':>7} {'vs best':>8}")
    for b, h, s, d, causal in ATTENTION_CASES:
        q, k, v, g = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16) for _ in range(4))
        flops = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
        o, lse = ck_rs.attention(q, k, v, causal=causal, return_lse=True)
        ours = lambda det: lambda: ck_rs.attention_backward(q, k, v, o, lse, g, causal=causal, deterministic=det)
        row = {}
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            try:
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
                peer = lambda: torch.autograd.grad(out, leaves, g, retain_graph=True)
                want = peer()
                got = ours(False)()
                err = max(((x.float() - w.float()).norm() / w.float().norm()).item() for x, w in zip(got, want))
                if not err < 2e-2:
                    raise SystemExit(f"error[wrong-result]: attention_backward {b}x{h}x{s}x{d} differs from {name} by {err:.2e}")
                t_ours, t_peer = in_turn_ms(ours(False), peer, iters=9, batch=3)
                row[name] = (t_ours, t_peer)
            except RuntimeError as e:  # a backend that refuses the case
                row[name] = (None, str(e).splitlines()[0][:60])
        t_det = median_ms(ours(True), iters=9, batch=3)
        tf = lambda ms: flops / ms / 1e9
        t_ours = min(r[0] for r in row.values() if r[0] is not None)
        peers = [r[1] for r in row.values() if r[0] is not None]
        cells = [f"{tf(row[n][1]):7.0f}" if row[n][0] is not None else f"{'-':>7}" for n in ("flash", "cudnn")]
        case = f"{b}x{h}x{s}x{d}" + (" causal" if causal else "")
        print(f"{case:>22} {tf(t_ours):7.0f} {tf(t_det):7.0f} {' '.join(cells)} {min(peers) / t_ours:8.3f}")


def decode_graph(dev, layers=32, cached=4096, page=64):
    """A decode step of a ``layers``-layer stack's attention calls (one sequence of ``cached``
    tokens, GQA 32/8, D 128, the new token appended with RoPE, pages of ``page``) captured in one
    CUDA graph: its replay time against its kernels' own (torch.profiler), so that the per-step
    launch overhead is measured, not assumed."""
    from torch.profiler import ProfilerActivity, profile

    h, hkv, d = 32, 8, 128
    capacity = cached + 256
    pages = capacity // page
    gen = torch.Generator(device=dev).manual_seed(0)
    randn = lambda *shape: torch.randn(*shape, device=dev, dtype=torch.bfloat16, generator=gen)
    caches = [(randn(pages, page, hkv, d), randn(pages, page, hkv, d)) for _ in range(layers)]
    table = torch.randperm(pages, device=dev, generator=gen).to(torch.int32).reshape(1, pages)
    lens = torch.full((1,), cached, dtype=torch.int32, device=dev)
    q, k, v = randn(1, 1, h, d), randn(1, 1, hkv, d), randn(1, 1, hkv, d)
    angles = torch.arange(capacity, device=dev, dtype=torch.float32)[:, None] * (
        10000.0 ** (-torch.arange(0, d, 2, device=dev) / d)
    )
    cos, sin = angles.cos().contiguous(), angles.sin().contiguous()

    def step():
        # The same position every call: the appended rows are rewritten, the lengths unchanged.
        for kc, vc in caches:
            ck_rs.attention_with_kvcache(q, kc, vc, lens, table, k=k, v=v, rotary_cos=cos, rotary_sin=sin)

    step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()

    # The replay's GPU time (behind a spin kernel, as every sample here); the eager step's wall
    # time, host launches included.
    replay, eager = median_ms(graph.replay, iters=10, batch=5) * 1e3, wall_us(step, 20)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(e.device_time for e in kernels)
    print(
        f"\ndecode step through a CUDA graph: {layers} layers' attention_with_kvcache (1 x {cached} "
        f"cached, GQA {h}/{hkv}, D {d}, append + RoPE, pages of {page}), us"
    )
    by_name = {}
    for e in kernels:
        count_time = by_name.setdefault(e.name[:40], [0, 0.0])
        count_time[0] += 1
        count_time[1] += e.device_time
    for name, (count, total) in sorted(by_name.items(), key=lambda x: -x[1][1]):
        print(f"  {name}: {count} launches, {total / count:.2f} each")
    print(
        f"graph replay {replay:.1f} (GPU), eager step {eager:.1f} (wall), kernels {busy:.1f} in {len(kernels)} launches: "
        f"per-step overhead in the graph {replay - busy:.1f}"
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=3000, help="calls per sample of the per-call cost")
    p.add_argument("--gemm-only", action="store_true", help="only the GEMM comparisons")
    p.add_argument("--per-call-only", action="store_true", help="only the per-call cost")
    p.add_argument("--varlen-only", action="store_true", help="only the varlen attention comparisons")
    p.add_argument("--attention-bwd-only", action="store_true", help="only the attention backward comparisons")
    p.add_argument("--decode-only", action="store_true", help="only decode attention against a KV cache")
    p.add_argument(
        "--decode-splits", action="store_true", help="only the decode split heuristic against forced split counts"
    )
    p.add_argument(
        "--decode-graph",
        action="store_true",
        help="only a 32-layer decode step captured in a CUDA graph: replay time against its kernels'",
    )
    p.add_argument(
        "--layer",
        action="store_true",
        help="only the Llama-3-8B decoder layer (ck_rs.llama) against eager torch and torch.compile",
    )
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("error[no-gpu]: ck_rs.bench measures CUDA tensors; no CUDA device here")
    dev = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}")
    if args.varlen_only:
        varlen_in_turn(dev)
        return
    if args.attention_bwd_only:
        attention_backward_in_turn(dev)
        return
    if args.decode_only:
        decode_in_turn(dev)
        return
    if args.decode_splits:
        decode_splits(dev)
        return
    if args.decode_graph:
        decode_graph(dev)
        return
    if args.layer:
        from ck_rs import llama

        llama.bench(llama.Config(), [(1, 1024), (4, 2048), (1, 8192)])
        return
    if args.gemm_only:
        gemm_in_turn(dev)
        linear_in_turn(dev)
        gated_in_turn(dev)
        grouped_in_turn(dev)
        return
    per_call(dev, args.calls)
    if args.per_call_only:
        return

    print("\nbandwidth, GB/s (x read and y written once), medians of 10 back-to-back calls")
    print(f"{'case':>34} {'ck_rs':>8} {'torch':>8} {'triton':>8} {'vs best':>8}")
    for dtype in (torch.float32, torch.bfloat16):
        for m, n in ((4096, 4096), (16384, 8192), (65536, 1024)):
            x = torch.randn(m, n, device=dev, dtype=dtype)
            g, b = torch.randn(n, device=dev, dtype=dtype), torch.randn(n, device=dev, dtype=dtype)
            nbytes = 2 * x.numel() * x.element_size()
            tp = triton_peers
            cases = [
                ("rmsnorm", lambda: ck_rs.rmsnorm(x, g), lambda: F.rms_norm(x, (n,), g, 1e-6),
                 tp and (lambda: tp.triton_rmsnorm(x, g))),
                ("layernorm", lambda: ck_rs.layernorm(x, g, b), lambda: F.layer_norm(x, (n,), g, b),
                 tp and (lambda: tp.triton_layernorm(x, g, b))),
                ("softmax", lambda: ck_rs.softmax(x), lambda: torch.softmax(x, -1),
                 tp and (lambda: tp.triton_softmax(x))),
            ]
            for name, ours_fn, torch_fn, triton_fn in cases:
                a, t = median_ms(ours_fn), median_ms(torch_fn)
                tt = median_ms(triton_fn) if triton_fn else None
                best = min(t, tt) if tt else t
                gb = lambda ms: nbytes / ms / 1e6
                case = f"{name} {str(dtype)[6:]} {m}x{n}"
                tri = f"{gb(tt):8.0f}" if tt else f"{'-':>8}"
                print(f"{case:>34} {gb(a):8.0f} {gb(t):8.0f} {tri} {best / a:8.2f}")
    gemm_in_turn(dev)
    linear_in_turn(dev)
    gated_in_turn(dev)
    grouped_in_turn(dev)
    varlen_in_turn(dev)
    attention_backward_in_turn(dev)
    decode_in_turn(dev)
    decode_graph(dev)


if __name__ == "__main__":
    main()
