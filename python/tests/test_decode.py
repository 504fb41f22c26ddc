"""``ck_rs.attention_with_kvcache`` on torch tensors: CPU (the emulator) and CUDA, against an
fp64 reference written here from FlashAttention's contract; contiguous and paged caches,
append with RoPE (the cache's bytes after the call), the custom op, CUDA graphs replayed with
new lengths. Skipped where torch (or a GPU) is missing."""

import numpy as np
import pytest

import ck_rs
import reference as ref

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def randn(*shape, seed=0, device="cpu", dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed * 1009 + sum(shape))
    return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)


def np64(t):
    return t.detach().float().cpu().double().numpy()


def rope_tables(positions, rotary_dim):
    """cos/sin ``[positions, rotary_dim / 2]`` at Llama's frequencies."""
    inv = 10000.0 ** (-np.arange(0, rotary_dim, 2) / rotary_dim)
    angles = np.arange(positions)[:, None] * inv[None, :]
    return (torch.tensor(np.cos(angles), dtype=torch.float32), torch.tensor(np.sin(angles), dtype=torch.float32))


def rotate(x, cos, sin, interleaved):
    """``x`` ``[..., D]`` (fp64) rotated on its first ``2 · cos.shape[-1]`` elements."""
    x = x.copy()
    half = cos.shape[-1]
    if interleaved:
        a, b = x[..., 0 : 2 * half : 2].copy(), x[..., 1 : 2 * half : 2].copy()
        x[..., 0 : 2 * half : 2], x[..., 1 : 2 * half : 2] = a * cos - b * sin, b * cos + a * sin
    else:
        a, b = x[..., :half].copy(), x[..., half : 2 * half].copy()
        x[..., :half], x[..., half : 2 * half] = a * cos - b * sin, b * cos + a * sin
    return x


def gather(cache, b, length, page_table):
    """Sequence ``b``'s first ``length`` rows ``[length, kv_heads, D]`` of a cache (fp64)."""
    c = np64(cache)
    if page_table is None:
        return c[b, :length]
    page = c.shape[1]
    rows = [c[int(page_table[b, j // page]), j % page] for j in range(length)]
    return np.stack(rows) if rows else c[0, :0]


def expected(q, k_cache, v_cache, seqlens, page_table, causal):
    """fp64 ``o`` ``[B, Sq, H, D]`` and ``lse`` ``[B, H, Sq]`` of the new tokens (the last
    ``Sq`` positions of each sequence) against the cache (already holding any new keys)."""
    qd = np64(q)
    batch, sq, heads, d = qd.shape
    group = heads // k_cache.shape[2]
    o, lse = np.zeros_like(qd), np.full((batch, heads, sq), -np.inf)
    for b in range(batch):
        n = int(seqlens[b])
        k, v = gather(k_cache, b, n, page_table), gather(v_cache, b, n, page_table)
        for h in range(heads):
            for t in range(sq):
                seen = min(max(t + n - sq + 1, 0), n) if causal else n
                if seen == 0:
                    continue
                s = k[:seen, h // group] @ qd[b, t, h] / np.sqrt(d)
                m = s.max()
                p = np.exp(s - m)
                lse[b, h, t] = m + np.log(p.sum())
                o[b, t, h] = p @ v[:seen, h // group] / p.sum()
    return o, lse


def paged(cache, seqlens, page_size, seed):
    """``cache`` ``[B, S, Hkv, D]`` copied into a shuffled page pool with its page table
    (unused entries −1, unused pages NaN)."""
    batch, capacity = cache.shape[:2]
    max_pages = -(-capacity // page_size)
    pages = batch * max_pages + 2
    order = torch.randperm(pages, generator=torch.Generator().manual_seed(seed))
    pool = torch.full((pages, page_size, *cache.shape[2:]), float("nan"), dtype=cache.dtype, device=cache.device)
    table = torch.full((batch, max_pages), -1, dtype=torch.int32)
    for b in range(batch):
        for p in range(max_pages):
            table[b, p] = order[b * max_pages + p]
            rows = cache[b, p * page_size : (p + 1) * page_size]
            pool[table[b, p], : rows.shape[0]] = rows
    return pool, table.to(cache.device)


def stale(cache, seqlens):
    """``cache`` with every row past its sequence's length set to NaN (what an uninitialised
    cache may hold): a kernel that let them count would give NaN."""
    cache = cache.clone()
    for b, n in enumerate(seqlens.tolist()):
        cache[b, n:] = float("nan")
    return cache


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("page_size", [None, 16, 64])
def test_decode_against_the_reference(device, page_size):
    batch, heads, kv_heads, d = 4, 8, 2, 128
    seqlens = torch.tensor([0, 1, 130, 300], dtype=torch.int32)
    kc = stale(randn(batch, 320, kv_heads, d, seed=1), seqlens).to(device)
    vc = stale(randn(batch, 320, kv_heads, d, seed=2), seqlens).to(device)
    q = randn(batch, 2, heads, d, seed=3, device=device)
    table = None
    if page_size:
        kc, table = paged(kc, seqlens, page_size, 5)
        vc, _ = paged(vc, seqlens, page_size, 5)
    o, lse = ck_rs.attention_with_kvcache(q, kc, vc, seqlens.to(device), table, return_lse=True, num_splits=3)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (batch, heads, 2)
    want_o, want_lse = expected(q, kc, vc, seqlens, None if table is None else table.cpu(), True)
    assert ref.rel_err(np64(o), want_o) < 1e-2
    np.testing.assert_allclose(np64(lse), want_lse, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("interleaved", [False, True])
def test_append_with_rope_writes_the_cache(device, interleaved):
    batch, heads, kv_heads, d, sq, rotary = 2, 4, 1, 64, 3, 32
    seqlens = torch.tensor([5, 40], dtype=torch.int32)
    kc, vc = randn(batch, 64, kv_heads, d, seed=4, device=device), randn(batch, 64, kv_heads, d, seed=5, device=device)
    k, v = randn(batch, sq, kv_heads, d, seed=6, device=device), randn(batch, sq, kv_heads, d, seed=7, device=device)
    q = randn(batch, sq, heads, d, seed=8, device=device)
    cos, sin = rope_tables(64, rotary)
    before_k, before_v = kc.clone(), vc.clone()
    o = ck_rs.attention_with_kvcache(
        q, kc, vc, seqlens.to(device), k=k, v=v, rotary_cos=cos.to(device), rotary_sin=sin.to(device),
        rotary_interleaved=interleaved,
    )
    # The cache: rows seqlens[b] .. + sq hold v and k rotated at their positions; others as before.
    want_k, want_v = np64(before_k), np64(before_v)
    qr = np64(q)
    for b in range(batch):
        pos = np.arange(int(seqlens[b]), int(seqlens[b]) + sq)
        c, s = cos.double().numpy()[pos][:, None, :], sin.double().numpy()[pos][:, None, :]
        want_k[b, pos] = rotate(np64(k)[b], c, s, interleaved)
        want_v[b, pos] = np64(v)[b]
        qr[b] = rotate(qr[b], c, s, interleaved)
    np.testing.assert_allclose(np64(kc), want_k, rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(np64(vc), want_v)
    want_o, _ = expected(torch.tensor(qr), kc.cpu(), vc.cpu(), seqlens + sq, None, True)
    assert ref.rel_err(np64(o), want_o) < 1e-2


def test_the_custom_op_mutates_the_cache_and_has_a_fake():
    ops = pytest.importorskip("ck_rs._torch_ops")
    kc, vc = torch.zeros(1, 8, 1, 64, dtype=torch.bfloat16), torch.zeros(1, 8, 1, 64, dtype=torch.bfloat16)
    k, v = torch.ones(1, 1, 1, 64, dtype=torch.bfloat16), torch.full((1, 1, 1, 64), 2.0, dtype=torch.bfloat16)
    q = torch.ones(1, 1, 2, 64, dtype=torch.bfloat16)
    seqlens = torch.tensor([3], dtype=torch.int32)
    o, lse = ops.attention_with_kvcache(q, kc, vc, seqlens, k=k, v=v)
    assert torch.equal(kc[0, 3], k[0, 0]) and torch.equal(vc[0, 3], v[0, 0])
    # Three zero keys (score 0) and the new key (score 64/8 = 8): weights 1, 1, 1, e^8.
    e8 = np.exp(8.0)
    assert abs(float(o[0, 0, 0, 0]) - 2 * e8 / (3 + e8)) < 1e-2
    assert abs(float(lse[0, 0, 0]) - np.log(3 + e8)) < 1e-3
    torch.library.opcheck(ops.attention_with_kvcache.default, (q, kc.clone(), vc.clone(), seqlens), {"k": k, "v": v})


@pytest.mark.parametrize("device", DEVICES)
def test_lengths_out_of_range_give_nan_and_append_nothing(device):
    """The lengths live on the device, so the call cannot refuse them: a sequence whose length is
    negative, or passes the capacity with its new token, gets NaN rows; neither is written."""
    kc = torch.zeros(3, 8, 1, 64, dtype=torch.bfloat16, device=device)
    vc = torch.ones_like(kc)
    new = torch.full((3, 1, 1, 64), 7.0, dtype=torch.bfloat16, device=device)
    q = torch.zeros(3, 1, 2, 64, dtype=torch.bfloat16, device=device)
    seqlens = torch.tensor([3, 8, -1], dtype=torch.int32, device=device)
    want_k, want_v = kc.clone(), vc.clone()
    want_k[0, 3], want_v[0, 3] = 7.0, 7.0  # sequence 0's new token, at position 3
    o, lse = ck_rs.attention_with_kvcache(q, kc, vc, seqlens, k=new, v=new.clone(), return_lse=True)
    # q = 0: four equal scores, O the mean of values 1, 1, 1, 7; LSE = ln 4.
    assert torch.all(o[0] == 2.5) and torch.allclose(lse[0].cpu(), torch.full((2, 1), np.log(4.0)))
    assert o[1:].isnan().all() and lse[1:].isnan().all()
    assert torch.equal(kc, want_k) and torch.equal(vc, want_v)


def test_bad_calls_name_their_rule():
    q, kc = torch.zeros(1, 1, 2, 64), torch.zeros(1, 8, 1, 64)
    with pytest.raises(TypeError, match=r"^error\[dtype-unsupported\]: `cache_seqlens` holds 64-bit integers; .* int32"):
        ck_rs.attention_with_kvcache(q, kc, kc, torch.tensor([3]))
    with pytest.raises(ValueError, match=r"^error\[shape-mismatch\]: give new k and v together"):
        ck_rs.attention_with_kvcache(q, kc, kc, torch.tensor([3], dtype=torch.int32), k=torch.zeros(1, 1, 1, 64))
    with pytest.raises(ValueError, match=r"^error\[head-dim-unsupported\]"):
        z = torch.zeros(1, 8, 1, 96)
        ck_rs.attention_with_kvcache(torch.zeros(1, 1, 2, 96), z, z, torch.tensor([3], dtype=torch.int32))
    # On CPU tensors the table is on the host: a page the call reads outside the pool is refused
    # (entries past the sequence's pages, here the -1, are never read).
    pool, table = torch.zeros(4, 16, 1, 64), torch.tensor([[0, 7, -1]], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"^error\[bad-page-table\]: page_table\[0\]\[1\] is 7"):
        ck_rs.attention_with_kvcache(q, pool, pool, torch.tensor([17], dtype=torch.int32), table)
    ck_rs.attention_with_kvcache(q, pool, pool, torch.tensor([16], dtype=torch.int32), table)


@GPU
def test_a_cuda_graph_replays_with_new_lengths():
    batch, heads, kv_heads, d, page = 3, 32, 8, 128, 64
    seqlens = torch.tensor([100, 700, 1500], dtype=torch.int32, device="cuda")
    kc, table = paged(randn(batch, 2048, kv_heads, d, seed=9, device="cuda"), seqlens, page, 3)
    vc, _ = paged(randn(batch, 2048, kv_heads, d, seed=10, device="cuda"), seqlens, page, 3)
    q = randn(batch, 1, heads, d, seed=11, device="cuda")
    k, v = randn(batch, 1, kv_heads, d, seed=12, device="cuda"), randn(batch, 1, kv_heads, d, seed=13, device="cuda")
    # Warm up on the tensors the graph will use, as torch asks before a capture (the caches'
    # tensor maps are built then, once).
    ck_rs.attention_with_kvcache(q, kc, vc, seqlens, table, k=k, v=v)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = ck_rs.attention_with_kvcache(q, kc, vc, seqlens, table, k=k, v=v)
    for lengths in ([100, 700, 1500], [7, 1999, 0], [1024, 64, 2000]):
        seqlens.copy_(torch.tensor(lengths, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        want, _ = expected(q, kc, vc, seqlens.cpu() + 1, table.cpu(), True)
        assert ref.rel_err(np64(o), want) < 1e-2, lengths


@pytest.mark.parametrize("device", DEVICES)
def test_the_llama_decode_example_gives_torchs_tokens(device):
    """examples/llama/decode.py: greedy decoding on ck_rs (paged cache, RoPE on append; on CUDA
    every step a graph replay) picks the float32 torch model's token at every step where that
    choice is clear (most steps), its logits within 3 % of torch's."""
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "llama"))
    import decode

    differ, clear, total, err, _ = decode.check(device)
    assert differ == 0 and clear >= total // 2 and err < 3e-2, (differ, clear, total, err)
