//! The attention backward as an operator of the registry ([`OP`]): `ck run attention-backward`
//! (`.npy` files), `ck run attention-backward-bf16 --n N` (a seeded check against the fp64
//! gradient), `ck cross-check` and `ck_rs.attention_backward`.
//!
//! Its three scratch tensors ([`Workspace`]) are part of the description: Python allocates them
//! with torch (so that a CUDA graph captures the call), the other front ends leave them to the
//! launch. The seeded problems take O and the log-sum-exp from the forward's fp64 reference, so
//! both devices of a cross-check see the same inputs.

use super::host::{self as backward, Grads, Saved, Workspace};
use crate::attention::describe::{
    heads_first_to_seq_first, seq_first_to_heads_first, shape, tensor, B, CAUSAL, D, H, HKV, SCALE,
    SK, SQ,
};
use crate::attention::host::{self as forward, upload_bf16};
use crate::op::{
    norm_relative_error, worst, Dim, Dtype, Elem, HostOutput, Launch, Launched, Op, Param, Rng,
    Role, Scalar, ScalarRule, Sizes,
};
use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer};

/// dQ, dK and dV each within 2e-2 norm-wise of fp64 on the bf16-rounded inputs ([`grad_error`]):
/// the forward's bf16 O and the backward's bf16 P and dS in the products (FlashAttention's own
/// tests allow a few times the forward's error for the backward).
pub const GRAD_TOLERANCE: f64 = 2e-2;

const Q_RULE: &[Dim] = &[B, H, SQ, D];
const KV_RULE: &[Dim] = &[B, HKV, SK, D];
const SEQ_FIRST: &[Dim] = &[B, SQ, H, D];

/// O and dO: Q's layout, or `[B, Sq, H, D]` under `o_seq_first` (the forward's own).
const fn like_o(name: &'static str, doc: &'static str) -> Param {
    Param {
        alt: Some(("o_seq_first", SEQ_FIRST)),
        ..tensor(name, Role::Input, Q_RULE, doc)
    }
}

const fn scratch(name: &'static str, elem: Elem, dims: &'static [Dim], doc: &'static str) -> Param {
    Param {
        name,
        flag: name,
        role: Role::Scratch,
        elem,
        dims,
        alt: None,
        doc,
    }
}

/// `attention_backward`: dQ, dK, dV from the forward's Q, K, V, O, LSE and dO.
pub const OP: Op = Op {
    name: "attention_backward",
    summary: "Attention backward: dq, dk, dv from the forward's q, k, v, o, lse and do",
    params: &[
        tensor("q", Role::Input, Q_RULE, "q, [B, H, Sq, D] (D 64 or 128)"),
        tensor(
            "k",
            Role::Input,
            KV_RULE,
            "k, [B, Hkv, Sk, D] (Hkv dividing H)",
        ),
        tensor("v", Role::Input, KV_RULE, "v, [B, Hkv, Sk, D]"),
        like_o(
            "o",
            "the forward's o, [B, H, Sq, D] ([B, Sq, H, D] with o_seq_first)",
        ),
        Param {
            elem: Elem::F32,
            ..tensor(
                "lse",
                Role::Input,
                &[B, H, SQ],
                "the forward's log-sum-exp, [B, H, Sq]",
            )
        },
        like_o("dout", "do, the gradient of o, in o's layout"),
        tensor("dq", Role::Output, Q_RULE, "dq, [B, H, Sq, D]"),
        tensor(
            "dk",
            Role::Output,
            KV_RULE,
            "dk, [B, Hkv, Sk, D] (summed over each group)",
        ),
        tensor("dv", Role::Output, KV_RULE, "dv, [B, Hkv, Sk, D]"),
        scratch(
            "rows",
            Elem::F32,
            &[Dim::Sym("Wrows")],
            "per query row LSE·log₂e and Δ",
        ),
        scratch(
            "sums",
            Elem::F32,
            &[Dim::Sym("Wsums")],
            "dQ's f32 partial sums",
        ),
        scratch(
            "counters",
            Elem::U32,
            &[Dim::Sym("Wcounters")],
            "a counter per query tile",
        ),
    ],
    scalars: &[
        SCALE,
        CAUSAL,
        Scalar {
            name: "deterministic",
            default: Some(0.0),
            rule: ScalarRule::Flag,
            doc: "the partial sums of dq added in one fixed order: the same bits on every run",
        },
        Scalar {
            name: "o_seq_first",
            default: Some(0.0),
            rule: ScalarRule::Flag,
            doc: "o and do as [B, Sq, H, D], the forward's o_seq_first",
        },
    ],
    dtypes: &[Dtype::Bf16, Dtype::F32],
    constraints: |s| {
        let sh = shape(s);
        sh.check()?;
        let (rows, sums, counters) = Workspace::lens(&sh);
        s.derive("Wrows", rows);
        s.derive("Wsums", sums);
        s.derive("Wcounters", counters);
        Ok(())
    },
    launch,
    sample,
    error,
    tolerance: |_| GRAD_TOLERANCE,
    agreement: norm_relative_error,
    cases,
    bytes: |s, d| {
        let sh = shape(s);
        (4 * sh.q_len() + 4 * sh.kv_len()) as f64 * d.bytes() as f64
    },
};

fn options(flag: impl Fn(&str) -> bool, scale: Option<f32>) -> backward::Options {
    backward::Options {
        causal: flag("causal"),
        scale,
        deterministic: flag("deterministic"),
        o_seq_first: flag("o_seq_first"),
    }
}

fn launch(d: &Device, l: &mut Launch) -> Launched {
    let (sh, options) = (shape(&l.sizes), options(|f| l.flag(f), l.given("scale")));
    let mut ws = Workspace {
        rows: l.scratch(d, "rows")?,
        sums: l.scratch(d, "sums")?,
        counters: l.scratch(d, "counters")?,
    };
    let grads = ["dq", "dk", "dv"];
    let stats = match l.dtype {
        Dtype::Bf16 => {
            let mut dq = l.take::<Bf16>(d, "dq")?;
            let (mut dk, mut dv) = (l.take::<Bf16>(d, "dk")?, l.take::<Bf16>(d, "dv")?);
            let saved = Saved {
                q: l.input("q")?,
                k: l.input("k")?,
                v: l.input("v")?,
                o: l.input("o")?,
                dout: l.input("dout")?,
                lse: l.input("lse")?,
            };
            let grads_out = Grads {
                dq: &mut dq,
                dk: &mut dk,
                dv: &mut dv,
            };
            let stats = backward::launch(d, &saved, grads_out, &mut ws, sh, options);
            for (g, b) in grads.into_iter().zip([dq, dk, dv]) {
                l.put(g, b);
            }
            stats
        }
        Dtype::F32 => {
            let bf16 = |n| upload_bf16(d, &l.input::<f32>(n)?.to_vec()?);
            let [q, k, v, o, dout] = ["q", "k", "v", "o", "dout"].map(bf16);
            let (q, k, v, o, dout) = (q?, k?, v?, o?, dout?);
            let lse = l.input::<f32>("lse")?;
            let saved = Saved {
                q: &q,
                k: &k,
                v: &v,
                o: &o,
                dout: &dout,
                lse,
            };
            let zeros = |len| DeviceBuffer::<Bf16>::zeros(d, len);
            let (mut dq, mut dk, mut dv) =
                (zeros(sh.q_len())?, zeros(sh.kv_len())?, zeros(sh.kv_len())?);
            let grads_bf16 = Grads {
                dq: &mut dq,
                dk: &mut dk,
                dv: &mut dv,
            };
            let stats = backward::launch(d, &saved, grads_bf16, &mut ws, sh, options)?;
            for (g, b) in grads.into_iter().zip([&dq, &dk, &dv]) {
                let wide: Vec<f32> = b.to_vec()?.iter().map(|x| x.to_f32()).collect();
                let mut out = l.take::<f32>(d, g)?;
                out.copy_from(&DeviceBuffer::from_slice(d, &wide)?)?;
                l.put(g, out);
            }
            Ok(stats)
        }
    };
    l.put("rows", ws.rows);
    l.put("sums", ws.sums);
    l.put("counters", ws.counters);
    stats
}

fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
    seeded(s, None, rng)
}

/// The inputs of a seeded problem with the scale `scale`: Q in [−2, 2], K, V and dO in
/// [−1, 1]; O and the log-sum-exp the forward's fp64 reference on the bf16-rounded Q, K, V (O in
/// its layout).
pub fn seeded(s: &Sizes, scale: Option<f32>, rng: &mut Rng) -> Vec<Vec<f32>> {
    let sh = shape(s);
    let (q, k, v, dout) = (
        rng.values(sh.q_len(), 2.0, 0.0),
        rng.values(sh.kv_len(), 1.0, 0.0),
        rng.values(sh.kv_len(), 1.0, 0.0),
        rng.values(sh.q_len(), 1.0, 0.0),
    );
    let fwd = forward::Options {
        causal: s.flag("causal"),
        scale,
        o_seq_first: false,
    };
    let (o, lse) = forward::reference((&rounded(&q), &rounded(&k), &rounded(&v)), sh, fwd);
    let o: Vec<f32> = o.iter().map(|&x| x as f32).collect();
    let o = match s.flag("o_seq_first") {
        true => heads_first_to_seq_first(&o, sh),
        false => o,
    };
    vec![q, k, v, o, lse.iter().map(|&x| x as f32).collect(), dout]
}

/// `x` rounded to bf16 (what the kernels read).
fn rounded(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| Dtype::Bf16.round(v)).collect()
}

/// The worst of dQ's, dK's and dV's [`grad_error`] against the fp64 gradient of the plain
/// softmax on the bf16-rounded inputs.
fn error(out: &HostOutput) -> f64 {
    let (sh, options) = (
        shape(&out.sizes),
        options(|f| out.flag(f), out.given("scale")),
    );
    let dout = rounded(out.input("dout"));
    let dout = match options.o_seq_first {
        true => seq_first_to_heads_first(&dout, sh),
        false => dout,
    };
    let (q, k, v) = (
        rounded(out.input("q")),
        rounded(out.input("k")),
        rounded(out.input("v")),
    );
    let want = backward::reference((&q, &k, &v), &dout, sh, options);
    let got = |g| out.output(g).unwrap_or(&[]);
    [
        (got("dq"), &want.0),
        (got("dk"), &want.1),
        (got("dv"), &want.2),
    ]
    .into_iter()
    .map(|(got, want)| grad_error(got, want))
    .fold(0.0, worst)
}

/// `got`'s norm-wise error relative to `want`, or to an RMS of 1e-3 per element where `want`
/// is smaller: a gradient that is exactly zero (one key per row: every `dS` is 0) comes out
/// as rounding noise of the two sums `dP − Δ`.
pub fn grad_error(got: &[f32], want: &[f64]) -> f64 {
    let floor = 1e-3 * (want.len() as f64).sqrt();
    let norm = want.iter().map(|w| w * w).sum::<f64>().sqrt();
    norm_relative_error(got, want) * norm / norm.max(floor).max(f64::MIN_POSITIVE)
}

/// `ck run attention-backward-DTYPE --n N`: 4 query heads on 2 key/value heads, 257 queries
/// against N keys (at most 16384), head dim 128 (64 where N ≤ 64), causal, deterministic.
/// `ck cross-check`: that problem at 300 and 64 keys (the deterministic mode: the fast one sums
/// dQ in any order, so two devices may differ in more than rounding).
fn cases(n: Option<u32>) -> Vec<Sizes> {
    let problem = |sk: u32| {
        let d = if sk <= 64 { 64 } else { 128 };
        let s = Sizes::default().with("B", 1).with("H", 4).with("Hkv", 2);
        let s = s
            .with("Sq", 257)
            .with("Sk", sk.clamp(1, 16384) as usize)
            .with("D", d);
        s.with_flag("causal").with_flag("deterministic")
    };
    match n {
        Some(n) => vec![problem(n)],
        None => vec![problem(300), problem(64)],
    }
}
