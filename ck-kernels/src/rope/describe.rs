//! RoPE on a fused QKV projection ([`ROPE_QKV`]) and its backward ([`ROPE_QKV_BACKWARD`]) as
//! operators of the registry: what `ck run rope-qkv` (`.npy` files), `ck run rope-qkv-f32 --n N`
//! (a seeded check), `ck cross-check` and `ck_rs.rope_qkv` / `ck_rs.rope_qkv_backward` call.
//!
//! The projection is given per head, `[B, S, H + 2·Hkv, D]` (its `[B, S, (H + 2·Hkv)·D]` viewed
//! as each token's heads), so that D is a dimension of its own; `heads` and `kv_heads` split
//! the stacked heads. `rotary_dim` is twice the tables' width.
//!
//! The module documentation's worked example through the operator (D = R = 4 needs a head dim
//! of 8 here: the pair `(x[0], x[2])` of a row `[1, 2, 3, 4, …]` at 90°, the other at 0°):
//!
//! ```
//! use ck_kernels::op::HostCall;
//! let device = ck_core::host::Device::emulator();
//! // One token, a query, a key and a value head of D = 16 (rotary_dim 16: tables of 8).
//! let qkv: Vec<f32> = (0..48).map(|i| (i % 16 + 1) as f32).collect();
//! let mut cos = [1.0; 8];
//! let mut sin = [0.0; 8];
//! (cos[0], sin[0]) = (0.0, 1.0); // pair 0, (x[0], x[8]), at 90°
//! let out = HostCall::new(&ck_kernels::rope::describe::ROPE_QKV)
//!     .input("qkv", &qkv, &[1, 1, 3, 16])
//!     .input("cos", &cos, &[1, 8])
//!     .input("sin", &sin, &[1, 8])
//!     .scalar("heads", 1.0)
//!     .scalar("kv_heads", 1.0)
//!     .run(&device)
//!     .unwrap();
//! let q = out.output("q").unwrap();
//! // (1, 9) → (1·0 − 9·1, 9·0 + 1·1) = (−9, 1); every other pair unchanged.
//! assert_eq!((q[0], q[8], q[1]), (-9.0, 1.0, 2.0));
//! assert_eq!(out.output("v").unwrap()[0], 1.0); // values are copied as they are
//! ```

use super::host::{launch, launch_backward, Shape};
use crate::op::{
    norm_relative_error, tensor, Dim, Dtype, Elem, Launch, Launched, Op, Param, Role, Scalar,
    ScalarRule, Sizes,
};
use ck_core::host::{Device, LaunchError};

/// The family's operators, as the registry lists them.
pub const OPS: &[&Op] = &[&ROPE_QKV, &ROPE_QKV_BACKWARD];

const B: Dim = Dim::Sym("B");
const S: Dim = Dim::Sym("S");
const H: Dim = Dim::Sym("H");
const HKV: Dim = Dim::Sym("Hkv");
const HALL: Dim = Dim::Sym("Hall");
const D: Dim = Dim::Sym("D");
const TABLE: &[Dim] = &[Dim::Sym("Rows"), Dim::Sym("Half")];

const COS: Param = tensor(
    "cos",
    (Role::Input, Elem::F32),
    TABLE,
    "each pair's cosine, [S or B·S, rotary_dim / 2] (a row per position, or per token)",
);
const SIN: Param = tensor(
    "sin",
    (Role::Input, Elem::F32),
    TABLE,
    "each pair's sine, as cos",
);

/// The counts that split the stacked heads, and the pairs' style.
pub(crate) const SCALARS: &[Scalar] = &[
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
        doc: "Hkv, the key/value heads",
    },
    Scalar {
        name: "interleaved",
        default: Some(0.0),
        rule: ScalarRule::Flag,
        doc: "pairs of neighbours (GPT-J) instead of the rotary dims' two halves (Llama, NeoX)",
    },
];

/// `rope_qkv`: Q, K and V in attention's layout, the query and key heads rotated, [`launch`].
pub const ROPE_QKV: Op = Op {
    name: "rope_qkv",
    summary: "RoPE on a fused QKV projection, written in attention's layout, in one pass",
    params: &[
        tensor(
            "qkv",
            (Role::Input, Elem::Op),
            &[B, S, HALL, D],
            "the projection per head, [B, S, H + 2·Hkv, D] (D a multiple of 8, at most 128)",
        ),
        COS,
        SIN,
        tensor(
            "q",
            (Role::Output, Elem::Op),
            &[B, H, S, D],
            "q, [B, H, S, D]",
        ),
        tensor(
            "k",
            (Role::Output, Elem::Op),
            &[B, HKV, S, D],
            "k, [B, Hkv, S, D]",
        ),
        tensor(
            "v",
            (Role::Output, Elem::Op),
            &[B, HKV, S, D],
            "v, [B, Hkv, S, D]",
        ),
    ],
    scalars: SCALARS,
    dtypes: &[Dtype::F32, Dtype::Bf16],
    constraints,
    launch: |d, l| {
        let shape = shape(&l.sizes);
        crate::by_dtype!(l.dtype, T => {
            let (mut q, mut k, mut v) = (l.take::<T>(d, "q")?, l.take::<T>(d, "k")?, l.take::<T>(d, "v")?);
            let tables = tables(l)?;
            let x = l.input::<T>("qkv")?;
            let launched = launch(d, (x, tables.0, tables.1), (&mut q, &mut k, &mut v), &shape);
            l.put("q", q);
            l.put("k", k);
            l.put("v", v);
            launched
        })
    },
    sample: |s, rng| {
        let sh = shape(s);
        let (qkv, ..) = sh.lens();
        let (cos, sin) = angles(&sh);
        vec![rng.values(qkv as usize, 1.0, 0.0), cos, sin]
    },
    error: |out| {
        let sh = shape(&out.sizes);
        let (cos, sin) = (out.input("cos"), out.input("sin"));
        let want = rotated(out.input("qkv"), (cos, sin), &sh);
        norm_relative_error(&out.outputs_concatenated(), &want)
    },
    tolerance,
    agreement: norm_relative_error,
    cases,
    bytes: |s, d| 2.0 * shape(s).lens().0 as f64 * d.bytes() as f64,
};

/// `rope_qkv_backward`: the gradients of Q, K and V back in the projection's layout, the
/// query's and key's rotary dims rotated back by minus each angle, [`launch_backward`].
pub const ROPE_QKV_BACKWARD: Op = Op {
    name: "rope_qkv_backward",
    summary: "RoPE's backward: dQ, dK, dV back in the fused projection's layout, rotated back",
    params: &[
        tensor(
            "dq",
            (Role::Input, Elem::Op),
            &[B, H, S, D],
            "dq, [B, H, S, D]",
        ),
        tensor(
            "dk",
            (Role::Input, Elem::Op),
            &[B, HKV, S, D],
            "dk, [B, Hkv, S, D]",
        ),
        tensor(
            "dv",
            (Role::Input, Elem::Op),
            &[B, HKV, S, D],
            "dv, [B, Hkv, S, D]",
        ),
        COS,
        SIN,
        Param {
            flag: "output",
            ..tensor(
                "dqkv",
                (Role::Output, Elem::Op),
                &[B, S, HALL, D],
                "the projection's gradient per head, [B, S, H + 2·Hkv, D]",
            )
        },
    ],
    scalars: SCALARS,
    dtypes: &[Dtype::F32, Dtype::Bf16],
    constraints,
    launch: launch_grad,
    sample: |s, rng| {
        let sh = shape(s);
        let (_, q, kv, _) = sh.lens();
        let (cos, sin) = angles(&sh);
        let mut grad = |len: u64| rng.values(len as usize, 1.0, 0.0);
        vec![grad(q), grad(kv), grad(kv), cos, sin]
    },
    error: |out| {
        let sh = shape(&out.sizes);
        let grads = [out.input("dq"), out.input("dk"), out.input("dv")].concat();
        let tables = (out.input("cos"), out.input("sin"));
        let want = rotated_back(&grads, tables, &sh);
        norm_relative_error(out.output("dqkv").unwrap_or_default(), &want)
    },
    tolerance,
    agreement: norm_relative_error,
    cases,
    bytes: |s, d| 2.0 * shape(s).lens().0 as f64 * d.bytes() as f64,
};

fn launch_grad(d: &Device, l: &mut Launch) -> Launched {
    let shape = shape(&l.sizes);
    crate::by_dtype!(l.dtype, T => {
        let mut dqkv = l.take::<T>(d, "dqkv")?;
        let grads = [l.input::<T>("dq")?, l.input::<T>("dk")?, l.input::<T>("dv")?];
        let (cos, sin) = tables(l)?;
        let launched = launch_backward(d, (grads, cos, sin), &mut dqkv, &shape);
        l.put("dqkv", dqkv);
        launched
    })
}

fn tables(
    l: &Launch,
) -> Result<
    (
        &ck_core::host::DeviceBuffer<f32>,
        &ck_core::host::DeviceBuffer<f32>,
    ),
    LaunchError,
> {
    Ok((l.input::<f32>("cos")?, l.input::<f32>("sin")?))
}

/// The stacked heads are the query's and twice the key/value heads', and the kernel takes the
/// shape ([`Shape::check`]: D, rotary_dim, the tables' rows). The backward's output sets the
/// stacked heads where no input does.
fn constraints(s: &mut Sizes) -> Result<(), LaunchError> {
    let want = s.get("H") + 2 * s.get("Hkv");
    match s.sym("Hall") {
        None => s.derive("Hall", want),
        Some(all) if all != want => {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_MISMATCH,
                format!("the projection stacks {all} heads; heads + 2·kv_heads is {want}"),
            ))
        }
        Some(_) => {}
    }
    shape(s).check()
}

/// The kernels' shape of bound sizes.
pub fn shape(s: &Sizes) -> Shape {
    Shape {
        batch: s.u32("B"),
        seq: s.u32("S"),
        heads: s.u32("H"),
        kv_heads: s.u32("Hkv"),
        head_dim: s.u32("D"),
        rotary_dim: 2 * s.u32("Half"),
        table_rows: s.u32("Rows"),
        interleaved: s.flag("interleaved"),
    }
}

/// f32 C within 1e-5 of fp64 (one rounding of each product), bf16 within its rounding.
fn tolerance(dtype: Dtype) -> f64 {
    match dtype {
        Dtype::F32 => 1e-5,
        Dtype::Bf16 => 4e-3,
    }
}

/// Llama's tables: pair `i` of table row `p` at angle `p · 10000^(−2i/R)`.
pub fn angles(sh: &Shape) -> (Vec<f32>, Vec<f32>) {
    let half = sh.rotary_dim / 2;
    let angle = |p: u32, i: u32| p as f64 * 10000f64.powf(-2.0 * i as f64 / sh.rotary_dim as f64);
    let all = (0..sh.table_rows).flat_map(|p| (0..half).map(move |i| angle(p, i)));
    all.map(|a| (a.cos() as f32, a.sin() as f32)).unzip()
}

/// The elements of pair `i` in a head of the rotary dims `r`: the two halves, or neighbours.
fn pair(i: usize, r: usize, interleaved: bool) -> (usize, usize) {
    match interleaved {
        true => (2 * i, 2 * i + 1),
        false => (i, i + r / 2),
    }
}

/// The projection `[B, S, Hall, D]` (fp64) with its query and key heads' pairs rotated by
/// `sign` times each angle — pair `(a, b)` at `θ` to `(a cos θ − b sin θ, b cos θ + a sin θ)` —
/// and its value heads as they are.
pub(crate) fn rotate_heads(
    x: &[f64],
    (cos, sin): (&[f32], &[f32]),
    sh: &Shape,
    sign: f64,
) -> Vec<f64> {
    let (h, hkv, d) = (
        sh.heads as usize,
        sh.kv_heads as usize,
        sh.head_dim as usize,
    );
    let (r, rows, all) = (sh.rotary_dim as usize, sh.table_rows as usize, h + 2 * hkv);
    let mut out = x.to_vec();
    for (row_index, row) in out.chunks_mut(d).enumerate() {
        let (t, head) = (row_index / all, row_index % all);
        if head >= h + hkv {
            continue; // a value head
        }
        for i in 0..r / 2 {
            let (a, b) = pair(i, r, sh.interleaved);
            let tab = (t % rows) * (r / 2) + i;
            let (c, sn) = (cos[tab] as f64, sign * sin[tab] as f64);
            let (x1, x2) = (row[a], row[b]);
            (row[a], row[b]) = (x1 * c - x2 * sn, x2 * c + x1 * sn);
        }
    }
    out
}

/// Where head `head` of token `t` lies in Q, K, V `[B, heads, S, D]` concatenated.
fn per_tensor_row(t: usize, head: usize, sh: &Shape) -> usize {
    let [b, s, h, hkv, d] =
        [sh.batch, sh.seq, sh.heads, sh.kv_heads, sh.head_dim].map(|v| v as usize);
    let (q_len, kv_len) = (b * h * s * d, b * hkv * s * d);
    let (base, n, hi) = match head {
        hd if hd < h => (0, h, hd),
        hd if hd < h + hkv => (q_len, hkv, hd - h),
        hd => (q_len + kv_len, hkv, hd - h - hkv),
    };
    base + (((t / s) * n + hi) * s + t % s) * d
}

/// The projection's head rows `[B, S, Hall, D]` as Q, K, V `[B, heads, S, D]` concatenated
/// (`to_stacked`: the other way).
fn restack(x: &[f64], sh: &Shape, to_stacked: bool) -> Vec<f64> {
    let (d, all) = (sh.head_dim as usize, (sh.heads + 2 * sh.kv_heads) as usize);
    let mut out = vec![0f64; x.len()];
    for row in 0..x.len() / d {
        let (stacked, split) = (row * d, per_tensor_row(row / all, row % all, sh));
        let (from, to) = if to_stacked {
            (split, stacked)
        } else {
            (stacked, split)
        };
        out[to..to + d].copy_from_slice(&x[from..from + d]);
    }
    out
}

fn wide(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| v as f64).collect()
}

/// [`ROPE_QKV`]'s reference: Q, K, V concatenated, from the projection per head.
pub fn rotated(x: &[f32], tables: (&[f32], &[f32]), sh: &Shape) -> Vec<f64> {
    restack(&rotate_heads(&wide(x), tables, sh, 1.0), sh, false)
}

/// [`ROPE_QKV_BACKWARD`]'s reference: the gradients (Q, K, V concatenated) back per head in
/// the projection's layout, rotated by minus each angle (the rotation is orthogonal: its
/// transpose is its inverse).
pub fn rotated_back(grads: &[f32], tables: (&[f32], &[f32]), sh: &Shape) -> Vec<f64> {
    rotate_heads(&restack(&wide(grads), sh, true), tables, sh, -1.0)
}

/// `ck run rope-qkv-DTYPE --n N`: 2 sequences of N tokens (at most 8192), 8 query heads on 2,
/// D 128, one table for both. `ck cross-check`: a table row per token, a partial rotary dim,
/// interleaved pairs; one table per sequence, half-split.
pub fn cases(n: Option<u32>) -> Vec<Sizes> {
    let problem =
        |(b, s): (usize, usize), (h, hkv, d): (usize, usize, usize), (rows, r): (usize, usize)| {
            let sizes = Sizes::default()
                .with("B", b)
                .with("S", s)
                .with("H", h)
                .with("Hkv", hkv);
            let sizes = sizes.with("Hall", h + 2 * hkv).with("D", d);
            sizes.with("Rows", rows).with("Half", r / 2)
        };
    match n {
        Some(n) => {
            let s = n.clamp(1, 8192) as usize;
            vec![problem((2, s), (8, 2, 128), (s, 128))]
        }
        None => vec![
            problem((2, 5), (4, 2, 64), (10, 32)).with_flag("interleaved"),
            problem((1, 70), (2, 1, 128), (70, 128)),
        ],
    }
}
