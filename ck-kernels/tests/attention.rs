//! Attention forward on the emulator against the fp64 reference (a plain softmax per row, in
//! `attention::host::reference`), on odd lengths, both head dims, causal with `Sq ≠ Sk` (rows
//! above the corner see no key), grouped-query heads, huge logits, and `Sk = 0`; bad shapes are
//! errors with their rule.

use ck_core::device::Bf16;
use ck_core::host::Device;
use ck_kernels::attention::host::{attention, reference, Options, Shape};
use ck_kernels::checks::Rng;

/// Values in `[−amp, amp]`, rounded to bf16 (what the kernel sees).
fn tensor(len: usize, amp: f32, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..len)
        .map(|_| Bf16::from_f32(amp * rng.f32()).to_f32())
        .collect()
}

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

/// Runs one problem and checks O norm-wise (relative 1e-2) and every LSE (1e-3 relative to
/// max(1, |LSE|); −∞ exactly where the reference has a row with no key).
fn check(s: Shape, options: Options, q_amp: f32) {
    let seed = (s.sq * 31 + s.sk * 7 + s.head_dim + s.heads) as u64;
    let q = tensor(s.q_len(), q_amp, seed);
    let k = tensor(s.kv_len(), 1.0, seed + 1);
    let v = tensor(s.kv_len(), 1.0, seed + 2);
    let (o, lse, _) = attention(&Device::emulator(), (&q, &k, &v), s, options).unwrap();
    let (want_o, want_lse) = reference((&q, &k, &v), s, options);
    let err: f64 = o
        .iter()
        .zip(&want_o)
        .map(|(&g, w)| (g as f64 - w).powi(2))
        .sum();
    let norm: f64 = want_o.iter().map(|w| w * w).sum();
    assert!(
        err.sqrt() <= 1e-2 * norm.sqrt().max(1e-30),
        "{s:?} {options:?}: O off by {:.3e} (norm {:.3e})",
        err.sqrt(),
        norm.sqrt()
    );
    for (i, (&g, &w)) in lse.iter().zip(&want_lse).enumerate() {
        let ok = if w == f64::NEG_INFINITY {
            g == f32::NEG_INFINITY
        } else {
            (g as f64 - w).abs() <= 1e-3 * w.abs().max(1.0)
        };
        assert!(ok, "{s:?} {options:?}: LSE of row {i} is {g}, expected {w}");
    }
}

const CAUSAL: Options = Options {
    causal: true,
    scale: None,
};
const FULL: Options = Options {
    causal: false,
    scale: None,
};

/// Every pair of lengths in {1, 17, 130, 257} (one tile, a partial tile, two and three tiles of
/// keys), both head dims, causal and not, two query heads on one key/value head.
#[test]
fn every_length_pair_both_head_dims_causal_and_not() {
    for head_dim in [64, 128] {
        for sq in [1, 17, 130, 257] {
            for sk in [1, 17, 130, 257] {
                for options in [FULL, CAUSAL] {
                    check(shape(2, 1, sq, sk, head_dim), options, 2.0);
                }
            }
        }
    }
}

#[test]
fn grouped_query_heads() {
    check(shape(4, 2, 130, 130, 64), CAUSAL, 1.0);
    check(
        Shape {
            batch: 2,
            ..shape(3, 1, 17, 257, 128)
        },
        FULL,
        1.0,
    );
}

#[test]
fn huge_logits_and_an_explicit_scale() {
    // Scores up to ±8000: exp overflows f32 without the running max.
    let options = Options {
        causal: false,
        scale: Some(125.0),
    };
    check(shape(1, 1, 33, 257, 64), options, 8.0);
}

#[test]
fn no_keys_give_zero_and_minus_infinity() {
    let s = shape(2, 1, 5, 0, 64);
    let q = tensor(s.q_len(), 1.0, 3);
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
}
