//! The GEMM family's operators of the registry ([`OPS`]): the product with its fused epilogue
//! ([`GEMM`], a batch of them in one launch: [`GEMM_BATCHED`]) and on f32 operands ([`SGEMM`]),
//! `nn.Linear`'s product ([`LINEAR`], and [`LINEAR_FP8`] on e4m3 operands), its weight's
//! gradient read from a transposed operand in place ([`GEMM_A_KM`]), the gated linear unit in
//! one launch ([`GATED_LINEAR`]) and the QKV projection with RoPE in its epilogue
//! ([`QKV_PROJECTION`]) — what `ck run linear` (`.npy` files), `ck run linear-bf16 --n N` (a
//! seeded check), `ck cross-check` and `ck_rs.gemm` / `ck_rs.linear` call.
//!
//! The operands are bf16 ([`Elem::Bf16`]: on the emulator f32 values are rounded on the way
//! in; [`SGEMM`]'s are f32); the call's element type is C's, and the epilogue's residual and
//! bias have it.
//!
//! For example `relu(x·Wᵀ + bias)` with x all 0.5 (`[3, 7]`), row `j` of W all `j` (`[5, 7]`)
//! and a bias of −1: `C[i, j] = relu(7 · 0.5 · j − 1)`, exact in bf16 operands and f32 C:
//!
//! ```
//! use ck_kernels::op::HostCall;
//! let device = ck_core::host::Device::emulator();
//! let x = [0.5; 21];
//! let w: Vec<f32> = (0..35).map(|i| (i / 7) as f32).collect();
//! let out = HostCall::new(&ck_kernels::gemm::describe::LINEAR)
//!     .input("x", &x, &[3, 7])
//!     .input("weight", &w, &[5, 7])
//!     .input("bias", &[-1.0; 5], &[5])
//!     .scalar("activation", 1.0) // relu
//!     .run(&device)
//!     .unwrap();
//! assert_eq!(&out.output("c").unwrap()[..5], &[0.0, 2.5, 6.0, 9.5, 13.0]);
//! ```

use super::epilogue::Activation;
use super::fused::{reference, EpilogueArgs};
use super::mma_sync::host::reference as product;
use super::{auto, grouped, linear, mma_sync};
use crate::op::{
    norm_relative_error, tensor, Dim, Dtype, Elem, HostOutput, Launch, Op, Param, Rng, Role,
    Scalar, ScalarRule, Sizes,
};
use ck_core::device::{Bf16, E4m3};
use ck_core::host::LaunchError;

/// The family's operators, as the registry lists them.
pub const OPS: &[&Op] = &[
    &GEMM,
    &GEMM_BATCHED,
    &SGEMM,
    &GROUPED_MM,
    &LINEAR,
    &LINEAR_FP8,
    &GEMM_A_KM,
    &GATED_LINEAR,
    &QKV_PROJECTION,
];

const M: Dim = Dim::Sym("M");
const N: Dim = Dim::Sym("N");
const K: Dim = Dim::Sym("K");
const F: Dim = Dim::Sym("F");

const fn output(dims: &'static [Dim], doc: &'static str) -> Param {
    Param {
        flag: "output",
        ..tensor("c", (Role::Output, Elem::Op), dims, doc)
    }
}

const RESIDUAL: Param = tensor(
    "residual",
    (Role::OptionalInput, Elem::Op),
    &[Dim::Rows, N],
    "the epilogue's residual D, [..., N] (C's type)",
);
const BIAS: Param = tensor(
    "bias",
    (Role::OptionalInput, Elem::Op),
    &[N],
    "the epilogue's bias, [N] (C's type)",
);

const ALPHA: Scalar = Scalar {
    name: "alpha",
    default: Some(1.0),
    rule: ScalarRule::Finite,
    doc: "the product's scale",
};
const BETA: Scalar = Scalar {
    name: "beta",
    default: Some(1.0),
    rule: ScalarRule::Finite,
    doc: "the residual's scale",
};
/// The activations in [`Activation`]'s order (its codes are their indices).
pub const ACTIVATIONS: &[&str] = &["none", "relu", "gelu", "silu"];
const ACTIVATION: Scalar = Scalar {
    name: "activation",
    default: Some(0.0),
    rule: ScalarRule::Choice(ACTIVATIONS),
    doc: "the activation applied last: none, relu, gelu (tanh form) or silu",
};

/// C within 1e-5 norm-wise of fp64 on the rounded operands (f32 accumulation), or within bf16's
/// rounding of C.
fn tolerance(dtype: Dtype) -> f64 {
    match dtype {
        Dtype::F32 => 1e-5,
        Dtype::Bf16 => 4e-3,
    }
}

/// `linear`: `C = act(alpha · x·Wᵀ + beta · residual + bias)`, [`linear::launch`].
pub const LINEAR: Op = Op {
    name: "linear",
    summary: "nn.Linear's product x·Wᵀ with a fused epilogue (bf16 operands)",
    params: &[
        tensor(
            "x",
            (Role::Input, Elem::Bf16),
            &[Dim::Rows, K],
            "x, [..., K] (bf16)",
        ),
        tensor(
            "weight",
            (Role::Input, Elem::Bf16),
            &[N, K],
            "the weight as nn.Linear keeps it, [out_features, in_features] = [N, K] (bf16), read in place",
        ),
        RESIDUAL,
        BIAS,
        output(&[Dim::Rows, N], "C, [..., N]"),
    ],
    scalars: &[ALPHA, BETA, ACTIVATION],
    dtypes: &[Dtype::F32, Dtype::Bf16],
    constraints: crate::op::no_constraints,
    launch: |d, l| {
        crate::by_dtype!(l.dtype, O => {
            let mut c = l.take::<O>(d, "c")?;
            let x = l.input::<Bf16>("x")?;
            let w = l.input::<Bf16>("weight")?;
            let launched = linear::launch(d, (x, w), &mut c, mnk(&l.sizes), &epilogue(l)?);
            l.put("c", c);
            launched.map(|(stats, _)| stats)
        })
    },
    sample: sample_linear,
    error: |out| judge(out, "x", "weight"),
    tolerance,
    agreement: norm_relative_error,
    cases: cases_linear,
    bytes: bytes_linear,
};

/// `linear_fp8`: [`LINEAR`] on e4m3 operands, [`linear::launch_fp8`]; alpha carries their
/// per-tensor scales.
pub const LINEAR_FP8: Op = Op {
    name: "linear_fp8",
    summary: "nn.Linear's product on e4m3 operands with per-tensor scales in alpha",
    params: &[
        tensor(
            "x",
            (Role::Input, Elem::E4m3),
            &[Dim::Rows, K],
            "x, [..., K] (e4m3; K a multiple of 16)",
        ),
        tensor(
            "weight",
            (Role::Input, Elem::E4m3),
            &[N, K],
            "the weight, [N, K] (e4m3; N a multiple of 8)",
        ),
        RESIDUAL,
        BIAS,
        output(&[Dim::Rows, N], "C, [..., N]"),
    ],
    scalars: &[
        Scalar {
            doc: "the product's scale: x's scale times the weight's",
            ..ALPHA
        },
        BETA,
        ACTIVATION,
    ],
    dtypes: &[Dtype::Bf16, Dtype::F32],
    constraints: |s| {
        let (n, k) = (s.get("N"), s.get("K"));
        if k % 16 != 0 || n % 8 != 0 {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_UNSUPPORTED,
                format!("the fp8 GEMM moves whole 16-byte rows with TMA: K must be a multiple of 16 and N of 8 (pad x and the weight with zero columns, the weight with zero rows); got N = {n}, K = {k}"),
            ));
        }
        Ok(())
    },
    launch: |d, l| {
        crate::by_dtype!(l.dtype, O => {
            let mut c = l.take::<O>(d, "c")?;
            let x = l.input::<E4m3>("x")?;
            let w = l.input::<E4m3>("weight")?;
            let launched = linear::launch_fp8(d, (x, w), &mut c, mnk(&l.sizes), &epilogue(l)?);
            l.put("c", c);
            launched.map(|(stats, _)| stats)
        })
    },
    sample: sample_linear,
    error: |out| judge(out, "x", "weight"),
    // e4m3 tensor cores accumulate with fewer bits than bf16 ones.
    tolerance: |d| tolerance(d).max(1e-3),
    agreement: norm_relative_error,
    cases: |n| {
        let problem = |lead: &[usize], k: usize| {
            let s = Sizes::rows(lead).with("N", 256).with("K", k);
            s.with_flag("residual").with_flag("bias")
        };
        match n {
            Some(n) => vec![problem(
                &[256],
                (n.clamp(16, 1 << 16) as usize).next_multiple_of(16),
            )],
            None => vec![problem(&[3, 43], 80).with("activation", 1)],
        }
    },
    bytes: bytes_linear,
};

/// `gemm_a_km`: `C = alpha · a_kmᵀ·b + beta · residual` with `a` given as its `[K, M]` storage,
/// [`linear::launch_weight_grad`] (a weight's gradient `dYᵀ·X` without a transposed copy).
pub const GEMM_A_KM: Op = Op {
    name: "gemm_a_km",
    summary: "C = alpha · aᵀ·b + beta · residual, a read from its [K, M] storage (bf16 operands)",
    params: &[
        Param {
            flag: "a-km",
            ..tensor(
                "a_km",
                (Role::Input, Elem::Bf16),
                &[K, M],
                "a as it lies, [K, M] (bf16; M a multiple of 8)",
            )
        },
        tensor(
            "b",
            (Role::Input, Elem::Bf16),
            &[K, N],
            "b, [K, N] (bf16; N a multiple of 8)",
        ),
        tensor(
            "residual",
            (Role::OptionalInput, Elem::Op),
            &[M, N],
            "the epilogue's residual D, [M, N] (f32 C only)",
        ),
        output(&[M, N], "C, [M, N]"),
    ],
    scalars: &[ALPHA, BETA],
    dtypes: &[Dtype::F32, Dtype::Bf16],
    constraints: |s| {
        let (m, n) = (s.get("M"), s.get("N"));
        if m % 8 != 0 || n % 8 != 0 {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_UNSUPPORTED,
                format!("the kernel reads a_km's and b's rows whole with TMA: M and N must be multiples of 8 (pad them with zero columns); got M = {m}, N = {n}"),
            ));
        }
        Ok(())
    },
    launch: |d, l| {
        crate::by_dtype!(l.dtype, O => {
            let mut c = l.take::<O>(d, "c")?;
            let (a, b) = (l.input::<Bf16>("a_km")?, l.input::<Bf16>("b")?);
            let args = EpilogueArgs {
                alpha: l.scalar("alpha"),
                beta: l.scalar("beta"),
                d: l.optional_input::<O>("residual")?,
                ..Default::default()
            };
            let (k, m, n) = (l.sizes.u32("K"), l.sizes.u32("M"), l.sizes.u32("N"));
            let launched = linear::launch_weight_grad(d, (a, b), &mut c, (k, m, n), &args);
            l.put("c", c);
            launched.map(|(stats, _)| stats)
        })
    },
    sample: |s, rng| {
        let (m, n, k) = (s.get("M"), s.get("N"), s.get("K"));
        vec![
            rng.values(k * m, 1.0, 0.0),
            rng.values(k * n, 1.0, 0.0),
            rng.values(m * n, 1.0, 0.0),
        ]
    },
    error: |out| {
        let (m, n, k) = (out.sizes.get("M"), out.sizes.get("N"), out.sizes.get("K"));
        let a = transposed(out.input("a_km"), (k, m)); // [M, K]
        let ab = product(&a, out.input("b"), (m as u32, n as u32, k as u32));
        let scales = (out.scalar("alpha"), out.scalar("beta"));
        let residual = out.optional_input("residual");
        let want = reference(
            &ab,
            (m as u32, n as u32),
            scales,
            (residual, None),
            Activation::None,
        );
        norm_relative_error(out.output("c").unwrap_or_default(), &want)
    },
    tolerance,
    agreement: norm_relative_error,
    cases: |n| {
        let problem =
            |m: usize, n: usize, k: usize| Sizes::default().with("M", m).with("N", n).with("K", k);
        match n {
            Some(n) => vec![problem(256, 128, n.clamp(1, 1 << 16) as usize)],
            // Any number of tokens: a partial last stage.
            None => vec![problem(64, 40, 100), problem(136, 256, 64)],
        }
    },
    bytes: |s, d| {
        let (m, n, k) = (s.get("M"), s.get("N"), s.get("K"));
        ((m + n) * k * 2 + m * n * d.bytes()) as f64
    },
};

/// `gated_linear`: `C = act(x·W_gateᵀ) · (x·W_upᵀ)` in one launch, [`linear::launch_gated`].
pub const GATED_LINEAR: Op = Op {
    name: "gated_linear",
    summary: "A gated linear unit in one launch: act(x·W_gateᵀ) · (x·W_upᵀ) (bf16)",
    params: &[
        tensor(
            "x",
            (Role::Input, Elem::Bf16),
            &[Dim::Rows, K],
            "x, [..., K] (bf16; K a multiple of 8)",
        ),
        tensor(
            "weight",
            (Role::Input, Elem::Bf16),
            &[Dim::Twice("F"), K],
            "the gate's and the up projection's weights stacked, [2·F, K], gate rows first (bf16; F a multiple of 8)",
        ),
        output(&[Dim::Rows, F], "C, [..., F] (bf16)"),
    ],
    scalars: &[Scalar {
        name: "activation",
        default: Some(0.0),
        rule: ScalarRule::Choice(GATES),
        doc: "the gate's activation: silu (SwiGLU) or gelu (GeGLU, tanh form)",
    }],
    // The kernel writes bf16; an f32 C (the emulator's numpy arrays) gets it widened.
    dtypes: &[Dtype::Bf16, Dtype::F32],
    constraints: crate::op::no_constraints,
    launch: |d, l| {
        let shape = (l.sizes.u32("M"), l.sizes.u32("F"), l.sizes.u32("K"));
        let gate = gate(l.scalar("activation"));
        match l.dtype {
            Dtype::Bf16 => {
                let mut c = l.take::<Bf16>(d, "c")?;
                let (x, w) = (l.input::<Bf16>("x")?, l.input::<Bf16>("weight")?);
                let launched = linear::launch_gated(d, (x, w), &mut c, shape, (1.0, gate));
                l.put("c", c);
                launched.map(|(stats, _)| stats)
            }
            Dtype::F32 => {
                let len = shape.0 as usize * shape.1 as usize;
                let mut narrow = ck_core::host::DeviceBuffer::<Bf16>::zeros(d, len)?;
                let (x, w) = (l.input::<Bf16>("x")?, l.input::<Bf16>("weight")?);
                let (stats, _) = linear::launch_gated(d, (x, w), &mut narrow, shape, (1.0, gate))?;
                let wide: Vec<f32> = narrow.to_vec()?.iter().map(|v| v.to_f32()).collect();
                let mut c = l.take::<f32>(d, "c")?;
                c.copy_from(&ck_core::host::DeviceBuffer::from_slice(d, &wide)?)?;
                l.put("c", c);
                Ok(stats)
            }
        }
    },
    sample: |s, rng| {
        let (m, f, k) = (s.get("M"), s.get("F"), s.get("K"));
        vec![rng.values(m * k, 1.0, 0.0), rng.values(2 * f * k, 0.25, 0.0)]
    },
    error: |out| {
        let (m, f, k) = (out.sizes.get("M"), out.sizes.get("F"), out.sizes.get("K"));
        let product = product_nk(out.input("x"), out.input("weight"), (m, 2 * f, k));
        let act = gate(out.scalar("activation"));
        let gated = |x: f64| reference(&[x], (1, 1), (1.0, 0.0), (None, None), act)[0];
        let want: Vec<f64> = (0..m * f)
            .map(|i| {
                let (r, j) = (i / f, i % f);
                gated(product[r * 2 * f + j]) * product[r * 2 * f + f + j]
            })
            .collect();
        norm_relative_error(out.output("c").unwrap_or_default(), &want)
    },
    // C is bf16 either way.
    tolerance: |_| tolerance(Dtype::Bf16),
    agreement: norm_relative_error,
    cases: |n| {
        let problem = |m: usize, f: usize, k: usize| {
            Sizes::rows(&[m]).with("F", f).with("K", k)
        };
        match n {
            Some(n) => vec![problem(256, 256, (n.clamp(8, 1 << 16) as usize).next_multiple_of(8))],
            None => vec![problem(3, 8, 16), problem(130, 136, 72).with("activation", 1)],
        }
    },
    bytes: |s, d| {
        let (m, f, k) = (s.get("M"), s.get("F"), s.get("K"));
        ((m + 2 * f) * k * 2 + m * f * d.bytes()) as f64
    },
};

/// `qkv_projection`: `x·Wᵀ` with the query and key heads rotated in the epilogue, in the
/// projection's layout, [`linear::launch_rope`]. The weight and C are given per head
/// (`[H + 2·Hkv, D, K]`, `[B, S, H + 2·Hkv, D]`: views of `[(H + 2·Hkv)·D, K]` and
/// `[B, S, (H + 2·Hkv)·D]`), so D is a dimension of its own.
pub const QKV_PROJECTION: Op = Op {
    name: "qkv_projection",
    summary: "The QKV projection x·Wᵀ with RoPE on its query and key heads, in one launch (bf16)",
    params: &[
        tensor(
            "x",
            (Role::Input, Elem::Bf16),
            &[Dim::Sym("B"), Dim::Sym("S"), K],
            "x, [B, S, K] (bf16)",
        ),
        tensor(
            "weight",
            (Role::Input, Elem::Bf16),
            &[Dim::Sym("Hall"), Dim::Sym("D"), K],
            "the query, key and value weights stacked, per head, [H + 2·Hkv, D, K] (bf16; D 64 or 128)",
        ),
        tensor(
            "cos",
            (Role::Input, Elem::F32),
            &[Dim::Sym("Rows"), Dim::Sym("Half")],
            "each pair's cosine, [S or B·S, rotary_dim / 2]",
        ),
        tensor(
            "sin",
            (Role::Input, Elem::F32),
            &[Dim::Sym("Rows"), Dim::Sym("Half")],
            "each pair's sine, as cos",
        ),
        output(
            &[Dim::Sym("B"), Dim::Sym("S"), Dim::Sym("Hall"), Dim::Sym("D")],
            "C per head, [B, S, H + 2·Hkv, D]: the projection's layout, which attention_qkv reads",
        ),
    ],
    scalars: crate::rope::describe::SCALARS,
    // The kernel writes bf16; an f32 C (the emulator's numpy arrays) gets it widened.
    dtypes: &[Dtype::Bf16, Dtype::F32],
    constraints: |s| {
        let (all, want) = (s.get("Hall"), s.get("H") + 2 * s.get("Hkv"));
        if all != want {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_MISMATCH,
                format!("the weight stacks {all} heads; heads + 2·kv_heads is {want}"),
            ));
        }
        crate::rope::describe::shape(s).check()
    },
    launch: |d, l| {
        let (k, shape) = (l.sizes.u32("K"), crate::rope::describe::shape(&l.sizes));
        let run = |l: &Launch, c: &mut ck_core::host::DeviceBuffer<Bf16>| {
            let (x, w) = (l.input::<Bf16>("x")?, l.input::<Bf16>("weight")?);
            let tables = (l.input::<f32>("cos")?, l.input::<f32>("sin")?);
            linear::launch_rope(d, (x, w), c, k, tables, &shape).map(|(stats, _)| stats)
        };
        match l.dtype {
            Dtype::Bf16 => {
                let mut c = l.take::<Bf16>(d, "c")?;
                let launched = run(l, &mut c);
                l.put("c", c);
                launched
            }
            Dtype::F32 => {
                let mut narrow = ck_core::host::DeviceBuffer::<Bf16>::zeros(d, shape.lens().0 as usize)?;
                let stats = run(l, &mut narrow)?;
                let wide: Vec<f32> = narrow.to_vec()?.iter().map(|v| v.to_f32()).collect();
                let mut c = l.take::<f32>(d, "c")?;
                c.copy_from(&ck_core::host::DeviceBuffer::from_slice(d, &wide)?)?;
                l.put("c", c);
                Ok(stats)
            }
        }
    },
    sample: |s, rng| {
        let shape = crate::rope::describe::shape(s);
        let (tokens, k) = (shape.tokens() as usize, s.get("K"));
        let n = (shape.heads + 2 * shape.kv_heads) as usize * shape.head_dim as usize;
        let (cos, sin) = crate::rope::describe::angles(&shape);
        vec![rng.values(tokens * k, 1.0, 0.0), rng.values(n * k, 0.25, 0.0), cos, sin]
    },
    error: |out| {
        let shape = crate::rope::describe::shape(&out.sizes);
        let (tokens, k) = (shape.tokens() as usize, out.sizes.get("K"));
        let n = (shape.heads + 2 * shape.kv_heads) as usize * shape.head_dim as usize;
        let product = product_nk(out.input("x"), out.input("weight"), (tokens, n, k));
        let tables = (out.input("cos"), out.input("sin"));
        let want = crate::rope::describe::rotate_heads(&product, tables, &shape, 1.0);
        norm_relative_error(out.output("c").unwrap_or_default(), &want)
    },
    // C is bf16 either way.
    tolerance: |_| tolerance(Dtype::Bf16),
    agreement: norm_relative_error,
    cases: |n| {
        let problem = |(b, s): (usize, usize), (h, hkv, d): (usize, usize, usize), (rows, r): (usize, usize), k: usize| {
            let sizes = Sizes::default().with("B", b).with("S", s).with("K", k);
            let sizes = sizes.with("H", h).with("Hkv", hkv).with("Hall", h + 2 * hkv);
            sizes.with("D", d).with("Rows", rows).with("Half", r / 2)
        };
        match n {
            Some(n) => {
                let s = n.clamp(1, 8192) as usize;
                vec![problem((1, s), (8, 2, 128), (s, 128), 1024)]
            }
            None => vec![
                problem((2, 3), (2, 1, 64), (6, 32), 72).with_flag("interleaved"),
                problem((1, 130), (1, 1, 128), (130, 128), 64),
            ],
        }
    },
    bytes: |s, d| {
        let (tokens, k) = (s.get("B") * s.get("S"), s.get("K"));
        let n = s.get("Hall") * s.get("D");
        ((tokens + n) * k * 2 + tokens * n * d.bytes()) as f64
    },
};

/// `gemm`: `C = act(alpha · a·b + beta · residual + bias)`, `a` `[M, K]`, `b` `[K, N]`, on the
/// kernel [`auto`] picks (N and K multiples of 8); a plain product into f32 C of other N or K
/// on [`auto::launch_bf16`], whose `mma.sync` kernel takes any shape.
pub const GEMM: Op = Op {
    name: "gemm",
    summary: "C = act(alpha · a·b + beta · residual + bias) (bf16 operands)",
    params: &[
        Param {
            flag: "input-a",
            ..tensor("a", (Role::Input, Elem::Bf16), &[M, K], "a, [M, K] (bf16)")
        },
        Param {
            flag: "input-b",
            ..tensor(
                "b",
                (Role::Input, Elem::Bf16),
                &[K, N],
                "b, [K, N] (bf16; for nn.Linear's weight [N, K]: `linear`)",
            )
        },
        tensor(
            "residual",
            (Role::OptionalInput, Elem::Op),
            &[M, N],
            "the epilogue's residual D, [M, N] (C's type)",
        ),
        BIAS,
        output(
            &[M, N],
            "C, [M, N] (with an epilogue or bf16 C: N and K multiples of 8)",
        ),
    ],
    scalars: &[ALPHA, BETA, ACTIVATION],
    dtypes: &[Dtype::F32, Dtype::Bf16],
    constraints: crate::op::no_constraints,
    launch: |d, l| {
        let (m, n, k) = mnk(&l.sizes);
        if whole_rows(&l.sizes) {
            return launch_auto(d, l, 1);
        }
        if !is_plain_f32(l)? {
            return Err(LaunchError::invalid(
                ck_core::rules::SHAPE_UNSUPPORTED,
                format!("with an epilogue or a bf16 C the product runs on the tensor-core GEMMs, which read whole 16-byte rows: N and K must be multiples of 8; got N = {n}, K = {k} (pad a's columns and b's rows and columns with zeros, or take the plain product into an f32 C)"),
            ));
        }
        let mut c = l.take::<f32>(d, "c")?;
        let (a, b) = (l.input::<Bf16>("a")?, l.input::<Bf16>("b")?);
        let launched = auto::launch_bf16(d, a, b, &mut c, (m, n, k));
        l.put("c", c);
        launched
    },
    sample: sample_gemm,
    error: judge_gemm,
    tolerance,
    agreement: norm_relative_error,
    cases: |n| {
        let problem =
            |m: usize, n: usize, k: usize| Sizes::default().with("M", m).with("N", n).with("K", k);
        let fused = |s: Sizes| s.with_flag("residual").with_flag("bias");
        match n {
            Some(n) => vec![fused(problem(
                257,
                264,
                (n.clamp(8, 1 << 16) as usize).next_multiple_of(8),
            ))],
            None => vec![
                problem(130, 64, 72),
                fused(problem(65, 200, 72)).with("activation", 2),
            ],
        }
    },
    bytes: |s, d| {
        let (m, n, k) = (s.get("M"), s.get("N"), s.get("K"));
        ((m + n) * k * 2 + m * n * d.bytes()) as f64
    },
};

/// A [`GEMM`]-shaped call of `batch` products on the kernel [`auto`] picks.
fn launch_auto(d: &ck_core::host::Device, l: &mut Launch, batch: u32) -> crate::op::Launched {
    let shape = mnk(&l.sizes);
    crate::by_dtype!(l.dtype, O => {
        let mut c = l.take::<O>(d, "c")?;
        let (a, b) = (l.input::<Bf16>("a")?, l.input::<Bf16>("b")?);
        let launched = auto::launch(d, (a, b), &mut c, batch, shape, &epilogue(l)?);
        l.put("c", c);
        launched.map(|(stats, _)| stats)
    })
}

/// Whether a [`GEMM`]-shaped call is the product alone into an f32 C: alpha 1, no residual,
/// bias or activation.
fn is_plain_f32(l: &Launch) -> Result<bool, LaunchError> {
    if l.dtype != Dtype::F32 {
        return Ok(false);
    }
    let extra = l.optional_input::<f32>("residual")?.is_some()
        || l.optional_input::<f32>("bias")?.is_some();
    Ok(
        !extra
            && l.scalar("alpha") == 1.0
            && activation(l.scalar("activation")) == Activation::None,
    )
}

/// `gemm_batched`: [`GEMM`] for `Batch` products of one shape in one launch
/// ([`auto::launch`]); the bias is shared.
pub const GEMM_BATCHED: Op = Op {
    name: "gemm_batched",
    summary:
        "C[i] = act(alpha · a[i]·b[i] + beta · residual[i] + bias) for a batch (bf16 operands)",
    params: &[
        Param {
            flag: "input-a",
            ..tensor(
                "a",
                (Role::Input, Elem::Bf16),
                &[BATCH, M, K],
                "a, [Batch, M, K] (bf16; K a multiple of 8)",
            )
        },
        Param {
            flag: "input-b",
            ..tensor(
                "b",
                (Role::Input, Elem::Bf16),
                &[BATCH, K, N],
                "b, [Batch, K, N] (bf16; N a multiple of 8)",
            )
        },
        tensor(
            "residual",
            (Role::OptionalInput, Elem::Op),
            &[BATCH, M, N],
            "the epilogue's residual D, [Batch, M, N] (C's type)",
        ),
        BIAS,
        output(&[BATCH, M, N], "C, [Batch, M, N]"),
    ],
    scalars: &[ALPHA, BETA, ACTIVATION],
    dtypes: &[Dtype::F32, Dtype::Bf16],
    constraints: whole_vector_rows,
    launch: |d, l| launch_auto(d, l, l.sizes.u32("Batch")),
    sample: sample_gemm,
    error: judge_gemm,
    tolerance,
    agreement: norm_relative_error,
    cases: |n| {
        let problem = |batch: usize, m: usize, n: usize, k: usize| {
            let s = Sizes::default()
                .with("Batch", batch)
                .with("M", m)
                .with("N", n)
                .with("K", k);
            s.with_flag("residual").with_flag("bias")
        };
        match n {
            Some(n) => vec![problem(
                4,
                128,
                128,
                (n.clamp(8, 1 << 16) as usize).next_multiple_of(8),
            )],
            None => vec![
                problem(3, 17, 24, 40).with("activation", 3),
                problem(2, 130, 64, 8),
            ],
        }
    },
    bytes: |s, d| {
        let (batch, m, n, k) = (s.get("Batch"), s.get("M"), s.get("N"), s.get("K"));
        (batch * ((m + n) * k * 2 + m * n * d.bytes())) as f64
    },
};

/// `sgemm`: `C = a·b` on f32 operands without rounding them, on the SIMT f32 GEMM
/// ([`mma_sync::host::launch_f32`]), any M, N, K.
pub const SGEMM: Op = Op {
    name: "sgemm",
    summary: "C = a·b on f32 operands (the SIMT f32 GEMM)",
    params: &[
        Param {
            flag: "input-a",
            ..tensor("a", (Role::Input, Elem::Op), &[M, K], "a, [M, K]")
        },
        Param {
            flag: "input-b",
            ..tensor("b", (Role::Input, Elem::Op), &[K, N], "b, [K, N]")
        },
        output(&[M, N], "C, [M, N]"),
    ],
    scalars: &[],
    dtypes: &[Dtype::F32],
    constraints: crate::op::no_constraints,
    launch: |d, l| {
        let mut c = l.take::<f32>(d, "c")?;
        let (a, b) = (l.input::<f32>("a")?, l.input::<f32>("b")?);
        let launched = mma_sync::host::launch_f32(d, a, b, &mut c, mnk(&l.sizes));
        l.put("c", c);
        launched
    },
    sample: |s, rng| {
        let (m, n, k) = (s.get("M"), s.get("N"), s.get("K"));
        vec![rng.values(m * k, 1.0, 0.0), rng.values(k * n, 1.0, 0.0)]
    },
    error: |out| {
        let shape = mnk(&out.sizes);
        let want = product(out.input("a"), out.input("b"), shape);
        norm_relative_error(out.output("c").unwrap_or_default(), &want)
    },
    tolerance,
    agreement: norm_relative_error,
    cases: |n| {
        let problem =
            |m: usize, n: usize, k: usize| Sizes::default().with("M", m).with("N", n).with("K", k);
        match n {
            Some(n) => vec![problem(257, 129, n.clamp(1, 4096) as usize)],
            None => vec![problem(1, 1, 1), problem(17, 33, 65), problem(257, 129, 73)],
        }
    },
    bytes: |s, d| {
        let (m, n, k) = (s.get("M"), s.get("N"), s.get("K"));
        ((m * k + k * n + m * n) * d.bytes()) as f64
    },
};

const BATCH: Dim = Dim::Sym("Batch");

/// `shape-unsupported` unless N and K are multiples of 8: the tensor-core GEMMs read whole
/// 16-byte rows of bf16.
fn whole_vector_rows(s: &mut Sizes) -> Result<(), LaunchError> {
    if !whole_rows(s) {
        let (n, k) = (s.get("N"), s.get("K"));
        return Err(LaunchError::invalid(
            ck_core::rules::SHAPE_UNSUPPORTED,
            format!("the tensor-core GEMMs read whole 16-byte rows: N and K must be multiples of 8 (pad a and b with zeros); got N = {n}, K = {k}"),
        ));
    }
    Ok(())
}

/// Whether rows of `b` and `a` are whole 16-byte vectors of bf16 (N and K multiples of 8).
fn whole_rows(s: &Sizes) -> bool {
    s.get("N").is_multiple_of(8) && s.get("K").is_multiple_of(8)
}

/// a, b (smaller, so the products stay near 1), the residual and the bias of a [`GEMM`]-shaped
/// call (of every product of a batch).
fn sample_gemm(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
    let (batch, m, n, k) = (
        s.sym("Batch").unwrap_or(1),
        s.get("M"),
        s.get("N"),
        s.get("K"),
    );
    vec![
        rng.values(batch * m * k, 1.0, 0.0),
        rng.values(batch * k * n, 0.25, 0.0),
        rng.values(batch * m * n, 1.0, 0.0),
        rng.values(n, 1.0, 0.0),
    ]
}

/// C of a [`GEMM`]-shaped call (each product of a batch) against the fp64 epilogue over the
/// operands as the kernel saw them.
fn judge_gemm(out: &HostOutput) -> f64 {
    let (batch, (m, n, k)) = (out.sizes.sym("Batch").unwrap_or(1), mnk(&out.sizes));
    let (mn, mk, kn) = ((m * n) as usize, (m * k) as usize, (k * n) as usize);
    let scales = (out.scalar("alpha"), out.scalar("beta"));
    let act = activation(out.scalar("activation"));
    let (a, b, bias) = (out.input("a"), out.input("b"), out.optional_input("bias"));
    let residual = out.optional_input("residual");
    let want: Vec<f64> = (0..batch)
        .flat_map(|i| {
            let ab = product(&a[i * mk..][..mk], &b[i * kn..][..kn], (m, n, k));
            let d = residual.map(|r| &r[i * mn..][..mn]);
            reference(&ab, (m, n), scales, (d, bias), act)
        })
        .collect();
    norm_relative_error(out.output("c").unwrap_or_default(), &want)
}

/// `grouped_mm`: a mixture-of-experts layer's products in one launch, expert `g`'s rows of
/// `a` (the `tokens[g]` after expert `g − 1`'s) times `b[g]`
/// ([`grouped::host::GroupedGemm`], which plans the launch from the counts on the host).
pub const GROUPED_MM: Op = Op {
    name: "grouped_mm",
    summary: "A mixture-of-experts layer's products in one launch: expert g's rows of a times b[g] (bf16 operands)",
    params: &[
        tensor(
            "a",
            (Role::Input, Elem::Bf16),
            &[M, K],
            "the experts' rows in turn, [Σ tokens, K] (bf16; K a multiple of 8)",
        ),
        Param {
            alt: Some(("b_nk", &[EXPERTS, N, K])),
            ..tensor(
                "b",
                (Role::Input, Elem::Bf16),
                &[EXPERTS, K, N],
                "the experts' weights, [experts, K, N] ([experts, N, K] with b_nk) (bf16; N a multiple of 8)",
            )
        },
        tensor(
            "tokens",
            (Role::Input, Elem::HostI32),
            &[EXPERTS],
            "each expert's number of rows of a, in order, [experts] (counts the host plans the launch from)",
        ),
        output(&[M, N], "C, [Σ tokens, N]"),
    ],
    scalars: &[Scalar {
        name: "b_nk",
        default: Some(0.0),
        rule: ScalarRule::Flag,
        doc: "b as [experts, N, K], each expert's weight as nn.Linear keeps it: a · b[g]ᵀ",
    }],
    dtypes: &[Dtype::F32, Dtype::Bf16],
    constraints: whole_vector_rows,
    launch: |d, l| {
        let (m, n, k) = mnk(&l.sizes);
        let tokens = l.input::<i32>("tokens")?.to_vec()?;
        let problems = expert_problems(&tokens, m, (n, k))?;
        let grouped = grouped::host::GroupedGemm::new(d, &problems)?;
        crate::by_dtype!(l.dtype, O => {
            let mut c = l.take::<O>(d, "c")?;
            let ab = (l.input::<Bf16>("a")?, l.input::<Bf16>("b")?);
            let launched = match l.flag("b_nk") {
                true => grouped.launch_nk(d, ab, &mut c, 1.0),
                false => grouped.launch(d, ab, &mut c, &EpilogueArgs::default()),
            };
            l.put("c", c);
            launched
        })
    },
    sample: |s, rng| {
        let (m, n, k, experts) = (s.get("M"), s.get("N"), s.get("K"), s.get("Experts"));
        vec![
            rng.values(m * k, 1.0, 0.0),
            rng.values(experts * k * n, 0.25, 0.0),
            token_counts(m, experts),
        ]
    },
    error: |out| {
        let ((m, n, k), nk) = (mnk(&out.sizes), out.flag("b_nk"));
        let (a, b) = (out.input("a"), out.input("b"));
        let (kn, mut row) = ((k * n) as usize, 0usize);
        let mut want = Vec::with_capacity((m * n) as usize);
        for (g, &t) in out.input("tokens").iter().enumerate() {
            let rows = &a[row * k as usize..][..t as usize * k as usize];
            let weight = &b[g * kn..][..kn];
            let weight = if nk { transposed(weight, (n as usize, k as usize)) } else { weight.to_vec() };
            want.extend(product(rows, &weight, (t as u32, n, k)));
            row += t as usize;
        }
        norm_relative_error(out.output("c").unwrap_or_default(), &want)
    },
    tolerance,
    agreement: norm_relative_error,
    cases: |n| {
        let problem = |experts: usize, m: usize, n: usize, k: usize| {
            Sizes::default().with("Experts", experts).with("M", m).with("N", n).with("K", k)
        };
        match n {
            Some(n) => vec![problem(8, 2048, 256, (n.clamp(8, 1 << 16) as usize).next_multiple_of(8))],
            None => vec![
                problem(5, 70, 24, 40),
                problem(3, 130, 64, 16).with_flag("b_nk"),
            ],
        }
    },
    bytes: |s, d| {
        let (m, n, k, experts) = (s.get("M"), s.get("N"), s.get("K"), s.get("Experts"));
        ((m + experts * n) * k * 2 + m * n * d.bytes()) as f64
    },
};

const EXPERTS: Dim = Dim::Sym("Experts");

/// One problem per expert of `tokens` rows each, or `shape-mismatch` unless the counts are
/// whole and add up to `a`'s `m` rows.
fn expert_problems(
    tokens: &[i32],
    m: u32,
    (n, k): (u32, u32),
) -> Result<Vec<grouped::host::Problem>, LaunchError> {
    let mismatch = |what: String| LaunchError::invalid(ck_core::rules::SHAPE_MISMATCH, what);
    if let Some(t) = tokens.iter().find(|&&t| t < 0) {
        return Err(mismatch(format!(
            "a token count is {t}; give each expert's number of rows of `a`, 0 or more"
        )));
    }
    let total: u64 = tokens.iter().map(|&t| t as u64).sum();
    if total != m as u64 {
        return Err(mismatch(format!("the token counts add up to {total} but `a` has {m} rows; give each expert's rows, in order")));
    }
    Ok(tokens
        .iter()
        .map(|&t| grouped::host::Problem::new(t as u32, n, k))
        .collect())
}

/// `m` rows shared out over `experts`: about even, the second expert none where there are
/// three or more (an expert no token chose), its share to the first.
fn token_counts(m: usize, experts: usize) -> Vec<f32> {
    let mut counts = vec![m / experts; experts];
    counts[experts - 1] += m % experts;
    if experts >= 3 {
        counts[0] += std::mem::take(&mut counts[1]);
    }
    counts.iter().map(|&c| c as f32).collect()
}

/// The gated unit's activations, by index.
const GATES: &[&str] = &["silu", "gelu"];

fn gate(index: f32) -> Activation {
    match index as usize {
        1 => Activation::Gelu,
        _ => Activation::Silu,
    }
}

/// `(M, N, K)` of a product of `x: [..., K]` and `weight: [N, K]`.
fn mnk(s: &Sizes) -> (u32, u32, u32) {
    (s.u32("M"), s.u32("N"), s.u32("K"))
}

/// The epilogue of a [`LINEAR`]-shaped call: its scalars, residual and bias.
fn epilogue<O: crate::op::buffers::BufferElement>(
    l: &Launch,
) -> Result<EpilogueArgs<'_, O>, LaunchError> {
    Ok(EpilogueArgs {
        alpha: l.scalar("alpha"),
        beta: l.scalar("beta"),
        d: l.optional_input::<O>("residual")?,
        bias: l.optional_input::<O>("bias")?,
        activation: activation(l.scalar("activation")),
    })
}

fn activation(index: f32) -> Activation {
    ACTIVATIONS
        .get(index as usize)
        .and_then(|name| Activation::parse(name))
        .unwrap_or(Activation::None)
}

/// x, the weight (smaller, so the products stay near 1), the residual and the bias.
fn sample_linear(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
    let (m, n, k) = (s.get("M"), s.get("N"), s.get("K"));
    vec![
        rng.values(m * k, 1.0, 0.0),
        rng.values(n * k, 0.25, 0.0),
        rng.values(m * n, 1.0, 0.0),
        rng.values(n, 1.0, 0.0),
    ]
}

/// `x·Wᵀ` in fp64: x `[m, k]`, W `[n, k]` (the GEMM's reference on W transposed).
fn product_nk(x: &[f32], w: &[f32], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
    product(x, &transposed(w, (n, k)), (m as u32, n as u32, k as u32))
}

/// A `[rows, cols]` matrix as `[cols, rows]`.
fn transposed(x: &[f32], (rows, cols): (usize, usize)) -> Vec<f32> {
    (0..rows * cols)
        .map(|i| x[(i % rows) * cols + i / rows])
        .collect()
}

/// C of a [`LINEAR`]-shaped call against the fp64 epilogue over the operands as the kernel saw
/// them.
fn judge(out: &HostOutput, x: &str, w: &str) -> f64 {
    let (m, n, k) = (out.sizes.get("M"), out.sizes.get("N"), out.sizes.get("K"));
    let ab = product_nk(out.input(x), out.input(w), (m, n, k));
    let scales = (out.scalar("alpha"), out.scalar("beta"));
    let extra = (out.optional_input("residual"), out.optional_input("bias"));
    let act = activation(out.scalar("activation"));
    let want = reference(&ab, (m as u32, n as u32), scales, extra, act);
    norm_relative_error(out.output("c").unwrap_or_default(), &want)
}

/// `ck run linear-DTYPE --n N`: 256 rows, N = 256, K = N; the cross-check: any shape (the SIMT
/// kernel) and whole TMA rows, with every part of the epilogue.
fn cases_linear(n: Option<u32>) -> Vec<Sizes> {
    let problem = |lead: &[usize], n: usize, k: usize| {
        let s = Sizes::rows(lead).with("N", n).with("K", k);
        s.with_flag("residual").with_flag("bias")
    };
    match n {
        Some(n) => vec![problem(&[256], 256, n.clamp(1, 1 << 16) as usize)],
        None => vec![
            problem(&[3], 5, 7).with("activation", 2),
            problem(&[2, 65], 200, 72).with("activation", 3),
        ],
    }
}

/// x and the weight once, C (and a residual) once.
fn bytes_linear(s: &Sizes, d: Dtype) -> f64 {
    let (m, n, k) = (s.get("M"), s.get("N"), s.get("K"));
    ((m + n) * k * 2 + 2 * m * n * d.bytes()) as f64
}
