"""The operators on numpy arrays (the emulator), against fp64 references, on odd shapes."""

import numpy as np
import pytest

import ck_rs
import reference as ref

RNG = np.random.default_rng(7)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


ROWS = [(1, 1), (3, 5000), (130, 257), (65, 4099), (2, 9000)]


@pytest.mark.parametrize("m,n", ROWS)
def test_rmsnorm(m, n):
    x, g = randn(m, n), randn(n)
    y = ck_rs.rmsnorm(x, g, eps=1e-6)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (m, n)
    assert ref.rel_err(y, ref.rmsnorm(x, g, 1e-6)) < 1e-5


def test_rmsnorm_leading_dimensions_are_rows_and_out_is_written():
    x, g = randn(2, 3, 40), randn(40)
    out = np.full((2, 3, 40), np.nan, np.float32)
    y = ck_rs.rmsnorm(x, g, out=out)
    assert y is out
    assert ref.rel_err(out, ref.rmsnorm(x, g, 1e-6)) < 1e-5


@pytest.mark.parametrize("m,n", ROWS)
def test_rmsnorm_backward_from_the_registry(m, n):
    """An operator with no hand-written wrapper: ``ck_rs.rmsnorm_backward`` comes from its
    description (inputs positional, scalars by name, outputs in order)."""
    dy, x, g = randn(m, n), randn(m, n), randn(n) + 1.5
    dx, dgamma = ck_rs.rmsnorm_backward(dy, x, g, eps=1e-5)
    assert dx.shape == (m, n) and dgamma.shape == (n,) and dx.dtype == np.float32
    want_dx, want_dgamma = ref.rmsnorm_backward(dy, x, g, 1e-5)
    # dx is a difference of two terms that cancel where a row has one element: its error is
    # relative to the first term's size, r · gamma · dy.
    r = 1.0 / np.sqrt((x.astype(np.float64) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    assert np.linalg.norm(dx - want_dx) / np.linalg.norm(r * g * dy) < 1e-5
    assert ref.rel_err(dgamma, want_dgamma) < 1e-5
    assert "rmsnorm_backward" in ck_rs.__all__ and "dy, x, gamma" in ck_rs.rmsnorm_backward.__doc__


@pytest.mark.parametrize("m,n", ROWS)
def test_add_rmsnorm_backward_is_rmsnorm_backward_of_r_plus_dr(m, n):
    """The gradient of ``sum(dy · rmsnorm(r)) + sum(dr · r)``, ``r = x + residual``: RMSNorm's
    of ``r`` plus ``dr``, for ``x`` and ``residual`` alike."""
    dy, dr, r, g = randn(m, n), randn(m, n), randn(m, n), randn(n) + 1.5
    dx, dgamma = ck_rs.add_rmsnorm_backward(dy, dr, r, g, eps=1e-5)
    want_dx, want_dgamma = ref.rmsnorm_backward(dy, r, g, 1e-5)
    want_dx = want_dx + dr
    size = 1.0 / np.sqrt((r.astype(np.float64) ** 2).mean(axis=-1, keepdims=True) + 1e-5) * g * dy
    assert np.linalg.norm(dx - want_dx) / (np.linalg.norm(size) + np.linalg.norm(dr)) < 1e-5
    assert ref.rel_err(dgamma, want_dgamma) < 1e-5


@pytest.mark.parametrize("m,n", ROWS)
def test_add_rmsnorm(m, n):
    x, res, g = randn(m, n), randn(m, n), randn(n)
    y, r = ck_rs.add_rmsnorm(x, res, g, eps=1e-6)
    np.testing.assert_array_equal(r, x + res)  # one f32 add, as numpy does it
    assert ref.rel_err(y, ref.rmsnorm(x.astype(np.float64) + res, g, 1e-6)) < 1e-5


@pytest.mark.parametrize("m,n", ROWS)
def test_layernorm_with_statistics(m, n):
    x, g, b = randn(m, n), randn(n), randn(n)
    y, mean, rstd = ck_rs.layernorm(x, g, b, eps=1e-5, return_stats=True)
    want, wmean, wrstd = ref.layernorm(x, g, b, 1e-5)
    assert ref.rel_err(y, want) < 1e-5
    assert mean.shape == (m,) and rstd.shape == (m,)
    np.testing.assert_allclose(mean, wmean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd, wrstd, rtol=1e-5)


def test_layernorm_large_offset_rows():
    x = (1e4 + RNG.standard_normal((7, 1000))).astype(np.float32)
    g, b = np.ones(1000, np.float32), np.zeros(1000, np.float32)
    want, _, _ = ref.layernorm(x, g, b, 1e-5)
    assert ref.rel_err(ck_rs.layernorm(x, g, b), want) < 1e-4


@pytest.mark.parametrize("m,n", ROWS)
def test_softmax(m, n):
    x = 4 * randn(m, n)
    y = ck_rs.softmax(x)
    assert ref.rel_err(y, ref.softmax(x)) < 1e-5


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (17, 33, 65), (130, 70, 257)])
def test_gemm(m, n, k):
    a, b = randn(m, k), randn(k, n)
    c = ck_rs.gemm(a, b)
    assert c.dtype == np.float32 and c.shape == (m, n)
    assert ref.rel_err(c, a.astype(np.float64) @ b) < 1e-5


@pytest.mark.parametrize(
    "tokens,n,k",
    [
        ([0, 5, 1, 130], 16, 24),  # few rows per expert: the cp.async kernel
        ([257, 0, 255], 8, 8),  # 256 on average: the TMA kernel, rows ending inside tiles
    ],
)
def test_grouped_mm(tokens, n, k):
    a, b = randn(sum(tokens), k), randn(len(tokens), k, n)
    c = ck_rs.grouped_mm(a, b, tokens)
    assert c.dtype == np.float32 and c.shape == (sum(tokens), n)
    a64, b64 = ref.bf16_round(a).astype(np.float64), ref.bf16_round(b).astype(np.float64)
    starts = np.cumsum([0] + tokens)
    want = np.concatenate([a64[s:e] @ b64[g] for g, (s, e) in enumerate(zip(starts, starts[1:]))])
    assert ref.rel_err(c, want) < 1e-5


@pytest.mark.parametrize(
    "shape,causal",
    [
        ((1, 2, 1, 17, 64), False),
        ((1, 2, 2, 130, 64), True),
        ((2, 4, 2, 17, 128), False),  # grouped-query: 4 heads on 2
        ((1, 2, 1, 257, 128), True),
    ],
)
def test_attention(shape, causal):
    b, h, hkv, sk, d = shape
    sq = 17 if sk != 17 else 130  # Sq ≠ Sk: the causal corner is bottom-right
    q, k, v = randn(b, h, sq, d), randn(b, hkv, sk, d), randn(b, hkv, sk, d)
    o, lse = ck_rs.attention(q, k, v, causal=causal, return_lse=True)
    assert o.dtype == np.float32 and o.shape == q.shape and lse.shape == (b, h, sq)
    want, wlse = ref.attention(*(ref.bf16_round(t) for t in (q, k, v)), causal, d**-0.5)
    assert ref.rel_err(o, want) < 1e-2
    seen = np.isfinite(wlse)
    np.testing.assert_array_equal(np.isfinite(lse), seen)
    np.testing.assert_allclose(lse[seen], wlse[seen], atol=1e-3)


def test_attention_explicit_scale_and_no_keys():
    q, k, v = randn(1, 1, 5, 64), randn(1, 1, 3, 64), randn(1, 1, 3, 64)
    o, lse = ck_rs.attention(q, k, v, causal=True, scale=0.3, return_lse=True)
    want, wlse = ref.attention(*(ref.bf16_round(t) for t in (q, k, v)), True, 0.3)
    # Rows 0 and 1 see no key (i + Sk − Sq < 0): O = 0, LSE = −∞.
    np.testing.assert_array_equal(o[0, 0, :2], 0)
    assert np.all(lse[0, 0, :2] == -np.inf)
    assert ref.rel_err(o, want) < 1e-2


def test_empty_tensors_give_empty_results():
    e = np.ones((4, 0), np.float32)
    assert ck_rs.rmsnorm(e, np.ones(0, np.float32)).shape == (4, 0)
    assert ck_rs.softmax(np.ones((0, 5), np.float32)).shape == (0, 5)
    assert ck_rs.gemm(np.ones((0, 5), np.float32), np.ones((5, 3), np.float32)).shape == (0, 3)
    # K = 0: each element is the empty sum.
    k0 = ck_rs.gemm(np.ones((2, 0), np.float32), np.ones((0, 3), np.float32))
    np.testing.assert_array_equal(k0, np.zeros((2, 3)))
    # The mean and variance of no values are undefined.
    _, mean, rstd = ck_rs.layernorm(e, e[0], e[0], return_stats=True)
    assert mean.shape == (4,) and np.isnan(mean).all() and np.isnan(rstd).all()
    q = np.ones((1, 1, 0, 64), np.float32)
    assert ck_rs.attention(q, np.ones((1, 1, 3, 64), np.float32), np.ones((1, 1, 3, 64), np.float32)).shape == q.shape


@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "silu"])
def test_gemm_fused_epilogue(activation):
    m, n, k = 130, 136, 72
    a, b, bias, d = randn(m, k), randn(k, n), randn(n), randn(m, n)
    c = ck_rs.gemm(a, b, bias=bias, residual=d, alpha=0.5, beta=2.0, activation=activation)
    assert c.dtype == np.float32 and c.shape == (m, n)
    x = 0.5 * (ref.bf16_round(a).astype(np.float64) @ ref.bf16_round(b)) + 2.0 * d + bias
    want = {
        "none": x,
        "relu": np.maximum(x, 0),
        "gelu": 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
        "silu": x / (1 + np.exp(-x)),
    }[activation]
    assert ref.rel_err(c, want) < 1e-5


def _act(x, activation):
    return {
        "none": x,
        "relu": np.maximum(x, 0),
        "gelu": 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
        "silu": x / (1 + np.exp(-x)),
    }[activation]


@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "silu"])
@pytest.mark.parametrize("shape", [(2, 3, 37, 23), (1, 67, 40, 72)])
def test_linear_takes_the_weight_as_nn_linear_keeps_it(activation, shape):
    # Leading dims on x; odd N and K (the any-shape kernel), then multiples of 8 (TMA).
    b, m, n, k = shape
    x, w, bias, d = randn(b, m, k), randn(n, k), randn(n), randn(b, m, n)
    c = ck_rs.linear(x, w, bias, d, activation=activation, beta=-0.5)
    assert c.dtype == np.float32 and c.shape == (b, m, n)
    z = ref.bf16_round(x).astype(np.float64) @ ref.bf16_round(w).astype(np.float64).T
    want = _act(z + bias - 0.5 * d, activation)
    assert ref.rel_err(c, want) < 1e-5


def test_linear_names_the_weight_given_transposed():
    with pytest.raises(ValueError, match=r"^error\[shape-mismatch\].*`weight`.*out_features, in_features"):
        ck_rs.linear(randn(4, 16), randn(16, 8))


@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_gated_linear_is_one_launch_of_both_projections(activation):
    m, f, k = 67, 136, 72
    x, w = randn(2, m, k), randn(2 * f, k)
    c = ck_rs.gated_linear(x, w, activation=activation)
    assert c.dtype == np.float32 and c.shape == (2, m, f)
    xw = ref.bf16_round(x).astype(np.float64) @ ref.bf16_round(w).astype(np.float64).T
    want = _act(xw[..., :f], activation) * xw[..., f:]
    assert ref.rel_err(c, want) < 1e-2  # the kernel writes bfloat16


def test_gated_linear_wants_the_weights_stacked():
    with pytest.raises(ValueError, match=r"^error\[shape-mismatch\].*stacked"):
        ck_rs.gated_linear(randn(4, 16), randn(15, 16))
    with pytest.raises(ValueError, match=r"^error\[bad-activation\]"):
        ck_rs.gated_linear(randn(4, 16), randn(16, 16), activation="relu")


def test_gemm_a_km_from_its_description_reads_a_as_it_lies():
    """``ck_rs.gemm_a_km`` is built from the registry's description: its optional residual a
    keyword (None by default), its result float32 (the operator's first type)."""
    a_km, b, r = randn(40, 16), randn(40, 24), randn(16, 24)  # a as [K, M]
    want = ref.bf16_round(a_km).astype(np.float64).T @ ref.bf16_round(b).astype(np.float64)
    c = ck_rs.gemm_a_km(a_km, b)
    assert c.dtype == np.float32 and c.shape == (16, 24)
    assert ref.rel_err(c, want) < 1e-5
    c = ck_rs.gemm_a_km(a_km, b, residual=r, alpha=2.0, beta=-1.0)
    assert ref.rel_err(c, 2.0 * want - r) < 1e-5
    with pytest.raises(ValueError, match=r"^error\[shape-unsupported\].*multiples of 8"):
        ck_rs.gemm_a_km(randn(40, 12), randn(40, 24))


def test_a_choice_of_the_description_is_given_by_name():
    """A choice scalar (``linear_fp8``'s activation) is its name in Python; another is refused
    with the names it takes."""
    xi, wi = np.round(randn(3, 32) * 4), np.round(randn(8, 32) * 4)  # small whole numbers
    got = ck_rs.linear_fp8(_e4m3_bits(xi), _e4m3_bits(wi), alpha=0.0625, activation="relu")
    want = np.maximum(xi.astype(np.float64) @ wi.astype(np.float64).T * 0.0625, 0)
    assert got.dtype == np.float32 and ref.rel_err(got, want) < 1e-3
    with pytest.raises(ValueError, match=r"^error\[unknown-argument\]: activation 'tanh'; use one of none, relu, gelu, silu"):
        ck_rs.linear_fp8(_e4m3_bits(xi), _e4m3_bits(wi), activation="tanh")


def _e4m3_bits(v):
    """The e4m3 bytes (uint8) of whole numbers |v| ≤ 15, from the format's definition: sign,
    exponent biased by 7, three mantissa bits (|v| = 2^(e − 7) · (1 + m/8))."""
    a = np.abs(v)
    e = np.floor(np.log2(np.maximum(a, 1))).astype(np.int64)
    m = np.round((a / 2.0**e - 1) * 8).astype(np.int64)
    bits = np.where(a == 0, 0, ((e + 7) << 3) | m) | np.where(v < 0, 0x80, 0)
    return bits.astype(np.uint8)


def _rope_reference(qkv, cos, sin, heads, kv_heads, rotary, interleaved):
    """Q, K, V [B, heads, S, D] in float64 from the rotation's definition."""
    b, s, width = qkv.shape
    d = width // (heads + 2 * kv_heads)
    x = qkv.astype(np.float64).reshape(b, s, heads + 2 * kv_heads, d).copy()
    c = np.broadcast_to(cos.astype(np.float64).reshape(-1, s, rotary // 2), (b, s, rotary // 2))
    sn = np.broadcast_to(sin.astype(np.float64).reshape(-1, s, rotary // 2), (b, s, rotary // 2))
    c, sn = c[:, :, None, :], sn[:, :, None, :]
    qk = x[:, :, : heads + kv_heads, :rotary]
    if interleaved:
        a, bb = qk[..., 0::2].copy(), qk[..., 1::2].copy()
        qk[..., 0::2], qk[..., 1::2] = a * c - bb * sn, bb * c + a * sn
    else:
        a, bb = qk[..., : rotary // 2].copy(), qk[..., rotary // 2 :].copy()
        qk[..., : rotary // 2], qk[..., rotary // 2 :] = a * c - bb * sn, bb * c + a * sn
    x[:, :, : heads + kv_heads, :rotary] = qk
    t = x.transpose(0, 2, 1, 3)
    return t[:, :heads], t[:, heads : heads + kv_heads], t[:, heads + kv_heads :]


@pytest.mark.parametrize("interleaved,rotary,per_token", [(False, 64, False), (False, 32, True), (True, 48, False)])
def test_rope_qkv_rotates_and_lays_out_for_attention(interleaved, rotary, per_token):
    b, s, heads, kv_heads, d = 2, 5, 4, 2, 64
    qkv = randn(b, s, (heads + 2 * kv_heads) * d)
    rows = b * s if per_token else s
    angles = (np.arange(rows)[:, None] % s + 3) * 10000.0 ** (-2 * np.arange(rotary // 2) / rotary)
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    q, k, v = ck_rs.rope_qkv(qkv, cos, sin, heads, kv_heads, rotary_dim=rotary, interleaved=interleaved)
    assert q.shape == (b, heads, s, d) and k.shape == v.shape == (b, kv_heads, s, d)
    for got, want in zip((q, k, v), _rope_reference(qkv, cos, sin, heads, kv_heads, rotary, interleaved)):
        assert ref.rel_err(got, want) < 1e-6
