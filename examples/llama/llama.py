"""A Llama-3-style decoder layer built from ck_rs operators, next to the same layer in torch.

    python examples/llama/llama.py              # check a small layer on the CPU (the emulator)
    python examples/llama/llama.py --bench      # on a GPU: Llama-3-8B's shapes, timed
    python examples/llama/llama.py --profile    # on a GPU: where the time goes, per kernel
    python examples/llama/llama.py --bench --step     # forward + backward (a training step)
    python examples/llama/llama.py --bench --fp8      # the forward with fp8 projections too

The layers themselves are in ``ck_rs.llama`` (the package ships them, so ``python -m
ck_rs.bench --layer`` times the same code): ``ck_layer`` on ck_rs operators (RoPE in the QKV
projection's epilogue, attention reading the projection in place), ``ck_layer_rope_pass`` (RoPE
as a pass of its own, whose backward is one kernel: what ``--step`` and ``train.py`` train), and
``torch_layer``, the reference in torch ops.
"""

import argparse
import time

import torch

from ck_rs.llama import Config, bench, errors, profile


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", action="store_true", help="time Llama-3-8B's layer on the GPU")
    p.add_argument(
        "--shapes", help="B x S pairs, e.g. 1x1024,4x2048 (--bench: 1x1024,4x2048,1x8192; --profile: 4x2048)"
    )
    p.add_argument("--profile", action="store_true", help="per-kernel times of one call at each shape")
    p.add_argument("--step", action="store_true", help="--bench and --profile time forward + backward")
    p.add_argument("--fp8", action="store_true", help="--bench also times the layer with fp8 projections")
    args = p.parse_args()
    default = "4x2048" if args.profile else "1x1024,4x2048,1x8192"
    try:
        shapes = [tuple(int(v) for v in bs.split("x")) for bs in (args.shapes or default).split(",")]
        if any(len(bs) != 2 or min(bs) < 1 for bs in shapes):
            raise ValueError
    except ValueError:
        raise SystemExit(f"error[bad-shape]: --shapes {args.shapes!r}: give B x S pairs such as 1x1024,4x2048")
    if args.profile:
        for batch, seq in shapes:
            profile(Config(), batch, seq, step=args.step, top=24 if args.step else 12)
        return
    if args.bench:
        bench(Config(), shapes, step=args.step, fp8=args.fp8)
        return
    device = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.perf_counter()
    ours, theirs, ours8 = errors(Config.small(), 2, 24, device, layers=2, fp8=True)
    print(f"two small layers on {device}: relative error against float32, ck_rs {ours:.2e}, torch bfloat16 {theirs:.2e}, ck_rs with fp8 projections {ours8:.2e} ({time.perf_counter() - t0:.1f} s)")
    if not ours <= 1.5 * theirs:
        raise SystemExit(f"error[wrong-result]: the ck_rs layer's error {ours:.2e} is above torch's {theirs:.2e}")
    if not ours8 <= 0.1:
        raise SystemExit(f"error[wrong-result]: the fp8 layer's error {ours8:.2e} is above 0.1")


if __name__ == "__main__":
    main()
