//! `attention_varlen`, attention over sequences of different lengths packed end to end
//! ([`super::varlen`], FlashAttention's varlen contract), as an operator of the registry: what
//! `ck run attention-varlen` (`.npy` files), `ck run attention-varlen-bf16 --n N` (a seeded
//! check), `ck cross-check` and `ck_rs.attention_varlen` call.
//!
//! The bounds are int32 tensors `[B + 1]` (each sequence's first row, then the end) that the
//! kernel reads on the device; where they are in host memory (the emulator) they are checked
//! first (`bad-seqlens`). Rows past the last sequence are neither read nor written.
//!
//! For example two sequences of one query row each, the first against keys all 1 (values all
//! 2), the second against no keys at all:
//!
//! ```
//! use ck_kernels::op::HostCall;
//! let device = ck_core::host::Device::emulator();
//! let out = HostCall::new(&ck_kernels::attention::varlen_describe::OP)
//!     .input("q", &[1.0; 128], &[2, 1, 64])
//!     .input("k", &[1.0; 64], &[1, 1, 64])
//!     .input("v", &[2.0; 64], &[1, 1, 64])
//!     .input("cu_seqlens_q", &[0.0, 1.0, 2.0], &[3])
//!     .input("cu_seqlens_k", &[0.0, 1.0, 1.0], &[3])
//!     .scalar("max_seqlen_q", 1.0)
//!     .output("lse")
//!     .run(&device)
//!     .unwrap();
//! let (o, lse) = (out.output("o").unwrap(), out.output("lse").unwrap());
//! // One key: p = 1, o = v; lse = score = 64 / √64 = 8. No key: o = 0, lse = −∞.
//! assert!(o[..64].iter().all(|&x| x == 2.0) && o[64..].iter().all(|&x| x == 0.0));
//! assert_eq!((lse[0], lse[1]), (8.0, f32::NEG_INFINITY));
//! ```

use super::describe::{launch_bf16, lse_error, LSE_TOLERANCE, O_TOLERANCE};
use super::varlen::{check_bounds, launch, reference, Options, Shape, COUNTER_WORDS};
use crate::op::{
    norm_relative_error, tensor, worst, Dim, Dtype, Elem, HostOutput, Op, Param, Rng, Role, Scalar,
    ScalarRule, Sizes,
};
use ck_core::host::LaunchError;

const TQ: Dim = Dim::Sym("Tq");
const TK: Dim = Dim::Sym("Tk");
const H: Dim = Dim::Sym("H");
const HKV: Dim = Dim::Sym("Hkv");
const D: Dim = Dim::Sym("D");
const BOUNDS: Dim = Dim::Sym("B1");

/// `attention_varlen`: O (and the row log-sum-exp) of every packed sequence, [`launch`].
pub const OP: Op = Op {
    name: "attention_varlen",
    summary: "Attention over sequences of different lengths packed end to end (varlen)",
    params: &[
        tensor(
            "q",
            (Role::Input, Elem::Op),
            &[TQ, H, D],
            "q, [total_q, H, D]: the sequences' query rows end to end (D 64 or 128)",
        ),
        tensor(
            "k",
            (Role::Input, Elem::Op),
            &[TK, HKV, D],
            "k, [total_k, Hkv, D] (Hkv dividing H)",
        ),
        tensor(
            "v",
            (Role::Input, Elem::Op),
            &[TK, HKV, D],
            "v, [total_k, Hkv, D]",
        ),
        Param {
            flag: "cu-seqlens-q",
            ..tensor(
                "cu_seqlens_q",
                (Role::Input, Elem::I32),
                &[BOUNDS],
                "each sequence's first query row, then the end, [B + 1] (int32)",
            )
        },
        Param {
            flag: "cu-seqlens-k",
            ..tensor(
                "cu_seqlens_k",
                (Role::Input, Elem::I32),
                &[BOUNDS],
                "each sequence's first key row, then the end, [B + 1] (int32)",
            )
        },
        Param {
            flag: "output",
            ..tensor(
                "o",
                (Role::Output, Elem::Op),
                &[TQ, H, D],
                "o, [total_q, H, D]",
            )
        },
        tensor(
            "lse",
            (Role::OptionalOutput, Elem::F32),
            &[H, TQ],
            "the row log-sum-exp, [H, total_q] (−∞ for a row that sees no key)",
        ),
        tensor(
            "counter",
            (Role::Scratch, Elem::I32),
            &[Dim::Sym("Words")],
            "the scheduler's counter (zeros; the kernel leaves it zero)",
        ),
    ],
    scalars: &[
        Scalar {
            name: "max_seqlen_q",
            default: None,
            rule: ScalarRule::Count("MaxSq"),
            doc: "the longest sequence's query rows (it sizes the grid)",
        },
        super::describe::SCALE,
        super::describe::CAUSAL,
    ],
    dtypes: &[Dtype::Bf16, Dtype::F32],
    constraints: |s| {
        let b1 = s.get("B1");
        if b1 == 0 {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_MISMATCH,
                "the bounds are empty; give [B + 1] entries: each sequence's first row, then the end (0 for no sequence)".into(),
            ));
        }
        s.derive("B", b1 - 1);
        s.derive("Words", COUNTER_WORDS);
        shape(s).check()
    },
    launch: |d, l| {
        let (shape, options) = (shape(&l.sizes), options(&|f| l.flag(f), l.given("scale")));
        let cu_q = l.take::<i32>(d, "cu_seqlens_q")?;
        let cu_k = l.take::<i32>(d, "cu_seqlens_k")?;
        if d.is_emulator() {
            // The bounds are in host memory: refuse bad ones rather than write NaN rows.
            check_bounds(&cu_q.to_vec()?, &cu_k.to_vec()?, &shape)?;
        }
        let mut counter = l.scratch::<i32>(d, "counter")?;
        let lens = (shape.q_len(), shape.lse_len());
        let launched = launch_bf16(d, l, &["q", "k", "v"], lens, |d, x, o, lse| {
            let bounds = (&cu_q, &cu_k);
            launch(
                d,
                (x[0], x[1], x[2]),
                bounds,
                &mut counter,
                o,
                lse,
                shape,
                options,
            )
        });
        l.put("cu_seqlens_q", cu_q);
        l.put("cu_seqlens_k", cu_k);
        l.put("counter", counter);
        launched
    },
    sample,
    error,
    tolerance: |_| O_TOLERANCE,
    agreement: norm_relative_error,
    cases,
    bytes: |s, d| {
        let sh = shape(s);
        (2 * sh.q_len() + 2 * sh.kv_len()) as f64 * d.bytes() as f64
    },
};

fn shape(s: &Sizes) -> Shape {
    Shape {
        batch: s.u32("B"),
        heads: s.u32("H"),
        kv_heads: s.u32("Hkv"),
        total_q: s.u32("Tq"),
        total_k: s.u32("Tk"),
        max_sq: s.u32("MaxSq"),
        head_dim: s.u32("D"),
    }
}

fn options(flag: &dyn Fn(&str) -> bool, scale: Option<f32>) -> Options {
    Options {
        causal: flag("causal"),
        scale,
    }
}

/// The bounds of `batch` sequences of seeded lengths (queries at most `max_q` each) within
/// `total_q` and `total_k` rows, then Q in [−2, 2], K and V in [−1, 1] over the sequences' rows
/// and, past the last sequence, NaN queries and infinite keys and values (what no sequence may
/// read).
fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
    let sh = shape(s);
    let mut bounds = |total: u32, longest: u32| {
        let mut cu = vec![0u32];
        for _ in 0..sh.batch {
            let at = *cu.last().expect("starts at 0");
            let len = (rng.bits() % (longest as u64 + 1)) as u32;
            cu.push(at + len.min(total - at));
        }
        cu
    };
    let cu_q = bounds(sh.total_q, sh.max_sq);
    let cu_k = bounds(sh.total_k, sh.total_k / sh.batch.max(1) * 2);
    let mut rows = |total: u32, heads: u32, used: u32, amp: f32, past: f32| -> Vec<f32> {
        let row = (heads * sh.head_dim) as usize;
        let mut v = rng.values(total as usize * row, amp, 0.0);
        v[used as usize * row..].fill(past);
        v
    };
    let (used_q, used_k) = (cu_q[sh.batch as usize], cu_k[sh.batch as usize]);
    let as_f32 = |cu: Vec<u32>| cu.into_iter().map(|x| x as f32).collect();
    vec![
        rows(sh.total_q, sh.heads, used_q, 2.0, f32::NAN),
        rows(sh.total_k, sh.kv_heads, used_k, 1.0, f32::INFINITY),
        rows(sh.total_k, sh.kv_heads, used_k, 1.0, f32::INFINITY),
        as_f32(cu_q),
        as_f32(cu_k),
    ]
}

/// O's norm-wise error over the sequences' rows against the per-sequence fp64 reference (on
/// the inputs rounded to bf16), or
/// the LSE's in O's units where larger; infinite where a bf16 call wrote a row past the last
/// sequence (an f32 call's O is widened from a buffer of its own).
fn error(out: &HostOutput) -> f64 {
    let (sh, options) = (
        shape(&out.sizes),
        options(&|f| out.flag(f), out.given("scale")),
    );
    let bounds = |name| -> Vec<i32> { out.input(name).iter().map(|&x| x as i32).collect() };
    let (cu_q, cu_k) = (bounds("cu_seqlens_q"), bounds("cu_seqlens_k"));
    // The kernels read bf16: an f32 call's values are rounded on the way in.
    let bf16 = |name| -> Vec<f32> {
        out.input(name)
            .iter()
            .map(|&v| Dtype::Bf16.round(v))
            .collect()
    };
    let (q, k, v) = (bf16("q"), bf16("k"), bf16("v"));
    let (want_o, want_lse) = reference((&q, &k, &v), (&cu_q, &cu_k), sh, options);
    let Some(o) = out.output("o") else {
        return f64::NAN;
    };
    let row = (sh.heads * sh.head_dim) as usize;
    let used = cu_q[sh.batch as usize] as usize;
    let (seq_o, past_o) = o.split_at(used * row);
    if out.dtype == Dtype::Bf16 && past_o.iter().any(|x| !x.is_nan()) {
        return f64::INFINITY;
    }
    let o_err = norm_relative_error(seq_o, &want_o[..used * row]);
    let lse_err = out.output("lse").map_or(0.0, |lse| {
        // [H, total_q]: the sequences' rows of each head.
        let total = sh.total_q as usize;
        let pick = |i: &usize| i % total < used;
        let got: Vec<f32> = (0..lse.len()).filter(pick).map(|i| lse[i]).collect();
        let want: Vec<f64> = (0..lse.len()).filter(pick).map(|i| want_lse[i]).collect();
        lse_error(&got, &want)
    });
    worst(o_err, lse_err * (O_TOLERANCE / LSE_TOLERANCE))
}

/// `ck run attention-varlen-DTYPE --n N`: 8 sequences of up to N query rows (at most 4096)
/// against about as many keys, 4 query heads on 2, head dim 128, causal. `ck cross-check`:
/// both head dims, empty sequences and rows past the last one, causal with more queries than
/// keys.
fn cases(n: Option<u32>) -> Vec<Sizes> {
    let problem = |b: usize, (tq, tk, max_q): (usize, usize, usize), d: usize| {
        // B and the counter's words as the constraints derive them.
        let s = Sizes::default()
            .with("B1", b + 1)
            .with("B", b)
            .with("Words", COUNTER_WORDS);
        let s = s.with("Tq", tq).with("Tk", tk);
        s.with("MaxSq", max_q)
            .with("H", 4)
            .with("Hkv", 2)
            .with("D", d)
    };
    match n {
        Some(n) => {
            let len = n.clamp(1, 4096) as usize;
            vec![problem(8, (8 * len, 8 * len, len), 128).with_flag("causal")]
        }
        None => vec![
            problem(3, (300, 260, 200), 64).with_flag("causal"),
            problem(4, (190, 400, 130), 128),
        ],
    }
}
