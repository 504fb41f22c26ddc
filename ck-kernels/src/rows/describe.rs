//! What the row operators' descriptions ([`crate::op::Op`]) share: the tensors `x`, `gamma`
//! and `y`, `eps`, the element types, the checked problems, the tolerance and the bytes moved.

use crate::op::{Dim, Dtype, Elem, Param, Role, Scalar, ScalarRule, Sizes};

/// `[..., N]`: rows of N, any leading dimensions.
pub const ROWS: &[Dim] = &[Dim::Rows, Dim::Sym("N")];
/// `[N]`: one row vector.
pub const VECTOR: &[Dim] = &[Dim::Sym("N")];

/// An input of the row shape, the call's element type.
pub const fn rows_input(name: &'static str, flag: &'static str, doc: &'static str) -> Param {
    Param {
        name,
        flag,
        role: Role::Input,
        elem: Elem::Op,
        dims: ROWS,
        alt: None,
        doc,
    }
}

/// An output of the row shape, the call's element type.
pub const fn rows_output(name: &'static str, flag: &'static str, doc: &'static str) -> Param {
    Param {
        name,
        flag,
        role: Role::Output,
        elem: Elem::Op,
        dims: ROWS,
        alt: None,
        doc,
    }
}

/// A row-vector input (`gamma`, `beta`).
pub const fn vector_input(name: &'static str, doc: &'static str) -> Param {
    Param {
        name,
        flag: name,
        role: Role::Input,
        elem: Elem::Op,
        dims: VECTOR,
        alt: None,
        doc,
    }
}

/// A row-vector output (`dgamma`, `dbeta`).
pub const fn vector_output(name: &'static str, flag: &'static str, doc: &'static str) -> Param {
    Param {
        name,
        flag,
        role: Role::Output,
        elem: Elem::Op,
        dims: VECTOR,
        alt: None,
        doc,
    }
}

/// A per-row statistic, f32 (`mean`, `rstd`): an input of a backward, an optional output of a
/// forward.
pub const fn statistic(
    role: Role,
    name: &'static str,
    flag: &'static str,
    doc: &'static str,
) -> Param {
    Param {
        name,
        flag,
        role,
        elem: Elem::F32,
        dims: &[Dim::Rows],
        alt: None,
        doc,
    }
}

/// `x`, the rows (`--input`).
pub const X: Param = rows_input("x", "input", "x, [..., N]");
/// `gamma`, the scale.
pub const GAMMA: Param = vector_input("gamma", "gamma, [N]");
/// `y`, the result (`--output`).
pub const Y: Param = rows_output("y", "output", "y, [..., N]");

/// `eps`, added under the square root.
pub const fn eps(default: f32) -> Scalar {
    Scalar {
        name: "eps",
        default: Some(default),
        rule: ScalarRule::NonNegative,
        doc: "added to the mean square (variance) under the square root",
    }
}

/// f32 and bf16 (f32 arithmetic either way).
pub const DTYPES: &[Dtype] = &[Dtype::F32, Dtype::Bf16];

/// `ck run OP-DTYPE --n N`: 257 rows of N; `ck cross-check`: rows of 1, 1000, 4099, 9000 and
/// of each tile's exact width (1024, 4096 and 8192: bf16 takes the unpadded kernels there).
pub fn cases(n: Option<u32>) -> Vec<Sizes> {
    let shape = |m: usize, n: usize| Sizes::rows(&[m]).with("N", n);
    match n {
        Some(n) => vec![shape(257, n.max(1) as usize)],
        None => [
            (1, 1),
            (3, 1000),
            (65, 4099),
            (2, 9000),
            (11, 1024),
            (3, 4096),
            (2, 8192),
        ]
        .map(|(m, n)| shape(m, n))
        .to_vec(),
    }
}

/// Relative error a row-wise operator may have against fp64 on the inputs it sees: f32
/// arithmetic over a row (1e-5), or the bf16 rounding of the output (2⁻⁸ ≈ 4e-3, so 1e-2).
pub fn tolerance(dtype: Dtype) -> f64 {
    match dtype {
        Dtype::F32 => 1e-5,
        Dtype::Bf16 => 1e-2,
    }
}

/// Bytes moved by `matrices` reads or writes of the `M × N` rows and `vectors` of a row vector.
pub fn bytes(sizes: &Sizes, dtype: Dtype, matrices: f64, vectors: f64) -> f64 {
    let (m, n) = (sizes.get("M") as f64, sizes.get("N") as f64);
    (matrices * m * n + vectors * n) * dtype.bytes() as f64
}
