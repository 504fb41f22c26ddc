"""Greedy decoding of a small Llama-style model on ck_rs operators, with a paged KV cache and,
on a GPU, one CUDA graph per decode step — checked token for token against the same model in
torch (float32, a contiguous cache, SDPA): both read the reference's tokens (teacher forcing),
and ck_rs must pick the reference's token at every step where that choice is clear (a
bfloat16 model against a float32 one may flip a near-tie, and free-running sequences would
then part for good).

    python examples/llama/decode.py            # CPU: the emulator, a tiny model, no graphs
    python examples/llama/decode.py --cuda     # GPU: a larger model, each step a graph replay

The prompt goes through `ck_rs.attention_with_kvcache` as `sq` new tokens appended to empty
caches (causal among themselves); each next token is one more new token. Attention appends the
token's key and value to its sequence's pages, rotating the key (and the query) on the way, so
a step is: embedding → per layer [RMSNorm, QKV projection, attention against the cache, output
projection + residual, RMSNorm, SwiGLU MLP + residual] → RMSNorm → logits → argmax. On a GPU
the step is captured once; each replay reads the token written into its input buffer and the
lengths in `cache_seqlens`, which the step itself advances. The captured step runs its
projections with torch (see `TorchProjections`: ck_rs's GEMMs cannot be captured yet); the
prompt, and every step on the CPU, run them on ck_rs.
"""

import argparse
import math

import torch
import torch.nn.functional as F

import ck_rs
from ck_rs.llama import Config, pair_tables, rope, rope_tables, stacked, weights


def model(cfg, layers, vocab, device, seed=0):
    """Random weights; the output head scaled up so that greedy choices have clear margins
    (bfloat16 against float32 must pick the same tokens)."""
    g = torch.Generator().manual_seed(seed + 1000)
    embed = torch.randn(vocab, cfg.hidden, generator=g).to(device, torch.bfloat16)
    head = (4 * torch.randn(vocab, cfg.hidden, generator=g) / math.sqrt(cfg.hidden)).to(device, torch.bfloat16)
    norm = (1 + 0.1 * torch.randn(cfg.hidden, generator=g)).to(device, torch.bfloat16)
    return embed, [weights(cfg, device, seed=seed + i) for i in range(layers)], norm, head


class PagedCache:
    """Per layer, K and V pages `[pages, page_size, kv_heads, head_dim]` shared by the batch
    through one page table (each sequence's pages handed out in a shuffled order)."""

    def __init__(self, cfg, layers, batch, capacity, page_size, device):
        max_pages = -(-capacity // page_size)
        pages = batch * max_pages
        shape = (pages, page_size, cfg.kv_heads, cfg.head_dim)
        self.k = [torch.zeros(shape, device=device, dtype=torch.bfloat16) for _ in range(layers)]
        self.v = [torch.zeros(shape, device=device, dtype=torch.bfloat16) for _ in range(layers)]
        order = torch.randperm(pages, generator=torch.Generator().manual_seed(3)).to(torch.int32)
        self.table = order.reshape(batch, max_pages).to(device)
        self.lengths = torch.zeros(batch, dtype=torch.int32, device=device)


class CkProjections:
    """The projections on ck_rs: `linear` (the residual add in its epilogue), `gated_linear`."""

    linear = staticmethod(lambda x, w, residual=None: ck_rs.linear(x, w, residual=residual))
    gated = staticmethod(ck_rs.gated_linear)


class TorchProjections:
    """The projections on torch, for a captured step: ck_rs's GEMMs read their activations
    through TMA tensor maps that live in device memory, uploaded once per new address — which
    a capture cannot do, and a graph's activations get new addresses. (Decode attention reads
    its queries without one, and the caches' maps are built by the warm-up call.)"""

    linear = staticmethod(lambda x, w, residual=None: F.linear(x, w) if residual is None else residual + F.linear(x, w))

    @staticmethod
    def gated(x, w):
        gate, up = F.linear(x, w).chunk(2, -1)
        return F.silu(gate) * up


def ck_step(tokens, m, cache, cfg, cos, sin, proj=CkProjections):
    """Logits of the new tokens `[B, sq]` (appended to the cache; lengths advanced)."""
    embed, layers, norm, head = m
    b, sq = tokens.shape
    x = embed[tokens]
    for i, w in enumerate(layers):
        h = ck_rs.rmsnorm(x, w["norm1"], cfg.eps)
        qkv = proj.linear(h, w["qkv"])
        q, k, v = qkv.split([cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim], -1)
        o = ck_rs.attention_with_kvcache(
            q.reshape(b, sq, cfg.heads, cfg.head_dim).contiguous(),
            cache.k[i],
            cache.v[i],
            cache.lengths,
            cache.table,
            k=k.reshape(b, sq, cfg.kv_heads, cfg.head_dim).contiguous(),
            v=v.reshape(b, sq, cfg.kv_heads, cfg.head_dim).contiguous(),
            rotary_cos=cos,
            rotary_sin=sin,
        )
        x = proj.linear(o.flatten(2), w["o"], residual=x)
        z = ck_rs.rmsnorm(x, w["norm2"], cfg.eps)
        x = proj.linear(proj.gated(z, w["gate_up"]), w["down"], residual=x)
    cache.lengths.add_(sq)
    return F.linear(ck_rs.rmsnorm(x, norm, cfg.eps), head)


def torch_generate(prompt, m, cfg, steps, device):
    """The reference: float32, a contiguous cache grown by concatenation, SDPA. Returns the
    greedy tokens `[B, steps]` and each step's logits `[B, steps, vocab]`."""
    embed, layers, norm, head = [t.float() if torch.is_tensor(t) else t for t in m]
    layers = [{k: t.float() for k, t in w.items()} for w in layers]
    b = prompt.shape[0]
    total = prompt.shape[1] + steps
    cos, sin = rope_tables(cfg, total, device, torch.float32)
    ks, vs = [None] * len(layers), [None] * len(layers)
    tokens, pos, out, all_logits = prompt, 0, [], []
    for _ in range(steps):
        s = tokens.shape[1]
        x = embed.float()[tokens]
        c, sn = cos[pos : pos + s], sin[pos : pos + s]
        for i, w in enumerate(layers):
            h = F.rms_norm(x, (cfg.hidden,), w["norm1"], cfg.eps)
            q = rope(F.linear(h, w["q"]).view(b, s, cfg.heads, cfg.head_dim), c, sn)
            k = rope(F.linear(h, w["k"]).view(b, s, cfg.kv_heads, cfg.head_dim), c, sn)
            v = F.linear(h, w["v"]).view(b, s, cfg.kv_heads, cfg.head_dim)
            ks[i] = k if ks[i] is None else torch.cat([ks[i], k], 1)
            vs[i] = v if vs[i] is None else torch.cat([vs[i], v], 1)
            mask = torch.ones(s, pos + s, dtype=torch.bool, device=device).tril(pos)
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), ks[i].transpose(1, 2), vs[i].transpose(1, 2), attn_mask=mask, enable_gqa=True
            )
            x = x + F.linear(o.transpose(1, 2).reshape(b, s, -1), w["o"])
            z = F.rms_norm(x, (cfg.hidden,), w["norm2"], cfg.eps)
            x = x + F.linear(F.silu(F.linear(z, w["gate"])) * F.linear(z, w["up"]), w["down"])
        logits = F.linear(F.rms_norm(x[:, -1], (cfg.hidden,), norm, cfg.eps), head)
        tokens = logits.argmax(-1, keepdim=True)
        out.append(tokens)
        all_logits.append(logits)
        pos += s
    return torch.cat(out, 1), torch.stack(all_logits, 1)


def ck_generate(prompt, m, cfg, forced, device, page_size, graphs):
    """Each step's logits `[B, steps, vocab]` from ck_rs, the step after the prompt reading
    `forced[:, i - 1]` (the reference's tokens: both models see the same sequence, so one
    near-tie cannot send them apart); on a GPU with `graphs` every step after the prompt is one
    replay of a captured step."""
    b, steps = forced.shape
    capacity = prompt.shape[1] + steps
    cache = PagedCache(cfg, len(m[1]), b, capacity, page_size, device)
    cos, sin = pair_tables(cfg, capacity, device)
    m = (m[0], [stacked(w) for w in m[1]], m[2], m[3])
    with torch.no_grad():
        out = [ck_step(prompt, m, cache, cfg, cos, sin)[:, -1].float()]
        if not graphs:
            for i in range(1, steps):
                out.append(ck_step(forced[:, i - 1 : i], m, cache, cfg, cos, sin)[:, -1].float())
            return torch.stack(out, 1)
        # The step's input buffer; one eager step first (its cache rows are written again by
        # the first replay, the lengths put back) builds the caches' tensor maps.
        token_in = forced[:, :1].clone()
        saved = cache.lengths.clone()
        step = lambda: ck_step(token_in, m, cache, cfg, cos, sin, TorchProjections)  # noqa: E731
        step()
        cache.lengths.copy_(saved)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits = step()
        for i in range(1, steps):
            token_in.copy_(forced[:, i - 1 : i])
            graph.replay()
            out.append(logits[:, -1].float().clone())
        return torch.stack(out, 1)


def agreement(ours, want_logits, want_tokens):
    """Where the reference's choice is clear (its top two logits further apart than 2 % of
    the logits' spread), ours must pick the same token. Returns (steps that differ there, clear
    steps, all steps, the logits' relative error)."""
    top2 = want_logits.topk(2, -1).values
    clear = (top2[..., 0] - top2[..., 1]) > 0.02 * want_logits.std(-1)
    differ = (ours.argmax(-1) != want_tokens) & clear
    err = ((ours - want_logits).norm() / want_logits.norm()).item()
    return int(differ.sum()), int(clear.sum()), clear.numel(), err


def check(device, steps=None):
    """ck_rs's logits against torch's on the configuration of `device` (CPU: a tiny model on the
    emulator; CUDA: a larger one, each step a graph replay): (differing clear steps, clear
    steps, steps, relative error of the logits, a description)."""
    cuda = device == "cuda"
    if cuda:
        cfg = Config(hidden=1024, heads=16, kv_heads=4, head_dim=64, mlp=2816)
        layers, vocab, batch, prompt_len, default_steps, page = 4, 4096, 4, 12, 48, 16
    else:
        cfg, layers, vocab, batch, prompt_len, default_steps, page = Config.small(), 2, 512, 2, 6, 6, 16
    steps = steps or default_steps
    m = model(cfg, layers, vocab, device)
    prompt = torch.randint(0, vocab, (batch, prompt_len), generator=torch.Generator().manual_seed(5)).to(device)
    want_tokens, want_logits = torch_generate(prompt, m, cfg, steps, device)
    ours = ck_generate(prompt, m, cfg, want_tokens, device, page, graphs=cuda)
    what = f"{batch} sequences, {prompt_len}-token prompts, {steps} greedy steps, pages of {page}" + (
        ", one CUDA graph per step" if cuda else ", on the emulator"
    )
    return (*agreement(ours, want_logits, want_tokens), what)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", action="store_true", help="run on the GPU, each step a CUDA graph replay")
    ap.add_argument("--steps", type=int, default=None)
    args = ap.parse_args()
    differ, clear, total, err, what = check("cuda" if args.cuda else "cpu", args.steps)
    print(what)
    print(f"  logits: relative error {err:.2e} against float32 torch")
    print(f"  greedy tokens: {total - differ} of {total} steps the same as torch's ({clear} with a clear choice, {differ} of those differ)")
    if differ:
        raise SystemExit("error[mismatch]: ck_rs's greedy tokens differ from torch's where its choice is clear")


if __name__ == "__main__":
    main()
