//! Attention forward on the emulator against the fp64 reference (a plain softmax per row, in
//! `attention::host::reference`, compared by the operator's description), on odd lengths, both head dims, causal with `Sq ≠ Sk` (rows
//! above the corner see no key), grouped-query heads, huge logits, and `Sk = 0`; O written as
//! `[B, S, H, D]`; Q, K and V read in place from a fused QKV projection; bad shapes are errors
//! with their rule.

use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer};
use ck_kernels::attention::describe::OP;
use ck_kernels::attention::host::{attention, launch, launch_fused, Options, Shape};
use ck_kernels::op::{Dtype, HostCall, Rng};

fn shape(heads: u32, kv_heads: u32, sq: u32, sk: u32, head_dim: u32) -> Shape {
    Shape {
        batch: 1,
        heads,
        kv_heads,
        sq,
        sk,
        head_dim,
    }
}

/// Runs one problem on seeded inputs (q in [−2, 2], k and v in [−1, 1]) through the
/// operator's description and judges it by its measure: O norm-wise within 1e-2 of the fp64
/// reference, every LSE within 1e-3, −∞ exactly where a row sees no key.
fn check_on(device: &Device, s: Shape, options: Options, seed: u64) {
    let mut rng = Rng(seed);
    let (q, kv) = (s.q_len(), s.kv_len());
    let (q, k, v) = (
        rng.values(q, 2.0, 0.0),
        rng.values(kv, 1.0, 0.0),
        rng.values(kv, 1.0, 0.0),
    );
    let dims = |h| [s.batch, h, s.sq, s.head_dim].map(|x| x as usize);
    let kv_dims = [s.batch, s.kv_heads, s.sk, s.head_dim].map(|x| x as usize);
    let mut call = HostCall::new(&OP)
        .input("q", &q, &dims(s.heads))
        .input("k", &k, &kv_dims)
        .input("v", &v, &kv_dims)
        .output("lse")
        .scalar("causal", options.causal as u8 as f32)
        .scalar("o_seq_first", options.o_seq_first as u8 as f32);
    if let Some(scale) = options.scale {
        call = call.scalar("scale", scale);
    }
    let out = call.run(device).unwrap();
    let (err, tolerance) = ((OP.error)(&out), (OP.tolerance)(Dtype::Bf16));
    assert!(
        err <= tolerance,
        "{s:?} {options:?}: error {err:.3e} > {tolerance:e}"
    );
}

fn check(s: Shape, options: Options) {
    let seed = (s.sq * 31 + s.sk * 7 + s.head_dim + s.heads) as u64;
    check_on(&Device::emulator(), s, options, seed);
}

const CAUSAL: Options = Options {
    causal: true,
    scale: None,
    o_seq_first: false,
};
const FULL: Options = Options {
    causal: false,
    scale: None,
    o_seq_first: false,
};

/// Every pair of lengths in {1, 17, 130, 257} (one tile, a partial tile, two and three tiles of
/// keys), both head dims, causal and not, two query heads on one key/value head.
#[test]
fn every_length_pair_both_head_dims_causal_and_not() {
    for head_dim in [64, 128] {
        for sq in [1, 17, 130, 257] {
            for sk in [1, 17, 130, 257] {
                for options in [FULL, CAUSAL] {
                    check(shape(2, 1, sq, sk, head_dim), options);
                }
            }
        }
    }
}

/// One block (an emulator with one worker runs a persistent grid of one) walks every item:
/// its Q buffers and key/value stages turn over many times, across items of different heads
/// and of different lengths (the last query tile is partial).
#[test]
fn one_persistent_block_walks_every_item() {
    let device = Device::Emulator { workers: 1 };
    for head_dim in [64, 128] {
        let s = Shape {
            batch: 2,
            ..shape(3, 1, 300, 257, head_dim)
        };
        check_on(&device, s, FULL, 5);
    }
}

/// The grid: one block per multiprocessor without a mask, a block per item under one.
#[test]
fn persistent_without_a_mask_one_block_per_item_with_one() {
    use ck_kernels::attention::host::grid_blocks;
    assert_eq!(grid_blocks(2048, false, 132), 132);
    assert_eq!(grid_blocks(100, false, 132), 100);
    assert_eq!(grid_blocks(2048, true, 132), 2048);
}

#[test]
fn grouped_query_heads() {
    check(shape(4, 2, 130, 130, 64), CAUSAL);
    check(
        Shape {
            batch: 2,
            ..shape(3, 1, 17, 257, 128)
        },
        FULL,
    );
}

#[test]
fn huge_logits_and_an_explicit_scale() {
    // Scores up to 125 · 2 · 64 = ±16000 (Q in [−2, 2], K in [−1, 1]): exp overflows f32
    // without the running max.
    let options = Options {
        causal: false,
        scale: Some(125.0),
        o_seq_first: false,
    };
    check(shape(1, 1, 33, 257, 64), options);
}

#[test]
fn no_keys_give_zero_and_minus_infinity() {
    let s = shape(2, 1, 5, 0, 64);
    let q = vec![0.5; s.q_len()];
    let (o, lse, _) = attention(&Device::emulator(), (&q, &[], &[]), s, CAUSAL).unwrap();
    assert!(o.iter().all(|&x| x == 0.0));
    assert!(lse.iter().all(|&x| x == f32::NEG_INFINITY));
}

#[test]
fn bad_shapes_are_errors() {
    let device = Device::emulator();
    let rule = |s: Shape, q: usize, kv: usize| {
        let (q, kv) = (vec![0.0; q], vec![0.0; kv]);
        attention(&device, (&q, &kv, &kv), s, FULL)
            .unwrap_err()
            .rule()
    };
    let s = shape(2, 1, 4, 4, 96);
    assert_eq!(rule(s, s.q_len(), s.kv_len()), "head-dim-unsupported");
    let s = shape(3, 2, 4, 4, 64);
    assert_eq!(rule(s, s.q_len(), s.kv_len()), "gqa-heads");
    let s = shape(2, 1, 4, 4, 64);
    assert_eq!(rule(s, s.q_len() - 1, s.kv_len()), "shape-mismatch");
    // The kernels take the max of the raw scores: a scale that is not positive is refused.
    for scale in [0.0, -0.5, f32::INFINITY] {
        let options = Options {
            causal: false,
            scale: Some(scale),
            o_seq_first: false,
        };
        let q = vec![0.0; s.q_len()];
        let kv = vec![0.0; s.kv_len()];
        let e = attention(&device, (&q, &kv, &kv), s, options).unwrap_err();
        assert_eq!(e.rule(), "bad-scale", "scale {scale}");
    }
}

#[test]
fn o_seq_first_is_the_same_o_laid_out_for_the_output_projection() {
    // [B, H, S, D] and [B, S, H, D] outputs of one problem hold the same values; the second's
    // element (b, s, h, d) is the first's (b, h, s, d). GQA, causal, a partial query tile.
    let device = Device::emulator();
    let s = Shape {
        batch: 2,
        ..shape(4, 2, 130, 130, 64)
    };
    let mut rng = Rng(0x05f);
    let mut values =
        |n: usize| -> Vec<Bf16> { (0..n).map(|_| Bf16::from_f32(rng.f32())).collect() };
    let (q, k, v) = (values(s.q_len()), values(s.kv_len()), values(s.kv_len()));
    let up = |x: &[Bf16]| DeviceBuffer::from_slice(&device, x).unwrap();
    let (qd, kd, vd) = (up(&q), up(&k), up(&v));
    let run = |o_seq_first: bool| {
        let mut o = DeviceBuffer::<Bf16>::zeros(&device, s.q_len()).unwrap();
        let mut lse = DeviceBuffer::<f32>::zeros(&device, s.lse_len()).unwrap();
        let options = Options {
            o_seq_first,
            ..CAUSAL
        };
        launch(&device, (&qd, &kd, &vd), &mut o, &mut lse, s, options).unwrap();
        o.to_vec().unwrap()
    };
    let (heads_first, seq_first) = (run(false), run(true));
    let (h, sq, d) = (s.heads as usize, s.sq as usize, s.head_dim as usize);
    for (i, x) in heads_first.iter().enumerate() {
        let (b, hh, ss, dd) = (i / (h * sq * d), i / (sq * d) % h, i / d % sq, i % d);
        assert_eq!(
            seq_first[((b * sq + ss) * h + hh) * d + dd].0,
            x.0,
            "(b {b}, h {hh}, s {ss}, d {dd})"
        );
    }
}

#[test]
fn a_fused_qkv_projection_is_read_in_place() {
    // Q, K, V packed as one projection's output [B, S, H + 2·Hkv, D] give the bits that the
    // same Q, K, V as tensors of their own give (the separate path is checked against fp64
    // above): both head dims, causal and not, GQA, two batches, a partial query tile.
    let device = Device::emulator();
    for (d, causal) in [(64, true), (128, false)] {
        let s = Shape {
            batch: 2,
            ..shape(4, 2, 130, 130, d)
        };
        let mut rng = Rng(0xf05 ^ d as u64);
        let mut values =
            |n: usize| -> Vec<Bf16> { (0..n).map(|_| Bf16::from_f32(rng.f32())).collect() };
        let (q, k, v) = (values(s.q_len()), values(s.kv_len()), values(s.kv_len()));
        let (h, hkv, sq, dd) = (4, 2, 130, d as usize);
        let all = h + 2 * hkv;
        let mut qkv = vec![Bf16::from_f32(f32::NAN); 2 * sq * all * dd];
        for b in 0..2 {
            for t in 0..sq {
                for j in 0..all {
                    let (src, head, count) = match j {
                        j if j < h => (&q, j, h),
                        j if j < h + hkv => (&k, j - h, hkv),
                        j => (&v, j - h - hkv, hkv),
                    };
                    let from = ((b * count + head) * sq + t) * dd;
                    let to = ((b * sq + t) * all + j) * dd;
                    qkv[to..to + dd].copy_from_slice(&src[from..from + dd]);
                }
            }
        }
        let up = |x: &[Bf16]| DeviceBuffer::from_slice(&device, x).unwrap();
        let options = Options {
            o_seq_first: true,
            ..if causal { CAUSAL } else { FULL }
        };
        let mut outs = Vec::new();
        for fused in [false, true] {
            let mut o = DeviceBuffer::<Bf16>::zeros(&device, s.q_len()).unwrap();
            let mut lse = DeviceBuffer::<f32>::zeros(&device, s.lse_len()).unwrap();
            if fused {
                launch_fused(&device, &up(&qkv), &mut o, &mut lse, s, options).unwrap();
            } else {
                let (qd, kd, vd) = (up(&q), up(&k), up(&v));
                launch(&device, (&qd, &kd, &vd), &mut o, &mut lse, s, options).unwrap();
            }
            let o: Vec<u16> = o.to_vec().unwrap().iter().map(|x| x.0).collect();
            let lse: Vec<u32> = lse.to_vec().unwrap().iter().map(|x| x.to_bits()).collect();
            outs.push((o, lse));
        }
        assert!(outs[0] == outs[1], "head dim {d}: fused QKV differs");
    }
    let s = shape(2, 1, 4, 5, 64);
    let qkv = DeviceBuffer::<Bf16>::zeros(&device, 4 * 4 * 64).unwrap();
    let mut o = DeviceBuffer::<Bf16>::zeros(&device, s.q_len()).unwrap();
    let mut lse = DeviceBuffer::<f32>::zeros(&device, s.lse_len()).unwrap();
    let e = launch_fused(&device, &qkv, &mut o, &mut lse, s, FULL).unwrap_err();
    assert_eq!(e.rule(), "shape-mismatch");
}

mod varlen {
    //! Packed sequences of different lengths (`attention::varlen`) against a loop of the fp64
    //! reference over the sequences (`checks::varlen_case`), with a padded tail of NaN queries and
    //! infinite keys and values that no sequence may see.
    use super::*;
    use ck_kernels::attention::varlen::{self, Options as VarlenOptions};
    use ck_kernels::checks::{varlen_case, VarlenCase};

    fn case(seqs: &[(u32, u32)], head_dim: u32, causal: bool) -> VarlenCase {
        VarlenCase {
            heads: 4,
            kv_heads: 2,
            head_dim,
            seqs: seqs.to_vec(),
            tail: 3,
            options: VarlenOptions {
                causal,
                scale: None,
            },
        }
    }

    fn check_on(device: &Device, c: &VarlenCase) {
        let outcome = varlen_case(device, c, 0x7a1).unwrap();
        assert!(outcome.mismatch.is_none(), "{c:?}: {:?}", outcome.mismatch);
    }

    /// Ragged sequences — one row, partial tiles, more queries than keys and the reverse, no
    /// queries, no keys — both head dims, causal and not, grouped heads.
    #[test]
    fn ragged_sequences_match_the_reference_per_sequence() {
        let seqs = [(1, 1), (17, 130), (130, 17), (0, 5), (257, 200), (5, 0)];
        for head_dim in [64, 128] {
            for causal in [false, true] {
                check_on(&Device::emulator(), &case(&seqs, head_dim, causal));
            }
        }
    }

    /// One block (an emulator with one worker) walks every sequence's items: the walk over the
    /// bounds restarts nowhere, and the ring runs on across sequences.
    #[test]
    fn one_persistent_block_walks_every_sequence() {
        let device = Device::Emulator { workers: 1 };
        check_on(&device, &case(&[(130, 140), (3, 300), (129, 1)], 64, true));
    }

    /// More sequences than a warp has lanes (the walk reads 32 at a time): 70 short ones, some
    /// without queries or keys, so items lie past the first rounds of the walk.
    #[test]
    fn more_sequences_than_lanes() {
        let seqs: Vec<(u32, u32)> = (0..70).map(|i| (i % 7, (i * 3) % 11)).collect();
        check_on(&Device::emulator(), &case(&seqs, 64, true));
    }

    /// The bounds on the host are checked: a count that is not `batch + 1`, a negative start,
    /// a decrease, an end past the tensor.
    #[test]
    fn bad_bounds_are_errors() {
        let device = Device::emulator();
        let c = case(&[(4, 4), (4, 4)], 64, false);
        let s = c.shape();
        let (q, kv) = (vec![0.0; s.q_len()], vec![0.0; s.kv_len()]);
        let rule = |cu_q: &[i32], cu_k: &[i32]| {
            varlen::attention(&device, (&q, &kv, &kv), (cu_q, cu_k), s, c.options)
                .unwrap_err()
                .rule()
        };
        let good = [0, 4, 8];
        assert_eq!(rule(&[0, 4], &good), "shape-mismatch");
        assert_eq!(rule(&good, &[-1, 4, 8]), "bad-seqlens");
        assert_eq!(rule(&[0, 5, 4], &good), "bad-seqlens");
        assert_eq!(rule(&good, &[0, 4, s.total_k as i32 + 1]), "bad-seqlens");
        let s96 = varlen::Shape { head_dim: 96, ..s };
        let e = varlen::attention(&device, (&q, &kv, &kv), (&good, &good), s96, c.options);
        assert_eq!(e.unwrap_err().rule(), "head-dim-unsupported");
    }

    /// Bounds the kernel reads on the device cannot be refused: a sequence whose keys end
    /// before they start gets NaN rows, and the others are unharmed.
    #[test]
    fn bad_bounds_on_the_device_give_nan_rows() {
        let device = Device::emulator();
        let s = varlen::Shape {
            batch: 2,
            heads: 2,
            kv_heads: 2,
            total_q: 8,
            total_k: 8,
            max_sq: 4,
            head_dim: 64,
        };
        let up = |n: usize| DeviceBuffer::from_slice(&device, &vec![Bf16::from_f32(0.25); n]);
        let (qd, kd, vd) = (
            up(s.q_len()).unwrap(),
            up(s.kv_len()).unwrap(),
            up(s.kv_len()).unwrap(),
        );
        let cu_q = DeviceBuffer::from_slice(&device, &[0, 4, 8]).unwrap();
        let cu_k = DeviceBuffer::from_slice(&device, &[0, 6, 5]).unwrap();
        let mut o = DeviceBuffer::<Bf16>::zeros(&device, s.q_len()).unwrap();
        let mut lse = DeviceBuffer::<f32>::zeros(&device, s.lse_len()).unwrap();
        let options = VarlenOptions::default();
        let mut counter = DeviceBuffer::<i32>::zeros(&device, varlen::COUNTER_WORDS).unwrap();
        let mut run = || {
            varlen::launch(
                &device,
                (&qd, &kd, &vd),
                (&cu_q, &cu_k),
                &mut counter,
                &mut o,
                &mut lse,
                s,
                options,
            )
            .unwrap();
            (o.to_vec().unwrap(), lse.to_vec().unwrap())
        };
        let (o, lse) = run();
        // The kernel leaves its counter at zero: a second launch with it hands out every
        // item again (NaN rows compared by their bits).
        let bits = |(x, l): (Vec<Bf16>, Vec<f32>)| {
            let o: Vec<u16> = x.iter().map(|v| v.0).collect();
            (o, l.iter().map(|v| v.to_bits()).collect::<Vec<_>>())
        };
        assert_eq!(bits(run()), bits((o.clone(), lse.clone())));
        assert_eq!(counter.to_vec().unwrap(), [0, 0]);
        let row = 2 * 64;
        // Sequence 0: six equal keys of 0.25 · 0.25 · 64 = 4 each, values 0.25: O = 0.25,
        // LSE = 4 · 0.125 (the scale 1/8) + ln 6.
        assert!(o[..4 * row].iter().all(|x| x.to_f32() == 0.25));
        let want = 0.5 + 6f32.ln();
        for h in 0..2 {
            for i in 0..4 {
                assert!((lse[h * 8 + i] - want).abs() < 1e-4, "{}", lse[h * 8 + i]);
                assert!(lse[h * 8 + 4 + i].is_nan());
            }
        }
        assert!(o[4 * row..].iter().all(|x| x.to_f32().is_nan()));
    }

    /// On the emulator the bounds are read on the host and refused when they decrease or pass
    /// a tensor's end; `B + 1` bounds must be given for every sequence.
    #[test]
    fn bad_bounds_are_refused_by_rule() {
        let device = ck_core::host::Device::emulator();
        let call = |cu_q: &[f32], cu_k: &[f32]| {
            let (q, kv) = (vec![0.5; 4 * 64], vec![0.5; 3 * 64]);
            HostCall::new(&ck_kernels::attention::varlen_describe::OP)
                .input("q", &q, &[4, 1, 64])
                .input("k", &kv, &[3, 1, 64])
                .input("v", &kv, &[3, 1, 64])
                .input("cu_seqlens_q", cu_q, &[cu_q.len()])
                .input("cu_seqlens_k", cu_k, &[cu_k.len()])
                .scalar("max_seqlen_q", 4.0)
                .run(&device)
        };
        assert!(call(&[0.0, 2.0, 4.0], &[0.0, 1.0, 3.0]).is_ok());
        let rule = |r: Result<_, ck_core::host::LaunchError>| r.err().map(|e| e.rule());
        use ck_core::rules::{BAD_SEQLENS, SHAPE_MISMATCH};
        assert_eq!(
            rule(call(&[0.0, 3.0, 2.0], &[0.0, 1.0, 3.0])),
            Some(BAD_SEQLENS)
        );
        assert_eq!(
            rule(call(&[0.0, 2.0, 4.0], &[0.0, 1.0, 4.0])),
            Some(BAD_SEQLENS)
        );
        assert_eq!(
            rule(call(&[0.0, 2.0], &[0.0, 1.0, 3.0])),
            Some(SHAPE_MISMATCH)
        );
        assert_eq!(rule(call(&[], &[])), Some(SHAPE_MISMATCH));
    }
}

/// The backward (`attention::backward`) on the emulator against the fp64 gradient of the plain
/// softmax, through the operator's description (dQ, dK, dV each norm-wise within 2e-2).
mod backward {
    use super::shape;
    use ck_core::host::Device;
    use ck_kernels::attention::backward::describe::{seeded, OP};
    use ck_kernels::attention::backward::host::Options;
    use ck_kernels::attention::host::Shape;
    use ck_kernels::op::{Dtype, HostCall, Rng, Sizes};

    /// One problem on the description's seeded inputs (O and the log-sum-exp from the
    /// forward's fp64 reference), judged by its measure; the gradients' bits.
    fn check(s: Shape, options: Options) -> Vec<u32> {
        let seed = (s.sq * 31 + s.sk * 7 + s.head_dim + s.heads) as u64;
        let [b, h, hkv, sq, sk, d] =
            [s.batch, s.heads, s.kv_heads, s.sq, s.sk, s.head_dim].map(|x| x as usize);
        let mut sizes = Sizes::default().with("B", b).with("H", h).with("Hkv", hkv);
        sizes = sizes.with("Sq", sq).with("Sk", sk).with("D", d);
        let flags = [
            ("causal", options.causal),
            ("deterministic", options.deterministic),
            ("o_seq_first", options.o_seq_first),
        ];
        let mut call = HostCall::new(&OP);
        for (flag, on) in flags {
            if on {
                sizes = sizes.with_flag(flag);
            }
            call = call.scalar(flag, on as u8 as f32);
        }
        if let Some(scale) = options.scale {
            call = call.scalar("scale", scale);
        }
        let inputs = seeded(&sizes, options.scale, &mut Rng(seed));
        let shapes: Vec<Vec<usize>> = OP.inputs().map(|p| sizes.shape_of(p)).collect();
        for ((p, v), shape) in OP.inputs().zip(&inputs).zip(&shapes) {
            call = call.input(p.name, v, shape);
        }
        let out = call.run(&Device::emulator()).unwrap();
        let (err, tolerance) = ((OP.error)(&out), (OP.tolerance)(Dtype::Bf16));
        assert!(
            err <= tolerance,
            "{s:?} {options:?}: error {err:.3e} > {tolerance:e}"
        );
        out.outputs_concatenated()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    }

    fn options(causal: bool) -> Options {
        Options {
            causal,
            ..Options::default()
        }
    }

    /// Length pairs with partial tiles of both sizes (64 query rows, 128 keys), one key per row
    /// (every `dS` is 0), `Sq > Sk` (under the causal mask, rows above the corner see no key)
    /// and `Sq < Sk`; both head dims, causal and not, two query heads on one key/value head.
    #[test]
    fn length_pairs_both_head_dims_causal_and_not() {
        for head_dim in [64, 128] {
            for (sq, sk) in [(1, 257), (70, 1), (257, 130), (130, 257)] {
                for causal in [false, true] {
                    check(shape(2, 1, sq, sk, head_dim), options(causal));
                }
            }
        }
    }

    /// Four query heads on two key/value heads, two batches: dK and dV sum each group's heads.
    #[test]
    fn grouped_query_heads_sum_into_their_key_value_head() {
        for causal in [false, true] {
            let s = Shape {
                batch: 2,
                ..shape(4, 2, 100, 150, 64)
            };
            check(s, options(causal));
        }
    }

    /// O and dO as `[batch, sq, heads, D]` (the forward's `o_seq_first` output, the layout an
    /// output projection's gradient arrives in): the same gradients, two batches of grouped
    /// heads and both head dims.
    #[test]
    fn o_and_do_sequence_first() {
        let seq_first = |causal| Options {
            o_seq_first: true,
            ..options(causal)
        };
        let s = Shape {
            batch: 2,
            ..shape(4, 2, 100, 150, 64)
        };
        check(s, seq_first(true));
        check(shape(2, 1, 70, 257, 128), seq_first(false));
    }

    /// The deterministic mode gives the same bits on every run, however the emulator's workers
    /// interleave the blocks, and the gradients of the fast mode (up to the order of dQ's sums).
    #[test]
    fn deterministic_mode_is_bitwise_reproducible() {
        // Causal (blocks key tile by key tile across heads), and not.
        for (causal, s) in [
            (true, shape(1, 1, 200, 600, 64)),
            (false, shape(1, 1, 300, 400, 64)),
        ] {
            let det = Options {
                deterministic: true,
                ..options(causal)
            };
            let first = check(s, det);
            assert_eq!(check(s, det), first, "causal {causal}");
            let fast = check(s, options(causal));
            let max_diff = first
                .iter()
                .zip(&fast)
                .map(|(&a, &b)| (f32::from_bits(a) - f32::from_bits(b)).abs())
                .fold(0.0, f32::max);
            assert!(
                max_diff < 1e-2,
                "causal {causal}: fast and deterministic differ by {max_diff}"
            );
        }
    }

    /// No keys: dQ is zero (and dK, dV empty); no queries: dK and dV are zero. An explicit scale.
    #[test]
    fn empty_sides_and_an_explicit_scale() {
        for (sq, sk) in [(70, 0), (0, 130)] {
            let out = check(shape(2, 1, sq, sk, 64), options(true));
            assert!(out.iter().all(|&b| f32::from_bits(b) == 0.0), "{sq} × {sk}");
        }
        let scaled = Options {
            scale: Some(0.3),
            ..options(false)
        };
        check(shape(2, 2, 90, 90, 128), scaled);
    }

    /// Buffers of the wrong length and a bad scale are errors with their rule, before a launch.
    #[test]
    fn bad_inputs_are_errors() {
        use ck_core::rules;
        use ck_kernels::attention::backward::host::gradients;
        let device = Device::emulator();
        let s = shape(2, 1, 64, 64, 64);
        let q = vec![0.0; s.q_len()];
        let kv = vec![0.0; s.kv_len()];
        let lse = vec![0.0; s.lse_len()];
        let short = vec![0.0; s.q_len() - 1];
        let err = gradients(
            &device,
            (&q, &kv, &kv),
            (&q, &lse, &short),
            s,
            options(false),
        );
        assert_eq!(err.err().map(|e| e.rule()), Some(rules::SHAPE_MISMATCH));
        let bad_scale = Options {
            scale: Some(-1.0),
            ..options(false)
        };
        let err = gradients(&device, (&q, &kv, &kv), (&q, &lse, &q), s, bad_scale);
        assert_eq!(err.err().map(|e| e.rule()), Some(rules::BAD_SCALE));
        let odd = shape(2, 1, 64, 64, 96);
        let err = gradients(&device, (&q, &kv, &kv), (&q, &lse, &q), odd, options(false));
        assert_eq!(
            err.err().map(|e| e.rule()),
            Some(rules::HEAD_DIM_UNSUPPORTED)
        );
    }

    /// The fp64 reference is the gradient of the forward's: central differences of the loss
    /// `Σ dO ∘ O` (the forward's fp64 reference) agree with it, causal with `Sq < Sk` and grouped
    /// heads, every input element (on a grid of 2⁻⁸, stepped by 2⁻¹⁰: exact in f32).
    #[test]
    fn the_reference_is_the_gradient_of_the_forward() {
        use ck_kernels::attention::backward::host::reference;
        use ck_kernels::attention::host::{reference as forward, Options as Forward};
        let s = Shape {
            batch: 1,
            ..shape(2, 1, 3, 5, 64)
        };
        let grid = |i: usize, m: usize| ((i * m) % 97) as f32 / 256.0 - 0.18;
        let (q, k, v, g): (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) = (
            (0..s.q_len()).map(|i| grid(i, 7)).collect(),
            (0..s.kv_len()).map(|i| grid(i, 11)).collect(),
            (0..s.kv_len()).map(|i| grid(i, 13)).collect(),
            (0..s.q_len()).map(|i| grid(i, 5)).collect(),
        );
        let fwd = Forward {
            causal: true,
            scale: None,
            o_seq_first: false,
        };
        let loss = |q: &[f32], k: &[f32], v: &[f32]| -> f64 {
            let (o, _) = forward((q, k, v), s, fwd);
            o.iter().zip(&g).map(|(a, &b)| a * b as f64).sum()
        };
        let (dq, dk, dv) = reference((&q, &k, &v), &g, s, options(true));
        let h = 1.0 / 1024.0;
        for (which, grad) in [(0, &dq), (1, &dk), (2, &dv)] {
            for i in 0..grad.len() {
                let mut inputs = [q.clone(), k.clone(), v.clone()];
                inputs[which][i] += h;
                let up = loss(&inputs[0], &inputs[1], &inputs[2]);
                inputs[which][i] -= 2.0 * h;
                let down = loss(&inputs[0], &inputs[1], &inputs[2]);
                let numeric = (up - down) / (2.0 * h as f64);
                assert!(
                    (numeric - grad[i]).abs() < 1e-5,
                    "input {which} element {i}: {numeric} by differences, {} by the reference",
                    grad[i]
                );
            }
        }
    }
}

/// The host-side helpers the checks use: the two layouts of O and dO, and LSE's error.
mod layouts {
    use ck_kernels::attention::describe::{
        heads_first_to_seq_first, lse_error, seq_first_to_heads_first,
    };
    use ck_kernels::attention::host::Shape;

    #[test]
    fn the_seq_first_layout_maps_back_element_by_element() {
        // B 1, H 2, Sq 3, D 1: [B, Sq, H] = (s0h0, s0h1, s1h0, s1h1, s2h0, s2h1).
        let sh = Shape {
            batch: 1,
            heads: 2,
            kv_heads: 1,
            sq: 3,
            sk: 1,
            head_dim: 1,
        };
        let o = seq_first_to_heads_first(&[0.0, 10.0, 1.0, 11.0, 2.0, 12.0], sh);
        assert_eq!(o, [0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
    }

    #[test]
    fn the_two_layouts_are_inverse() {
        let sh = Shape {
            batch: 2,
            heads: 3,
            kv_heads: 1,
            sq: 5,
            sk: 1,
            head_dim: 2,
        };
        let x: Vec<f32> = (0..2 * 3 * 5 * 2).map(|i| i as f32).collect();
        let there = heads_first_to_seq_first(&x, sh);
        // Element (b 0, h 1, s 0, d 0) = 10 lands at [b 0, s 0, h 1, d 0] = index 2.
        assert_eq!(there[2], 10.0);
        assert_eq!(seq_first_to_heads_first(&there, sh), x);
    }

    #[test]
    fn a_row_without_keys_must_be_minus_infinity() {
        let inf = f64::NEG_INFINITY;
        assert_eq!(lse_error(&[f32::NEG_INFINITY, 2.0], &[inf, 2.0]), 0.0);
        assert_eq!(lse_error(&[0.0], &[inf]), f64::INFINITY);
        assert_eq!(lse_error(&[f32::NEG_INFINITY], &[1.0]), f64::INFINITY);
        assert!(lse_error(&[f32::NAN], &[1.0]).is_nan());
        // 3.003 against 3: 1e-3 relative to 3.
        assert!((lse_error(&[3.003], &[3.0]) - 1e-3).abs() < 1e-6);
    }
}
