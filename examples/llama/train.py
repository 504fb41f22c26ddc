"""Training a small Llama-style model on ck_rs operators, next to the same model on torch ops.

    python examples/llama/train.py                       # the emulator (CPU): a tiny model
    python examples/llama/train.py --size gpu            # a GPU: two layers of 2048, 64 steps
    torchrun --nproc_per_node 2 examples/llama/train.py --size gpu --ddp    # data parallel
    torchrun --nproc_per_node 2 examples/llama/train.py --size gpu --fsdp   # sharded (FSDP2)

Both models start from the same weights and see the same batches: token sequences that follow
a fixed rule (each token is the sum of the two before it, modulo the vocabulary), learnt by
next-token cross-entropy with AdamW. Layers are `ck_rs.llama.ck_layer_rope_pass` (ck_rs's rmsnorm,
linear, gated_linear, rope_qkv and attention, each with its backward) and `ck_rs.llama.torch_layer`
(torch's ops); the weights are float32 and each forward casts them to bfloat16 (the kernels'
type), so the optimiser updates float32 masters.

The run prints each step's two losses and checks that they agree within `--tolerance`
(relative), and after step 1 that every parameter's gradient from ck_rs is as close to a
float32 torch run's as torch's own bfloat16 gradient is (within 1.5× its error, plus 1e-2).
With `--ddp` (under torchrun, NCCL doing the communication through
`torch.nn.parallel.DistributedDataParallel`) or `--fsdp` (FSDP2's `fully_shard` on the whole
model, unchanged: parameters, gradients and optimiser state sharded), each rank trains on its
part of every global batch, and rank 0 then checks the losses against a single-process run of
the same global batches.
"""

import argparse
import math
import os
import time

import torch
import torch.nn.functional as F

import ck_rs
from ck_rs.llama import Config, ck_layer_rope_pass, pair_tables, rope_tables, torch_layer

SIZES = {
    # name: (Config, vocabulary, global batch, sequence, steps)
    "tiny": (Config(hidden=128, heads=2, kv_heads=1, head_dim=64, mlp=256), 64, 2, 32, 50),
    "gpu": (Config(hidden=2048, heads=16, kv_heads=4, head_dim=128, mlp=5632), 512, 8, 1024, 64),
}


class Model(torch.nn.Module):
    """An embedding, `layers` decoder layers, a final RMSNorm and an output projection; the
    layers' weights stacked as `ck_rs.llama.ck_layer_rope_pass` reads them (QKV in one `[q + 2·kv, hidden]`
    matrix, gate and up in one `[2·mlp, hidden]`), which `torch_layer` reads as views."""

    def __init__(self, cfg, vocab, layers=2, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim

        def linear(n, k):
            return torch.nn.Parameter(torch.randn(n, k, generator=g) / math.sqrt(k))

        def norm(n):
            return torch.nn.Parameter(torch.ones(n))

        self.cfg = cfg
        self.embed = torch.nn.Parameter(torch.randn(vocab, cfg.hidden, generator=g))
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            layer = torch.nn.ParameterDict(
                {
                    "norm1": norm(cfg.hidden),
                    "qkv": linear(q + 2 * kv, cfg.hidden),
                    "o": linear(cfg.hidden, q),
                    "norm2": norm(cfg.hidden),
                    "gate_up": linear(2 * cfg.mlp, cfg.hidden),
                    "down": linear(cfg.hidden, cfg.mlp),
                }
            )
            self.layers.append(layer)
        self.norm = norm(cfg.hidden)
        self.head = linear(vocab, cfg.hidden)

    def forward(self, tokens, use_ck, dtype=torch.bfloat16):
        cfg = self.cfg
        b, s = tokens.shape
        x = self.embed.to(dtype)[tokens]
        q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        if use_ck:
            cos, sin = pair_tables(cfg, s, tokens.device)
        else:
            cos, sin = rope_tables(cfg, s, tokens.device, dtype)
        for layer in self.layers:
            w = {k: t.to(dtype) for k, t in layer.items()}
            if use_ck:
                x = ck_layer_rope_pass(x, w, cfg, cos, sin)
            else:
                qkv, gate_up = w["qkv"], w["gate_up"]
                w.update(q=qkv[:q], k=qkv[q : q + kv], v=qkv[q + kv :])
                w.update(gate=gate_up[: cfg.mlp], up=gate_up[cfg.mlp :])
                x = torch_layer(x, w, cfg, cos, sin)
        if use_ck:
            x = ck_rs.rmsnorm(x, self.norm.to(dtype), cfg.eps)
            return ck_rs.linear(x, self.head.to(dtype))
        x = F.rms_norm(x, (cfg.hidden,), self.norm.to(dtype), cfg.eps)
        return F.linear(x, self.head.to(dtype))


def batch(step, size, seq, vocab, device):
    """Batch `step`: `size` sequences whose tokens are the sum of the two before, mod `vocab`
    (the first two random)."""
    g = torch.Generator().manual_seed(1000 + step)
    t = torch.zeros(size, seq + 1, dtype=torch.long)
    t[:, :2] = torch.randint(0, vocab, (size, 2), generator=g)
    for i in range(2, seq + 1):
        t[:, i] = (t[:, i - 1] + t[:, i - 2]) % vocab
    return t[:, :-1].to(device), t[:, 1:].to(device)


def loss_of(model, tokens, targets, use_ck, dtype=torch.bfloat16):
    logits = model(tokens, use_ck, dtype)
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def train(model, steps, size, seq, vocab, device, use_ck, rank=0, world=1, lr=3e-3):
    """`steps` AdamW steps; each rank takes its slice of every global batch of `size`. Returns
    the global losses (averaged over the ranks)."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    for step in range(steps):
        tokens, targets = batch(step, size, seq, vocab, device)
        part = size // world
        tokens, targets = tokens[rank * part : (rank + 1) * part], targets[rank * part : (rank + 1) * part]
        loss = loss_of(model, tokens, targets, use_ck)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        reported = loss.detach()
        if world > 1:
            torch.distributed.all_reduce(reported)
            reported /= world
        losses.append(reported.item())
    return losses


def gradient_check(cfg, vocab, size, seq, device):
    """After one backward from the same weights: each parameter's gradient, ck_rs (bfloat16)
    and torch (bfloat16), against torch in float32. Returns rows (name, ck error, torch error)."""
    models = {k: Model(cfg, vocab).to(device) for k in ("ck", "torch", "f32")}
    tokens, targets = batch(0, size, seq, vocab, device)
    for key, m in models.items():
        dtype = torch.float32 if key == "f32" else torch.bfloat16
        loss_of(m, tokens, targets, key == "ck", dtype).backward()
    rows = []
    named = {k: dict(m.named_parameters()) for k, m in models.items()}
    for name, want in named["f32"].items():
        err = lambda p: ((p.grad - want.grad).norm() / want.grad.norm().clamp_min(1e-30)).item()
        rows.append((name, err(named["ck"][name]), err(named["torch"][name])))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=SIZES, default="tiny")
    p.add_argument("--steps", type=int, help="training steps (default: the size's)")
    p.add_argument("--tolerance", type=float, default=0.05, help="largest relative loss difference")
    p.add_argument("--ddp", action="store_true", help="data parallel under torchrun")
    p.add_argument("--fsdp", action="store_true", help="sharded data parallel (FSDP2) under torchrun")
    args = p.parse_args()
    cfg, vocab, size, seq, steps = SIZES[args.size]
    steps = args.steps or steps
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.ddp or args.fsdp:
        return distributed(cfg, vocab, size, seq, steps, args.tolerance, "FSDP2" if args.fsdp else "DDP")
    t0 = time.perf_counter()
    bad, curves = compare(args.size, steps, device, log=print)
    worst = max(abs(a - b) / abs(b) for a, b in zip(*curves))
    print(f"{args.size}: {steps} steps on {device} in {time.perf_counter() - t0:.1f} s; worst loss difference {worst:.2e}, final loss {curves[0][-1]:.3f} from {curves[0][0]:.3f}")
    if bad:
        raise SystemExit(f"error[wrong-result]: gradients of {', '.join(bad)} are further from float32 than torch's")
    if worst > args.tolerance:
        raise SystemExit(f"error[wrong-result]: the loss curves differ by {worst:.2e} > {args.tolerance}")


def compare(size_name, steps, device, log=lambda *_: None):
    """The parameters whose ck_rs gradient after one backward is further from float32 than
    1.5× torch bfloat16's (plus 1e-2), and the loss curves of `steps` steps (ck_rs, torch)."""
    cfg, vocab, size, seq, _ = SIZES[size_name]
    bad = []
    for name, ck, th in gradient_check(cfg, vocab, size, seq, device):
        ok = ck <= 1.5 * th + 1e-2
        bad += [] if ok else [name]
        log(f"gradient {name:>22}: ck_rs {ck:.2e}, torch bf16 {th:.2e} against float32{'' if ok else '  <-- too far'}")
    curves = []
    for use_ck in (True, False):
        model = Model(cfg, vocab).to(device)
        curves.append(train(model, steps, size, seq, vocab, device, use_ck))
    for i, (a, b) in enumerate(zip(*curves)):
        log(f"step {i + 1:3d}: loss ck_rs {a:.4f}, torch {b:.4f} ({abs(a - b) / abs(b):.1e})")
    return bad, curves


def distributed(cfg, vocab, size, seq, steps, tolerance, mode):
    """The ck_rs model on every rank (one GPU each) under DistributedDataParallel (`DDP`) or
    FSDP2's `fully_shard` on the whole model (`FSDP2`: parameters, gradients and optimiser
    state sharded, gathered for each forward and backward); rank 0 then trains it alone on the
    same global batches and compares the losses."""
    torch.distributed.init_process_group("nccl")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    if mode == "DDP":
        model = torch.nn.parallel.DistributedDataParallel(Model(cfg, vocab).to(device), device_ids=[rank])
    else:
        from torch.distributed.fsdp import fully_shard

        model = fully_shard(Model(cfg, vocab).to(device))
    t0 = time.perf_counter()
    losses = train(model, steps, size, seq, vocab, device, True, rank, world)
    elapsed = time.perf_counter() - t0
    torch.distributed.barrier()
    if rank == 0:
        alone = train(Model(cfg, vocab).to(device), steps, size, seq, vocab, device, True)
        worst = max(abs(a - b) / abs(b) for a, b in zip(losses, alone))
        for i in range(0, steps, max(1, steps // 8)):
            print(f"step {i + 1:3d}: loss {mode}×{world} {losses[i]:.4f}, one GPU {alone[i]:.4f}")
        print(f"{mode} on {world} GPUs: {steps} steps in {elapsed:.1f} s; worst loss difference from one GPU {worst:.2e}")
        if worst > tolerance:
            raise SystemExit(f"error[wrong-result]: {mode}'s losses differ from one GPU's by {worst:.2e}")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
