//! Host side of [`super`]: the launches on device buffers, the fp64 reference, and the four
//! operators' descriptions (`swiglu`, `swiglu_backward`, `geglu`, `geglu_backward`).

use super::*;
use crate::op::{Dim, Elem, Param, Role};
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats};
use ck_core::rules;

/// Rows per block: the forward's tile ([`GluTile2`], [`GluTile4`]) and the backward's
/// ([`GluBwdTile2`], [`GluBwdTile4`]).
const ROWS: u32 = 32;
const BWD_ROWS: u32 = 16;

/// Element types with gated-unit kernels.
pub trait GluElement: Real {
    /// Columns of `F` per block.
    const COLS: u32;
    /// The forward kernel of `act` (SiLU or GELU).
    fn forward(
        device: &Device,
        cfg: LaunchConfig,
        act: Activation,
        gu: &DeviceBuffer<Self>,
        y: &mut DeviceBuffer<Self>,
        mf: (u32, u32),
    ) -> Result<LaunchStats, LaunchError>;
    /// The backward kernel of `act`.
    fn backward(
        device: &Device,
        cfg: LaunchConfig,
        act: Activation,
        inputs: (&DeviceBuffer<Self>, &DeviceBuffer<Self>),
        dgu: &mut DeviceBuffer<Self>,
        mf: (u32, u32),
    ) -> Result<LaunchStats, LaunchError>;
}

macro_rules! glu_element {
    ($t:ty, $cols:literal, $silu:ident, $silu_bwd:ident, $gelu:ident, $gelu_bwd:ident) => {
        impl GluElement for $t {
            const COLS: u32 = $cols;

            fn forward(
                device: &Device,
                cfg: LaunchConfig,
                act: Activation,
                gu: &DeviceBuffer<$t>,
                y: &mut DeviceBuffer<$t>,
                (m, f): (u32, u32),
            ) -> Result<LaunchStats, LaunchError> {
                if act == Activation::Silu {
                    $silu::launch(device, cfg, gu, y, m, f)
                } else {
                    $gelu::launch(device, cfg, gu, y, m, f)
                }
            }

            fn backward(
                device: &Device,
                cfg: LaunchConfig,
                act: Activation,
                (dy, gu): (&DeviceBuffer<$t>, &DeviceBuffer<$t>),
                dgu: &mut DeviceBuffer<$t>,
                (m, f): (u32, u32),
            ) -> Result<LaunchStats, LaunchError> {
                if act == Activation::Silu {
                    $silu_bwd::launch(device, cfg, dy, gu, dgu, m, f)
                } else {
                    $gelu_bwd::launch(device, cfg, dy, gu, dgu, m, f)
                }
            }
        }
    };
}
glu_element!(
    Bf16,
    256,
    SwigluBf16,
    SwigluBwdBf16,
    GegluBf16,
    GegluBwdBf16
);
glu_element!(f32, 128, SwigluF32, SwigluBwdF32, GegluF32, GegluBwdF32);

/// The problem's checks: a gated activation, buffers of the shape's lengths (`what` names them
/// in the order given), and `gu` within the kernels' 32-bit indices; the grid for tiles of
/// `rows` rows. `None`: nothing to launch.
fn plan<T: GluElement>(
    act: Activation,
    buffers: &[(&str, usize, u64)],
    (m, f): (u32, u32),
    rows: u32,
) -> Result<Option<LaunchConfig>, LaunchError> {
    if !matches!(act, Activation::Silu | Activation::Gelu) {
        return Err(LaunchError::invalid(
            rules::BAD_ACTIVATION,
            format!("a gated unit's activation is silu or gelu, not {act:?}"),
        ));
    }
    for &(name, len, want) in buffers {
        if len as u64 != want {
            return Err(LaunchError::invalid(
                rules::SHAPE_MISMATCH,
                format!("`{name}` has {len} elements; {m} rows of F = {f} need {want}"),
            ));
        }
    }
    if 2 * m as u64 * f as u64 > i32::MAX as u64 {
        return Err(LaunchError::invalid(
            rules::ARGUMENT_SIZE,
            format!(
                "gu has {} elements; the kernels index with 32 bits: split the rows",
                2 * m as u64 * f as u64
            ),
        ));
    }
    if m == 0 || f == 0 {
        return Ok(None);
    }
    let blocks = m.div_ceil(rows) as u64 * f.div_ceil(T::COLS) as u64;
    Ok(Some(LaunchConfig::new(blocks as u32, BLOCK)))
}

/// `y = act(g) · u` for `gu = [g, u]` (`m` rows of `2f`), `y` `m` rows of `f` (module doc).
/// Errors: `unknown-name` for an activation other than SiLU or GELU, `shape-mismatch` naming the
/// buffer of the wrong length, `argument-size`.
pub fn launch<T: GluElement>(
    device: &Device,
    act: Activation,
    gu: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    (m, f): (u32, u32),
) -> Result<LaunchStats, LaunchError> {
    let mf = m as u64 * f as u64;
    let lens = [("gu", gu.len(), 2 * mf), ("y", y.len(), mf)];
    match plan::<T>(act, &lens, (m, f), ROWS)? {
        Some(cfg) => T::forward(device, cfg, act, gu, y, (m, f)),
        None => Ok(LaunchStats::default()),
    }
}

/// The backward of [`launch`]: `dgu = [dy · u · act'(g), dy · act(g)]`. Errors as [`launch`]'s.
pub fn launch_backward<T: GluElement>(
    device: &Device,
    act: Activation,
    (dy, gu): (&DeviceBuffer<T>, &DeviceBuffer<T>),
    dgu: &mut DeviceBuffer<T>,
    (m, f): (u32, u32),
) -> Result<LaunchStats, LaunchError> {
    let mf = m as u64 * f as u64;
    let lens = [
        ("dy", dy.len(), mf),
        ("gu", gu.len(), 2 * mf),
        ("dgu", dgu.len(), 2 * mf),
    ];
    match plan::<T>(act, &lens, (m, f), BWD_ROWS)? {
        Some(cfg) => T::backward(device, cfg, act, (dy, gu), dgu, (m, f)),
        None => Ok(LaunchStats::default()),
    }
}

/// `act(x)` and `act'(x)` in f64, from their definitions (SiLU; GELU in its tanh form).
pub fn act_and_slope(act: Activation, x: f64) -> (f64, f64) {
    match act {
        Activation::Silu => {
            let s = 1.0 / (1.0 + (-x).exp());
            (x * s, s * (1.0 + x * (1.0 - s)))
        }
        Activation::Gelu => {
            let (c, a) = ((2.0 / std::f64::consts::PI).sqrt(), 0.044715);
            let t = (c * (x + a * x * x * x)).tanh();
            let value = 0.5 * x * (1.0 + t);
            (
                value,
                0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * a * x * x),
            )
        }
        Activation::Relu => (x.max(0.0), (x > 0.0) as u8 as f64),
        Activation::None => (x, 1.0),
    }
}

/// The fp64 reference of [`launch`]: `y` (`m` rows of `f`).
pub fn reference(act: Activation, gu: &[f32], f: usize) -> Vec<f64> {
    gu.chunks(2 * f.max(1))
        .flat_map(|row| {
            let (g, u) = row.split_at(f);
            g.iter()
                .zip(u)
                .map(move |(&g, &u)| act_and_slope(act, g as f64).0 * u as f64)
        })
        .collect()
}

/// The fp64 reference of [`launch_backward`]: `dgu` (`m` rows of `2f`).
pub fn reference_backward(act: Activation, dy: &[f32], gu: &[f32], f: usize) -> Vec<f64> {
    let mut dgu = Vec::with_capacity(gu.len());
    for (row, d) in gu.chunks(2 * f.max(1)).zip(dy.chunks(f.max(1))) {
        let (g, u) = row.split_at(f);
        let slopes = g.iter().map(|&g| act_and_slope(act, g as f64));
        let (dg, du): (Vec<f64>, Vec<f64>) = slopes
            .zip(u.iter().zip(d))
            .map(|((a, s), (&u, &d))| (d as f64 * u as f64 * s, d as f64 * a))
            .unzip();
        dgu.extend(dg);
        dgu.extend(du);
    }
    dgu
}

/// `gu`, the stacked products: `[..., 2·F]`.
const GU: Param = Param {
    name: "gu",
    flag: "input",
    role: Role::Input,
    elem: Elem::Op,
    dims: &[Dim::Rows, Dim::Twice("F")],
    alt: None,
    doc: "gu = [g, u], the gate's and the up projection's products side by side, [..., 2*F]",
};

/// The gated unit's four operators, as the registry lists them.
pub const OPS: &[&crate::op::Op] = &[&SWIGLU, &SWIGLU_BACKWARD, &GEGLU, &GEGLU_BACKWARD];

/// Declares the forward's and the backward's descriptions of one activation.
macro_rules! describe {
    ($fwd:ident, $bwd:ident, $name:literal, $act:ident, $formula:literal) => {
        #[doc = concat!("`", $name, "`: ", $formula, ".")]
        pub const $fwd: crate::op::Op = crate::op::Op {
            name: $name,
            summary: concat!($formula, " from gu = [g, u]"),
            params: &[
                GU,
                Param {
                    name: "y",
                    flag: "output",
                    role: Role::Output,
                    elem: Elem::Op,
                    dims: &[Dim::Rows, Dim::Sym("F")],
                    alt: None,
                    doc: "y, [..., F]",
                },
            ],
            scalars: &[],
            dtypes: crate::rows::describe::DTYPES,
            constraints: crate::op::no_constraints,
            launch: op::launch::<{ Activation::$act.code() }>,
            sample: op::sample,
            error: op::error::<{ Activation::$act.code() }>,
            tolerance: crate::rows::describe::tolerance,
            agreement: crate::op::norm_relative_error,
            cases: op::cases,
            bytes: |s, d| op::bytes(s, d, 3.0),
        };

        #[doc = concat!("`", $name, "_backward`: dgu = [dy · u · act'(g), dy · act(g)].")]
        pub const $bwd: crate::op::Op = crate::op::Op {
            name: concat!($name, "_backward"),
            summary: concat!(
                "The backward of ",
                $name,
                ": dgu = [dy · u · act'(g), dy · act(g)]"
            ),
            params: &[
                Param {
                    name: "dy",
                    flag: "dy",
                    role: Role::Input,
                    elem: Elem::Op,
                    dims: &[Dim::Rows, Dim::Sym("F")],
                    alt: None,
                    doc: "dy, the gradient of y, [..., F]",
                },
                GU,
                Param {
                    name: "dgu",
                    flag: "dgu-out",
                    role: Role::Output,
                    elem: Elem::Op,
                    dims: &[Dim::Rows, Dim::Twice("F")],
                    alt: None,
                    doc: "dgu = [dg, du], [..., 2*F]",
                },
            ],
            scalars: &[],
            dtypes: crate::rows::describe::DTYPES,
            constraints: crate::op::no_constraints,
            launch: op::launch_backward::<{ Activation::$act.code() }>,
            sample: op::sample_backward,
            error: op::error_backward::<{ Activation::$act.code() }>,
            tolerance: crate::rows::describe::tolerance,
            agreement: crate::op::norm_relative_error,
            cases: op::cases,
            bytes: |s, d| op::bytes(s, d, 5.0),
        };
    };
}
describe!(SWIGLU, SWIGLU_BACKWARD, "swiglu", Silu, "y = silu(g) · u");
describe!(
    GEGLU,
    GEGLU_BACKWARD,
    "geglu",
    Gelu,
    "y = gelu(g) · u (tanh form)"
);

/// The descriptions' functions, generic over the activation's code.
mod op {
    use super::*;
    use crate::op::{norm_relative_error, Dtype, HostOutput, Launch, Launched, Rng, Sizes};

    fn activation(code: u32) -> Activation {
        if code == Activation::Silu.code() {
            Activation::Silu
        } else {
            Activation::Gelu
        }
    }

    fn mf(s: &Sizes) -> (u32, u32) {
        (s.u32("M"), s.u32("F"))
    }

    pub fn launch<const ACT: u32>(d: &Device, l: &mut Launch) -> Launched {
        let mf = mf(&l.sizes);
        crate::by_dtype!(l.dtype, T => {
            let mut y = l.take::<T>(d, "y")?;
            let st = super::launch(d, activation(ACT), l.input::<T>("gu")?, &mut y, mf);
            l.put("y", y);
            st
        })
    }

    pub fn launch_backward<const ACT: u32>(d: &Device, l: &mut Launch) -> Launched {
        let mf = mf(&l.sizes);
        crate::by_dtype!(l.dtype, T => {
            let mut dgu = l.take::<T>(d, "dgu")?;
            let inputs = (l.input::<T>("dy")?, l.input::<T>("gu")?);
            let st = super::launch_backward(d, activation(ACT), inputs, &mut dgu, mf);
            l.put("dgu", dgu);
            st
        })
    }

    /// Products in [−4, 4]: both tails of the activations and their bend near 0.
    pub fn sample(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
        vec![rng.values(2 * s.get("M") * s.get("F"), 4.0, 0.0)]
    }

    /// `dy` in [−1, 1], then `gu` as [`sample`]'s.
    pub fn sample_backward(s: &Sizes, rng: &mut Rng) -> Vec<Vec<f32>> {
        let dy = rng.values(s.get("M") * s.get("F"), 1.0, 0.0);
        vec![dy, sample(s, rng).remove(0)]
    }

    pub fn error<const ACT: u32>(o: &HostOutput) -> f64 {
        let want = reference(activation(ACT), o.input("gu"), o.sizes.get("F"));
        norm_relative_error(o.output("y").unwrap_or(&[]), &want)
    }

    pub fn error_backward<const ACT: u32>(o: &HostOutput) -> f64 {
        let want = reference_backward(
            activation(ACT),
            o.input("dy"),
            o.input("gu"),
            o.sizes.get("F"),
        );
        norm_relative_error(o.output("dgu").unwrap_or(&[]), &want)
    }

    /// `ck run OP-DTYPE --n F`: 257 rows of F; `ck cross-check`: a single element, rows shorter
    /// and longer than a tile, an F that is not a multiple of a vector (element accesses).
    pub fn cases(n: Option<u32>) -> Vec<Sizes> {
        let shape = |m: usize, f: usize| Sizes::rows(&[m]).with("F", f);
        match n {
            Some(f) => vec![shape(257, f.max(1) as usize)],
            None => [(1, 1), (37, 200), (3, 1003), (2, 4104)]
                .map(|(m, f)| shape(m, f))
                .to_vec(),
        }
    }

    /// `tensors` passes over `M × F` elements.
    pub fn bytes(s: &Sizes, d: Dtype, tensors: f64) -> f64 {
        tensors * (s.get("M") * s.get("F") * d.bytes()) as f64
    }
}
