#!/usr/bin/env python3
"""Peers for `ck bench`, measured on the same GPU in the same job: torch's rms_norm, layer_norm,
add then rms_norm, and softmax; Triton RMSNorm, LayerNorm, fused add + RMSNorm and softmax
kernels (one program per row, the row in registers, as in Triton's tutorials); torch's
device-to-device copy; torch.matmul (cuBLAS; f32 with TF32 off, and bf16); and bf16 attention
forward through torch's scaled_dot_product_attention with its flash (FlashAttention-2) and
cuDNN backends (TFLOP/s = 4·B·H·S²·D / time, halved for causal).

The backward passes of RMSNorm, add + RMSNorm, LayerNorm and softmax: torch's autograd of the
forward and torch.compile of the formula (Inductor's Triton kernels, reported as the triton peer).

Usage: bench_peers.py OUT.json [SECTION ...]   (sections: rows, gemm, attention; default all;
backward: the copy and the rows' backward passes alone)
Times: CUDA events around 10 back-to-back calls, per call; 10 warm-up calls, median of 30;
random normal inputs.
GB/s counts x read + gamma (and beta) read + y write (RMSNorm, LayerNorm) or read + write (copy).
"""
import json
import sys

import importlib.util
import pathlib

import torch
import torch.nn.functional as F

# The Triton kernels live in the Python package (its `python -m ck_rs.bench` uses them too);
# loaded by path, so the package need not be built or installed.
_spec = importlib.util.spec_from_file_location(
    "ck_rs_peers", pathlib.Path(__file__).resolve().parent.parent / "python/ck_rs/peers.py")
_peers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_peers)
triton_rmsnorm, triton_layernorm = _peers.triton_rmsnorm, _peers.triton_layernorm
triton_add_rmsnorm, triton_softmax = _peers.triton_add_rmsnorm, _peers.triton_softmax

SHAPES = [(4096, 4096), (16384, 8192), (65536, 1024)]
GEMM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024)]
# (batch, heads, seq, head_dim, causal): `ck bench attention`'s configurations.
ATTENTION_CASES = [(16, 16, 1024, 64, False), (16, 16, 1024, 128, False), (4, 16, 4096, 64, False),
                   (4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (1, 16, 16384, 128, False),
                   (1, 16, 16384, 128, True), (2, 16, 8192, 64, True)]
EPS = 1e-6


def torch_add_rmsnorm(x, res, g):
    r = x + res
    return r, F.rms_norm(r, (x.shape[1],), g, EPS)


def median_ms(fn, warmup=10, iters=30, batch=10):
    """Median over `iters` of the time per call of `batch` back-to-back calls. Timing single
    calls would count the launch latency of an idle GPU (tens of µs for a Triton launch from
    Python) against the peer: with the queue kept full it is the kernel's own time."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / batch)
    times.sort()
    return times[len(times) // 2]


def attention_peers():
    """SDPA's flash and cuDNN backends on each configuration; a backend that refuses a case is
    recorded with its error instead of a time."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = {}
    for b, h, s, d, causal in ATTENTION_CASES:
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        row = {}
        for name, backend in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]:
            try:
                with sdpa_kernel(backend):
                    t = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), iters=20)
                row[f"{name}_ms"] = t
                row[f"{name}_tflops"] = flops / t / 1e9
            except RuntimeError as e:
                row[f"{name}_error"] = str(e).splitlines()[0][:200]
        key = f"{b}x{h}x{s}x{d}" + (":causal" if causal else "")
        rows[key] = row
        print(f"attention {key}: " + ", ".join(f"{n} {row[n + '_tflops']:.0f}" for n in ("flash", "cudnn") if n + "_tflops" in row) + " TFLOP/s", flush=True)
        del q, k, v
    return rows


def main(out, sections):
    torch.manual_seed(0)
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": _peers.triton.__version__}
    if "rows" in sections or "backward" in sections:
        rows_and_copy(result, forward="rows" in sections)
    if "gemm" in sections:
        gemm_peers(result)
    if "attention" in sections:
        result["attention"] = attention_peers()
    json.dump(result, open(out, "w"), indent=1)


def rows_and_copy(result, forward=True):
    result.update({"rmsnorm": {}, "layernorm": {}, "add-rmsnorm": {}, "softmax": {}, "copy": {}})
    x = torch.randn(1 << 28, device="cuda")  # 1 GiB of f32
    y = torch.empty_like(x)
    ms = median_ms(lambda: y.copy_(x))
    result["copy"] = {"bytes": 2 * x.numel() * 4, "ms": ms, "torch_gbps": 2 * x.numel() * 4 / ms / 1e6}
    del x, y
    copies = {}

    def copy_gbps(bytes_):
        """A device copy moving the same bytes (half read, half written): what a kernel of this
        size can reach, launch ramp and tail included."""
        if bytes_ not in copies:
            a = torch.empty(bytes_ // 2, dtype=torch.uint8, device="cuda")
            b = torch.empty_like(a)
            copies[bytes_] = 2 * a.numel() / median_ms(lambda: b.copy_(a)) / 1e6
            del a, b
        return copies[bytes_]

    for m, n in SHAPES if forward else []:
        for name, dt in [("f32", torch.float32), ("bf16", torch.bfloat16)]:
            x = torch.randn(m, n, device="cuda").to(dt)
            g = (torch.rand(n, device="cuda") + 1.0).to(dt)
            ref = F.rms_norm(x.double(), (n,), g.double(), EPS)
            err = (triton_rmsnorm(x, g).double() - ref).abs().max().item()
            bytes_ = (2 * m * n + n) * x.element_size()
            t_torch = median_ms(lambda: F.rms_norm(x, (n,), g, EPS))
            t_triton = median_ms(lambda: triton_rmsnorm(x, g))
            result["rmsnorm"][f"{name} {m}x{n}"] = {
                "copy_gbps": copy_gbps(bytes_), "torch_ms": t_torch, "torch_gbps": bytes_ / t_torch / 1e6,
                "triton_ms": t_triton, "triton_gbps": bytes_ / t_triton / 1e6, "triton_maxerr": err,
            }
            print(f"rmsnorm {name} {m}x{n}: torch {bytes_ / t_torch / 1e6:.0f} GB/s, triton {bytes_ / t_triton / 1e6:.0f} GB/s", flush=True)
            b = torch.randn(n, device="cuda").to(dt)
            ref = F.layer_norm(x.double(), (n,), g.double(), b.double(), EPS)
            err = (triton_layernorm(x, g, b).double() - ref).abs().max().item()
            bytes_ = (2 * m * n + 2 * n) * x.element_size()
            t_torch = median_ms(lambda: F.layer_norm(x, (n,), g, b, EPS))
            t_triton = median_ms(lambda: triton_layernorm(x, g, b))
            result["layernorm"][f"{name} {m}x{n}"] = {
                "copy_gbps": copy_gbps(bytes_), "torch_ms": t_torch, "torch_gbps": bytes_ / t_torch / 1e6,
                "triton_ms": t_triton, "triton_gbps": bytes_ / t_triton / 1e6, "triton_maxerr": err,
            }
            print(f"layernorm {name} {m}x{n}: torch {bytes_ / t_torch / 1e6:.0f} GB/s, triton {bytes_ / t_triton / 1e6:.0f} GB/s (triton max err {err:.1e})", flush=True)
            res = torch.randn(m, n, device="cuda").to(dt)
            _, ref = torch_add_rmsnorm(x.double(), res.double(), g.double())
            err = (triton_add_rmsnorm(x, res, g)[1].double() - ref).abs().max().item()
            bytes_ = (4 * m * n + n) * x.element_size()
            t_torch = median_ms(lambda: torch_add_rmsnorm(x, res, g))
            t_triton = median_ms(lambda: triton_add_rmsnorm(x, res, g))
            result["add-rmsnorm"][f"{name} {m}x{n}"] = {
                "copy_gbps": copy_gbps(bytes_), "torch_ms": t_torch, "torch_gbps": bytes_ / t_torch / 1e6,
                "triton_ms": t_triton, "triton_gbps": bytes_ / t_triton / 1e6, "triton_maxerr": err,
            }
            print(f"add-rmsnorm {name} {m}x{n}: torch {bytes_ / t_torch / 1e6:.0f} GB/s, triton {bytes_ / t_triton / 1e6:.0f} GB/s (triton max err {err:.1e})", flush=True)
            ref = torch.softmax(x.double(), dim=1)
            err = (triton_softmax(x).double() - ref).abs().max().item()
            bytes_ = 2 * m * n * x.element_size()
            t_torch = median_ms(lambda: torch.softmax(x, dim=1))
            t_triton = median_ms(lambda: triton_softmax(x))
            result["softmax"][f"{name} {m}x{n}"] = {
                "copy_gbps": copy_gbps(bytes_), "torch_ms": t_torch, "torch_gbps": bytes_ / t_torch / 1e6,
                "triton_ms": t_triton, "triton_gbps": bytes_ / t_triton / 1e6, "triton_maxerr": err,
            }
            print(f"softmax {name} {m}x{n}: torch {bytes_ / t_torch / 1e6:.0f} GB/s, triton {bytes_ / t_triton / 1e6:.0f} GB/s (triton max err {err:.1e})", flush=True)
            del x, g, b, res, ref
    print(f"copy: torch {result['copy']['torch_gbps']:.0f} GB/s", flush=True)
    backward_peers(result, copy_gbps)


def backward_peers(result, copy_gbps):
    """The row operators' backward passes: torch's autograd of the forward (the backward alone,
    the forward's graph kept), and torch.compile of the textbook formula (Inductor's fused row
    and column reductions, reported as the triton peer); the faster is the peer. GB/s counts
    every tensor read and written once: dy and x (y for softmax; dy, dr and r for add +
    RMSNorm) read, dx written, gamma read and dgamma (dbeta) written, the statistics read."""

    def rmsnorm_formula(dy, x, g, dr=None):
        xf, dyf, gf = x.float(), dy.float(), g.float()
        r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
        dot = (dyf * gf * xf).sum(-1, keepdim=True)
        dx = r * gf * dyf - xf * r.pow(3) * dot / x.shape[-1]
        dx = dx if dr is None else dx + dr.float()
        return dx.to(x.dtype), (dyf * xf * r).sum(0).to(g.dtype)

    def add_rmsnorm_formula(dy, dr, r, g):
        return rmsnorm_formula(dy, r, g, dr)

    def layernorm_formula(dy, x, g, mean, rstd):
        xhat = (x.float() - mean[:, None]) * rstd[:, None]
        gdy = g.float() * dy.float()
        c1 = gdy.mean(-1, keepdim=True)
        c2 = (gdy * xhat).mean(-1, keepdim=True)
        dx = rstd[:, None] * (gdy - c1 - xhat * c2)
        return dx.to(x.dtype), (dy.float() * xhat).sum(0).to(g.dtype), dy.float().sum(0).to(g.dtype)

    def softmax_formula(dy, y):
        yf, dyf = y.float(), dy.float()
        return (yf * (dyf - (dyf * yf).sum(-1, keepdim=True))).to(y.dtype)

    formulas = [("rmsnorm", rmsnorm_formula), ("add-rmsnorm", add_rmsnorm_formula),
                ("layernorm", layernorm_formula), ("softmax", softmax_formula)]
    compiled = {name: torch.compile(f) for name, f in formulas}
    for op, _ in formulas:
        result[f"{op}-backward"] = {}
    for m, n in SHAPES:
        for name, dt in [("f32", torch.float32), ("bf16", torch.bfloat16)]:
            x = torch.randn(m, n, device="cuda").to(dt).requires_grad_()
            g = (torch.rand(n, device="cuda") + 1.0).to(dt).requires_grad_()
            b = torch.randn(n, device="cuda").to(dt).requires_grad_()
            dy = torch.randn(m, n, device="cuda").to(dt)
            e = x.element_size()
            res = torch.randn(m, n, device="cuda").to(dt).requires_grad_()
            dr = torch.randn(m, n, device="cuda").to(dt)
            xd, gd = x.detach(), g.detach()
            mean = xd.float().mean(-1)
            rstd = torch.rsqrt(xd.float().var(-1, unbiased=False) + EPS)
            r, y_add = torch_add_rmsnorm(x, res, g)
            rd = r.detach()
            y_soft = torch.softmax(x, -1)
            ys = y_soft.detach()
            # Per operator: the forward's outputs, what they are differentiated with respect
            # to, their incoming gradients, the compiled formula, the bytes.
            cases = {
                "rmsnorm": ((F.rms_norm(x, (n,), g, EPS),), (x, g), (dy,),
                            lambda: compiled["rmsnorm"](dy, xd, gd), (3 * m * n + 2 * n) * e),
                "add-rmsnorm": ((y_add, r), (x, res, g), (dy, dr),
                                lambda: compiled["add-rmsnorm"](dy, dr, rd, gd), (4 * m * n + 2 * n) * e),
                "layernorm": ((F.layer_norm(x, (n,), g, b, EPS),), (x, g, b), (dy,),
                              lambda: compiled["layernorm"](dy, xd, gd, mean, rstd), (3 * m * n + 3 * n) * e + 8 * m),
                "softmax": ((y_soft,), (x,), (dy,), lambda: compiled["softmax"](dy, ys), 3 * m * n * e),
            }
            for op, (ys_, wrt, grads, formula, bytes_) in cases.items():
                t_torch = median_ms(lambda: torch.autograd.grad(ys_, wrt, grads, retain_graph=True))
                t_compiled = median_ms(formula)
                result[f"{op}-backward"][f"{name} {m}x{n}"] = {
                    "copy_gbps": copy_gbps(bytes_), "torch_ms": t_torch, "torch_gbps": bytes_ / t_torch / 1e6,
                    "compiled_ms": t_compiled, "triton_gbps": bytes_ / t_compiled / 1e6,
                }
                print(f"{op}-backward {name} {m}x{n}: torch {bytes_ / t_torch / 1e6:.0f} GB/s, "
                      f"torch.compile (triton) {bytes_ / t_compiled / 1e6:.0f} GB/s", flush=True)
            del x, g, b, res, dy, dr, cases, r, y_add, y_soft


# `ck bench gemm`'s batched case: 16 products of 2048³.
BMM_SHAPE = (16, 2048, 2048, 2048)


def gemm_peers(result):
    torch.backends.cuda.matmul.allow_tf32 = False
    result["gemm"] = {}
    for m, n, k in GEMM_SHAPES:
        row = {}
        for name, dt in [("f32", torch.float32), ("bf16", torch.bfloat16)]:
            a = torch.randn(m, k, device="cuda").to(dt)
            b = torch.randn(k, n, device="cuda").to(dt)
            t = median_ms(lambda: a @ b, warmup=5, iters=20)
            row[f"{name}_ms"] = t
            row[f"{name}_tflops"] = 2 * m * n * k / t / 1e9
            if dt == torch.bfloat16:
                # bf16 in, f32 C (cuBLAS writes f32 directly), and bf16 C = gelu(A·B + bias)
                # with cuBLASLt's fused bias + GELU epilogue.
                bias = torch.randn(n, device="cuda").to(dt)
                extra = {
                    "bf16_f32out": lambda: torch.mm(a, b, out_dtype=torch.float32),
                    "bf16_bias_gelu": lambda: torch._addmm_activation(bias, a, b, use_gelu=True),
                }
                for key, fn in extra.items():
                    try:
                        t = median_ms(fn, warmup=5, iters=20)
                    except (RuntimeError, TypeError) as e:  # an older torch without the call
                        print(f"gemm {m}x{n}x{k}: no {key} peer ({e})", flush=True)
                        continue
                    row[f"{key}_tflops"] = 2 * m * n * k / t / 1e9
            del a, b
        # e4m3 operands with per-tensor scales, bf16 C: torch._scaled_mm (cuBLASLt), B given
        # column-major as it requires (and as ck's fp8 kernels take it: [N, K] rows).
        try:
            a8 = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
            b8 = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()
            one = torch.tensor(1.0, device="cuda")
            fn = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            t = median_ms(fn, warmup=5, iters=20)
            row["fp8_e4m3_tflops"] = 2 * m * n * k / t / 1e9
            del a8, b8
        except (RuntimeError, TypeError, AttributeError) as e:
            print(f"gemm {m}x{n}x{k}: no fp8 peer ({e})", flush=True)
        result["gemm"][f"{m}x{n}x{k}"] = row
        print(f"gemm {m}x{n}x{k}: cuBLAS " + ", ".join(f"{key[:-7]} {v:.0f}" for key, v in row.items() if key.endswith("_tflops")) + " TFLOP/s", flush=True)
    # Batched: torch.bmm, bf16 in and out.
    batch, m, n, k = BMM_SHAPE
    a = torch.randn(batch, m, k, device="cuda").bfloat16()
    b = torch.randn(batch, k, n, device="cuda").bfloat16()
    t = median_ms(lambda: torch.bmm(a, b), warmup=5, iters=20)
    key = f"{batch}x{m}x{n}x{k}"
    result["gemm"][key] = {"bmm_bf16_tflops": 2 * batch * m * n * k / t / 1e9}
    print(f"gemm batched {key}: torch.bmm bf16 {result['gemm'][key]['bmm_bf16_tflops']:.0f} TFLOP/s", flush=True)
    del a, b
    grouped_peers(result)


def grouped_cases():
    """The grouped GEMMs of `ck bench gemm` (the same list there): mixture-of-experts layers,
    tokens per expert, N, K; keyed `moe{experts} {tokens}x{n}x{k}`."""
    cases = [([1024, 3072, 512, 2560, 1536, 2048, 4096, 1536], 4096, 4096),
             ([37 * g % 256 for g in range(64)], 2048, 2048),
             ([128] * 32, 4096, 4096), ([256] * 16, 4096, 4096), ([512] * 16, 4096, 4096)]
    return {f"moe{len(t)} {sum(t)}x{n}x{k}": (t, n, k) for t, n, k in cases}


def grouped_peers(result):
    """bf16 in and out: torch._grouped_mm (A [tokens, K], B [experts, K, N], end offsets) and a
    loop of torch.mm into C's row blocks; the faster is the peer."""
    for key, (tokens, n, k) in grouped_cases().items():
        a = torch.randn(sum(tokens), k, device="cuda").bfloat16()
        b = torch.randn(len(tokens), k, n, device="cuda").bfloat16()
        c = torch.empty(sum(tokens), n, device="cuda").bfloat16()
        offs = torch.tensor(tokens, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)
        starts = [sum(tokens[:g]) for g in range(len(tokens))]

        def loop():
            for g, (s, t) in enumerate(zip(starts, tokens)):
                if t:
                    torch.mm(a[s:s + t], b[g], out=c[s:s + t])

        flops = 2 * sum(tokens) * n * k
        row = {"mm_loop_tflops": flops / median_ms(loop, warmup=3, iters=20, batch=3) / 1e9}
        try:
            got = torch._grouped_mm(a, b, offs=offs)
            loop()
            assert torch.allclose(got.float(), c.float(), rtol=2e-2, atol=1e-1), "disagrees with torch.mm"
            row["grouped_mm_tflops"] = flops / median_ms(lambda: torch._grouped_mm(a, b, offs=offs), warmup=3, iters=20) / 1e9
        except (RuntimeError, TypeError, AttributeError, AssertionError) as e:
            print(f"gemm grouped {key}: no torch._grouped_mm peer ({e})", flush=True)
        row["grouped_bf16_tflops"] = max(row.values())
        result["gemm"][key] = row
        print(f"gemm grouped {key}: " + ", ".join(f"{name[:-7]} {v:.0f}" for name, v in row.items()) + " TFLOP/s", flush=True)
        del a, b, c


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["rows", "gemm", "attention"])
