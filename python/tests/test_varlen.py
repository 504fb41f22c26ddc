"""``ck_rs.attention_varlen`` on torch tensors: CPU (the emulator) and CUDA, against an fp64
reference written here from FlashAttention's varlen contract (each sequence on its own), the
fixed-length kernel on equal lengths, the custom op, bad bounds, a CUDA graph replayed with new
bounds. Skipped where torch (or a GPU) is missing."""

import numpy as np
import pytest

import ck_rs
import reference as ref

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def randn(*shape, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed * 1009 + sum(shape))
    return torch.randn(*shape, generator=g).to(device=device, dtype=torch.bfloat16)


def np64(t):
    return t.detach().float().cpu().double().numpy()


def packed(lengths, pad=0):
    """``cu_seqlens`` (int32) of sequences of ``lengths`` and the total rows (``pad`` more)."""
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return torch.tensor(cu), int(cu[-1]) + pad


def expected(q, k, v, cu_q, cu_k, causal, scale=None):
    """fp64 ``o`` ``[total_q, H, D]`` and ``lse`` ``[H, total_q]``: each sequence's rows against
    its own keys, a causal mask at its bottom-right corner; rows of no sequence NaN."""
    qd, kd, vd = np64(q), np64(k), np64(v)
    total, heads, d = qd.shape
    group = heads // kd.shape[1]
    scale = scale or 1 / np.sqrt(d)
    o, lse = np.full_like(qd, np.nan), np.full((heads, total), np.nan)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        sq, sk = q1 - q0, k1 - k0
        for h in range(heads):
            for i in range(sq):
                seen = min(max(i + sk - sq + 1, 0), sk) if causal else sk
                if seen == 0:
                    o[q0 + i, h], lse[h, q0 + i] = 0.0, -np.inf
                    continue
                s = kd[k0 : k0 + seen, h // group] @ qd[q0 + i, h] * scale
                m = s.max()
                p = np.exp(s - m)
                lse[h, q0 + i] = m + np.log(p.sum())
                o[q0 + i, h] = p @ vd[k0 : k0 + seen, h // group] / p.sum()
    return o, lse


def check(o, lse, want_o, want_lse, rows):
    """O norm-wise within 1e-2 of fp64 and the LSE within 1e-3 over the sequences' ``rows``."""
    assert ref.rel_err(np64(o)[:rows], want_o[:rows]) < 1e-2
    np.testing.assert_allclose(np64(lse)[:, :rows], want_lse[:, :rows], atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_varlen_against_the_reference(device, causal, d):
    q_lens, k_lens = [1, 130, 0, 17, 200], [1, 17, 5, 130, 0]
    cu_q, total_q = packed(q_lens, pad=2)
    cu_k, total_k = packed(k_lens, pad=2)
    q = randn(total_q, 4, d, seed=1, device=device)
    k, v = randn(total_k, 2, d, seed=2, device=device), randn(total_k, 2, d, seed=3, device=device)
    o, lse = ck_rs.attention_varlen(
        q, k, v, cu_q.to(device), cu_k.to(device), max(q_lens), max(k_lens), causal, return_lse=True
    )
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (4, total_q) and lse.dtype == torch.float32
    check(o, lse, *expected(q, k, v, cu_q, cu_k, causal), int(cu_q[-1]))


@pytest.mark.parametrize("device", DEVICES)
def test_equal_lengths_are_the_fixed_length_attention(device):
    """Two sequences of 130 packed equal ``ck_rs.attention`` on ``[2, H, 130, D]``, bit for bit:
    the same tiles of the same rows, summed in the same order."""
    batch, s, heads, kv_heads, d = 2, 130, 4, 2, 64
    q = randn(batch, s, heads, d, seed=4, device=device)
    k, v = randn(batch, s, kv_heads, d, seed=5, device=device), randn(batch, s, kv_heads, d, seed=6, device=device)
    cu, _ = packed([s, s])
    o, lse = ck_rs.attention_varlen(
        q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu.to(device), cu.to(device), s, s, True, return_lse=True
    )
    heads_first = lambda t: t.transpose(1, 2).contiguous()  # noqa: E731
    fixed, fixed_lse = ck_rs.attention(heads_first(q), heads_first(k), heads_first(v), causal=True, return_lse=True, out_layout="bshd")
    assert torch.equal(o, fixed.flatten(0, 1))
    assert torch.equal(lse, fixed_lse.permute(1, 0, 2).flatten(1))


def test_the_custom_op_has_a_fake():
    ops = pytest.importorskip("ck_rs._torch_ops")
    cu, total = packed([3, 5])
    q, k, v = randn(total, 2, 64, seed=7), randn(total, 1, 64, seed=8), randn(total, 1, 64, seed=9)
    o, lse = ops.attention_varlen(q, k, v, cu, cu, 5, 5, True)
    check(o, lse, *expected(q, k, v, cu, cu, True), total)
    torch.library.opcheck(ops.attention_varlen.default, (q, k, v, cu, cu, 5, 5), {"causal": True})


def test_bad_calls_name_their_rule():
    q = torch.zeros(8, 2, 64)
    good = torch.tensor([0, 4, 8], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"^error\[bad-seqlens\]: cu_seqlens_k decreases at sequence 1 \(5 then 4\)"):
        ck_rs.attention_varlen(q, q, q, good, torch.tensor([0, 5, 4], dtype=torch.int32), 4, 4)
    with pytest.raises(ValueError, match=r"^error\[bad-seqlens\]: cu_seqlens_q ends at row 9"):
        ck_rs.attention_varlen(q, q, q, torch.tensor([0, 4, 9], dtype=torch.int32), good, 4, 4)
    with pytest.raises(TypeError, match=r"^error\[dtype-unsupported\]: `cu_seqlens_q` holds 64-bit integers; .* int32"):
        ck_rs.attention_varlen(q, q, q, good.long(), good, 4, 4)
    with pytest.raises(ValueError, match=r"^error\[shape-mismatch\]"):
        ck_rs.attention_varlen(q, q, q, good, torch.tensor([0, 8], dtype=torch.int32), 4, 4)
    with pytest.raises(ValueError, match=r"^error\[shape-mismatch\]: q is \(1, 8, 2, 64\)"):
        ck_rs.attention_varlen(q[None], q, q, good, good, 4, 4)
    with pytest.raises(ValueError, match=r"^error\[argument-size\]: max_seqlen_q is -1"):
        ck_rs.attention_varlen(q, q, q, good, good, -1, 4)
    with pytest.raises(ValueError, match=r"^error\[argument-size\]: max_seqlen_k is 16777217; .* \(0 to 2\^24\)"):
        ck_rs.attention_varlen(q, q, q, good, good, 4, (1 << 24) + 1)
    with pytest.raises(ValueError, match=r"^error\[no-backward\]"):
        ck_rs.attention_varlen(q.requires_grad_(), q, q, good, good, 4, 4)


@GPU
def test_bad_bounds_on_the_gpu_give_nan_rows():
    q = randn(8, 2, 64, seed=10, device="cuda")
    cu_q = torch.tensor([0, 4, 8], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, 6, 5], dtype=torch.int32, device="cuda")
    o = ck_rs.attention_varlen(q, q, q, cu_q, cu_k, 4, 6)
    assert not o[:4].isnan().any() and o[4:].isnan().all()


@GPU
def test_a_cuda_graph_replays_with_new_bounds():
    _graph_replays_with_new_bounds()


@GPU
def test_a_cuda_graph_replays_after_hundreds_of_tensor_maps():
    """A launch captured into a graph reads the tensor map its warm-up cached. The cache held
    256 maps: past them the warm-up's map was not cached, the capture uploaded one of its own,
    freed after it, and the replay died of an illegal instruction (job 125)."""
    heads, kv_heads, d, total = 8, 2, 128, 64
    q = randn(total * 150, heads, d, device="cuda")
    kv = randn(total * 150, kv_heads, d, device="cuda")
    cu = torch.tensor([0, total], dtype=torch.int32, device="cuda")
    for i in range(150):  # two maps (q, k = v) for each pair of views: the cache fills
        part = slice(i * total, (i + 1) * total)
        ck_rs.attention_varlen(q[part], kv[part], kv[part], cu, cu, total, total, True)
    _graph_replays_with_new_bounds()


def _graph_replays_with_new_bounds():
    heads, kv_heads, d, total = 8, 2, 128, 1500
    q = randn(total, heads, d, seed=11, device="cuda")
    k, v = randn(total, kv_heads, d, seed=12, device="cuda"), randn(total, kv_heads, d, seed=13, device="cuda")
    cu = torch.tensor([0, 700, 1500], dtype=torch.int32, device="cuda")
    ck_rs.attention_varlen(q, k, v, cu, cu, 800, 800, True)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = ck_rs.attention_varlen(q, k, v, cu, cu, 800, 800, True)
    for bounds in ([0, 700, 1500], [0, 1, 1400], [0, 800, 800]):
        cu.copy_(torch.tensor(bounds, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        want, _ = expected(q, k, v, cu.cpu(), cu.cpu(), True)
        assert ref.rel_err(np64(o)[: bounds[-1]], want[: bounds[-1]]) < 1e-2, bounds
