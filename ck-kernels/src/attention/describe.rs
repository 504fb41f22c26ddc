//! The attention forward as operators of the registry ([`OP`] on Q, K and V; [`QKV`] on a fused
//! projection's output; listed in [`super::OPS`] with the packed-sequence operator,
//! [`super::varlen_describe`], and the backward): what `ck run attention` (`.npy` files),
//! `ck run attention-bf16 --n N` (a seeded check), `ck cross-check`, `ck bench attention` and
//! `ck_rs.attention` / `ck_rs.attention_qkv` call.
//!
//! For example one query row against two keys (`D = 64`, the default scale `1/√64 = 1/8`): q
//! is all 1, key 0 all 1 (score 64/8 = 8), key 1 all 0 (score 0); values all 1 and all 3:
//!
//! ```
//! use ck_kernels::op::HostCall;
//! let device = ck_core::host::Device::emulator();
//! let q = [1.0; 64];
//! let k: Vec<f32> = (0..128).map(|i| if i < 64 { 1.0 } else { 0.0 }).collect();
//! let v: Vec<f32> = (0..128).map(|i| if i < 64 { 1.0 } else { 3.0 }).collect();
//! let out = HostCall::new(&ck_kernels::attention::describe::OP)
//!     .input("q", &q, &[1, 1, 1, 64])
//!     .input("k", &k, &[1, 1, 2, 64])
//!     .input("v", &v, &[1, 1, 2, 64])
//!     .output("lse")
//!     .run(&device)
//!     .unwrap();
//! // p = softmax(8, 0) = (0.999665, 0.000335): o = 1 · p₀ + 3 · p₁ = 1.000671 (bf16: 1.0);
//! // lse = ln(e⁸ + 1) = 8.000335.
//! assert_eq!(out.output("o").unwrap()[0], 1.0);
//! assert!((out.output("lse").unwrap()[0] - 8.000_335).abs() < 1e-3);
//! ```

use super::host::{self, Options, Shape};
use crate::op::{
    norm_relative_error, worst, Dim, Dtype, Elem, HostOutput, Launch, Launched, Op, Param, Rng,
    Role, Scalar, ScalarRule, Sizes,
};
use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer, LaunchError};

pub(crate) const B: Dim = Dim::Sym("B");
pub(crate) const H: Dim = Dim::Sym("H");
pub(crate) const HKV: Dim = Dim::Sym("Hkv");
pub(crate) const SQ: Dim = Dim::Sym("Sq");
pub(crate) const SK: Dim = Dim::Sym("Sk");
pub(crate) const D: Dim = Dim::Sym("D");
const S: Dim = Dim::Sym("S");

/// A tensor of the call's element type.
pub(crate) const fn tensor(
    name: &'static str,
    role: Role,
    dims: &'static [Dim],
    doc: &'static str,
) -> Param {
    crate::op::tensor(name, (role, Elem::Op), dims, doc)
}

/// O within 1e-2 norm-wise of fp64 on the bf16-rounded inputs (bf16 O and P).
pub const O_TOLERANCE: f64 = 1e-2;
/// The log-sum-exp within 1e-3 of fp64, relative to max(1, |LSE|).
pub const LSE_TOLERANCE: f64 = 1e-3;

pub(crate) const SCALE: Scalar = Scalar {
    name: "scale",
    default: None,
    rule: ScalarRule::Positive,
    doc: "the scores' scale [default: 1/√D]",
};

pub(crate) const CAUSAL: Scalar = Scalar {
    name: "causal",
    default: Some(0.0),
    rule: ScalarRule::Flag,
    doc: "query row i sees keys j ≤ i + Sk − Sq (the mask aligned bottom-right)",
};

/// `attention`: `o = softmax(scale · q·kᵀ + mask) · v` and the row log-sum-exp.
pub const OP: Op = Op {
    name: "attention",
    summary: "Attention forward: o = softmax(scale · q·kᵀ + mask) · v and the row log-sum-exp",
    params: &[
        tensor(
            "q",
            Role::Input,
            &[B, H, SQ, D],
            "q, [B, H, Sq, D] (D 64 or 128)",
        ),
        tensor(
            "k",
            Role::Input,
            &[B, HKV, SK, D],
            "k, [B, Hkv, Sk, D] (Hkv dividing H: grouped-query attention)",
        ),
        tensor("v", Role::Input, &[B, HKV, SK, D], "v, [B, Hkv, Sk, D]"),
        Param {
            name: "o",
            flag: "output",
            role: Role::Output,
            elem: Elem::Op,
            dims: &[B, H, SQ, D],
            alt: Some(("o_seq_first", &[B, SQ, H, D])),
            doc: "o, [B, H, Sq, D] ([B, Sq, H, D] with o_seq_first)",
        },
        Param {
            name: "lse",
            flag: "lse",
            role: Role::OptionalOutput,
            elem: Elem::F32,
            dims: &[B, H, SQ],
            alt: None,
            doc: "the row log-sum-exp, [B, H, Sq] (−∞ for a row that sees no key)",
        },
    ],
    scalars: &[
        SCALE,
        CAUSAL,
        Scalar {
            name: "o_seq_first",
            default: Some(0.0),
            rule: ScalarRule::Flag,
            doc: "o as [B, Sq, H, D], what an output projection reads as [B·Sq, H·D]",
        },
    ],
    // The kernels read bf16; f32 values are rounded to it on the way in, o widened on the way out.
    dtypes: &[Dtype::Bf16, Dtype::F32],
    constraints: |s| shape(s).check(),
    launch,
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

/// `attention_qkv`: [`OP`] on a fused QKV projection's output read in place,
/// [`host::launch_fused`].
pub const QKV: Op = Op {
    name: "attention_qkv",
    summary: "Attention forward on a fused QKV projection's output, read in place",
    params: &[
        tensor(
            "qkv",
            Role::Input,
            &[B, S, Dim::Sym("Hall"), D],
            "qkv, [B, S, H + 2·Hkv, D]: each token's query, key and value heads",
        ),
        Param {
            name: "o",
            flag: "output",
            role: Role::Output,
            elem: Elem::Op,
            dims: &[B, S, H, D],
            alt: None,
            doc: "o, [B, S, H, D] (flattened, [B, S, H·D]: what the output projection reads)",
        },
        Param {
            name: "lse",
            flag: "lse",
            role: Role::OptionalOutput,
            elem: Elem::F32,
            dims: &[B, H, S],
            alt: None,
            doc: "the row log-sum-exp, [B, H, S]",
        },
    ],
    scalars: &[
        Scalar {
            name: "heads",
            default: None,
            rule: ScalarRule::Count("H"),
            doc: "H, the query heads",
        },
        Scalar {
            name: "kv_heads",
            default: None,
            rule: ScalarRule::Count("Hkv"),
            doc: "Hkv, the key/value heads (dividing H)",
        },
        SCALE,
        CAUSAL,
    ],
    dtypes: &[Dtype::Bf16, Dtype::F32],
    constraints: |s| {
        let (all, h, hkv) = (s.get("Hall"), s.get("H"), s.get("Hkv"));
        if all != h + 2 * hkv {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_MISMATCH,
                format!(
                    "`qkv` stacks {all} heads; heads + 2·kv_heads is {}",
                    h + 2 * hkv
                ),
            ));
        }
        fused_shape(s).check()
    },
    launch: |d, l| {
        let shape = fused_shape(&l.sizes);
        let options = Options {
            o_seq_first: true,
            ..options(|f| l.flag(f), l.given("scale"))
        };
        let lens = (shape.q_len(), shape.lse_len());
        launch_bf16(d, l, &["qkv"], lens, |d, x, o, lse| {
            host::launch_fused(d, x[0], o, lse, shape, options)
        })
    },
    sample: |s, rng| {
        let len: usize = [s.get("B"), s.get("S"), s.get("Hall"), s.get("D")]
            .iter()
            .product();
        vec![rng.values(len, 1.5, 0.0)]
    },
    error: |out| {
        let sh = fused_shape(&out.sizes);
        let options = Options {
            o_seq_first: true,
            ..options(|f| out.flag(f), out.given("scale"))
        };
        let (q, k, v) = unstack(out.input("qkv"), sh);
        judge(out, (&q, &k, &v), sh, options)
    },
    tolerance: |_| O_TOLERANCE,
    agreement: norm_relative_error,
    cases: |n| {
        let problem = |b: usize, s: usize, (h, hkv): (usize, usize), d: usize| {
            let sizes = Sizes::default()
                .with("B", b)
                .with("S", s)
                .with("Hall", h + 2 * hkv);
            sizes.with("H", h).with("Hkv", hkv).with("D", d)
        };
        match n {
            Some(n) => vec![problem(1, n.clamp(1, 4096) as usize, (4, 2), 128).with_flag("causal")],
            None => vec![
                problem(2, 130, (2, 1), 64).with_flag("causal"),
                problem(1, 257, (4, 2), 128),
            ],
        }
    },
    bytes: |s, d| {
        let sh = fused_shape(s);
        let qkv = sh.q_len() + 2 * sh.kv_len();
        (qkv + sh.q_len()) as f64 * d.bytes() as f64
    },
};

/// The fused problem of bound sizes: one sequence length `S` for queries and keys.
fn fused_shape(s: &Sizes) -> Shape {
    Shape {
        batch: s.u32("B"),
        heads: s.u32("H"),
        kv_heads: s.u32("Hkv"),
        sq: s.u32("S"),
        sk: s.u32("S"),
        head_dim: s.u32("D"),
    }
}

/// Q, K and V as `[B, H(kv), S, D]` from `qkv` `[B, S, H + 2·Hkv, D]`.
fn unstack(qkv: &[f32], sh: Shape) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let [h, hkv, s, d] = [sh.heads, sh.kv_heads, sh.sq, sh.head_dim].map(|x| x as usize);
    let all = h + 2 * hkv;
    let heads = |first: usize, count: usize| -> Vec<f32> {
        let mut out = Vec::with_capacity(qkv.len() / all * count);
        for b in 0..sh.batch as usize {
            for head in first..first + count {
                for t in 0..s {
                    out.extend_from_slice(&qkv[((b * s + t) * all + head) * d..][..d]);
                }
            }
        }
        out
    };
    (heads(0, h), heads(h, hkv), heads(h + hkv, hkv))
}

/// The problem of bound sizes.
pub(crate) fn shape(s: &Sizes) -> Shape {
    Shape {
        batch: s.u32("B"),
        heads: s.u32("H"),
        kv_heads: s.u32("Hkv"),
        sq: s.u32("Sq"),
        sk: s.u32("Sk"),
        head_dim: s.u32("D"),
    }
}

/// The options every attention operator has (`causal`, `scale`), O in `[B, H, Sq, D]`.
fn options(flag: impl Fn(&str) -> bool, scale: Option<f32>) -> Options {
    Options {
        causal: flag("causal"),
        scale,
        o_seq_first: false,
    }
}

/// [`OP`]'s options: O's layout is its flag.
fn options_of(flag: impl Fn(&str) -> bool, scale: Option<f32>) -> Options {
    Options {
        o_seq_first: flag("o_seq_first"),
        ..options(flag, scale)
    }
}

fn launch(d: &Device, l: &mut Launch) -> Launched {
    let (shape, options) = (shape(&l.sizes), options_of(|f| l.flag(f), l.given("scale")));
    let lens = (shape.q_len(), shape.lse_len());
    launch_bf16(d, l, &["q", "k", "v"], lens, |d, x, o, lse| {
        host::launch(d, (x[0], x[1], x[2]), o, lse, shape, options)
    })
}

/// Runs `kernel` on the inputs `names` as bf16 buffers, `o` and the log-sum-exp: a bf16 call's
/// own buffers, an f32 call's rounded on the host (and `o` widened back); a log-sum-exp not
/// asked for goes to a scratch buffer (the kernels write it either way). `lens`: O's and the
/// log-sum-exp's elements.
pub(super) fn launch_bf16(
    d: &Device,
    l: &mut Launch,
    names: &[&str],
    (o_len, lse_len): (usize, usize),
    kernel: impl FnOnce(
        &Device,
        &[&DeviceBuffer<Bf16>],
        &mut DeviceBuffer<Bf16>,
        &mut DeviceBuffer<f32>,
    ) -> Launched,
) -> Launched {
    let mut lse = l.take::<f32>(d, "lse")?;
    if lse.is_empty() {
        lse = DeviceBuffer::zeros(d, lse_len)?;
    }
    let stats = match l.dtype {
        Dtype::Bf16 => {
            let mut o = l.take::<Bf16>(d, "o")?;
            let inputs = names.iter().map(|n| l.input::<Bf16>(n));
            let inputs = inputs.collect::<Result<Vec<_>, _>>()?;
            let stats = kernel(d, &inputs, &mut o, &mut lse);
            l.put("o", o);
            stats
        }
        Dtype::F32 => {
            let rounded = names
                .iter()
                .map(|n| host::upload_bf16(d, &l.input::<f32>(n)?.to_vec()?))
                .collect::<Result<Vec<_>, _>>()?;
            let mut ob = DeviceBuffer::<Bf16>::zeros(d, o_len)?;
            let stats = kernel(d, &rounded.iter().collect::<Vec<_>>(), &mut ob, &mut lse)?;
            let wide: Vec<f32> = ob.to_vec()?.iter().map(|x| x.to_f32()).collect();
            let mut o = l.take::<f32>(d, "o")?;
            o.copy_from(&DeviceBuffer::from_slice(d, &wide)?)?;
            l.put("o", o);
            Ok(stats)
        }
    };
    l.put("lse", lse);
    stats
}

/// q in [−2, 2] (peaked rows), k and v in [−1, 1].
fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
    let sh = shape(s);
    vec![
        rng.values(sh.q_len(), 2.0, 0.0),
        rng.values(sh.kv_len(), 1.0, 0.0),
        rng.values(sh.kv_len(), 1.0, 0.0),
    ]
}

/// O's norm-wise error against fp64 on the inputs rounded to bf16, or the LSE's error in O's
/// units (times [`O_TOLERANCE`] / [`LSE_TOLERANCE`]) where that is larger.
fn error(out: &HostOutput) -> f64 {
    let (sh, options) = (
        shape(&out.sizes),
        options_of(|f| out.flag(f), out.given("scale")),
    );
    judge(
        out,
        (out.input("q"), out.input("k"), out.input("v")),
        sh,
        options,
    )
}

/// [`error`] for Q, K and V `[B, H(kv), S, D]` (f32 values, rounded to bf16 here).
fn judge(
    out: &HostOutput,
    (q, k, v): (&[f32], &[f32], &[f32]),
    sh: Shape,
    options: Options,
) -> f64 {
    let bf16 = |x: &[f32]| -> Vec<f32> { x.iter().map(|&v| Dtype::Bf16.round(v)).collect() };
    let (want_o, want_lse) = host::reference((&bf16(q), &bf16(k), &bf16(v)), sh, options);
    let Some(o) = out.output("o") else {
        return f64::NAN;
    };
    let o = match options.o_seq_first {
        true => seq_first_to_heads_first(o, sh),
        false => o.to_vec(),
    };
    let lse_err = out
        .output("lse")
        .map_or(0.0, |lse| lse_error(lse, &want_lse));
    let lse_in_o_units = lse_err * (O_TOLERANCE / LSE_TOLERANCE);
    worst(norm_relative_error(&o, &want_o), lse_in_o_units)
}

/// `[B, H, Sq, D]` values as `[B, Sq, H, D]`.
pub fn heads_first_to_seq_first(x: &[f32], sh: Shape) -> Vec<f32> {
    let [h, s, d] = [sh.heads, sh.sq, sh.head_dim].map(|v| v as usize);
    let mut out = vec![0.0; x.len()];
    for (i, row) in x.chunks_exact(d).enumerate() {
        let (bh, si) = (i / s, i % s);
        let at = ((bh / h * s + si) * h + bh % h) * d;
        out[at..at + d].copy_from_slice(row);
    }
    out
}

/// `[B, Sq, H, D]` values as `[B, H, Sq, D]`.
pub fn seq_first_to_heads_first(o: &[f32], sh: Shape) -> Vec<f32> {
    let [b, h, sq, d] = [sh.batch, sh.heads, sh.sq, sh.head_dim].map(|x| x as usize);
    let mut out = vec![0.0; o.len()];
    for (i, row) in out.chunks_mut(d).enumerate() {
        let (bi, hi, si) = (i / (h * sq), i / sq % h, i % sq);
        row.copy_from_slice(&o[((bi * sq + si) * h + hi) * d..][..d]);
    }
    debug_assert_eq!(out.len(), b * h * sq * d);
    out
}

/// The largest LSE error relative to max(1, |LSE|); infinite where a row that sees no key is
/// not −∞ (or one that does is), NaN for a NaN.
pub fn lse_error(got: &[f32], want: &[f64]) -> f64 {
    if got.len() != want.len() {
        return f64::NAN;
    }
    let row = |(&g, &w): (&f32, &f64)| match (g as f64, w) {
        (g, _) if g.is_nan() => f64::NAN,
        (g, w) if w == f64::NEG_INFINITY || g == f64::NEG_INFINITY => {
            if g == w {
                0.0
            } else {
                f64::INFINITY
            }
        }
        (g, w) => (g - w).abs() / w.abs().max(1.0),
    };
    got.iter().zip(want).map(row).fold(0.0, worst)
}

/// `ck run attention-DTYPE --n N`: 4 query heads on 2 key/value heads, 257 queries against N
/// keys (at most 16384), head dim 128, causal. `ck cross-check`: both head dims, causal with
/// `Sq ≠ Sk` (rows above the corner see no key), grouped heads, O in either layout.
fn cases(n: Option<u32>) -> Vec<Sizes> {
    let problem = |(b, h, hkv): (usize, usize, usize), (sq, sk, d): (usize, usize, usize)| {
        let s = Sizes::default().with("B", b).with("H", h).with("Hkv", hkv);
        s.with("Sq", sq).with("Sk", sk).with("D", d)
    };
    match n {
        Some(n) => {
            vec![problem((1, 4, 2), (257, n.clamp(1, 16384) as usize, 128)).with_flag("causal")]
        }
        None => vec![
            problem((2, 2, 1), (1, 1, 64)),
            problem((2, 2, 1), (130, 257, 64)).with_flag("causal"),
            problem((2, 2, 1), (257, 130, 128)).with_flag("causal"),
            problem((2, 2, 1), (17, 300, 128)).with_flag("o_seq_first"),
        ],
    }
}
