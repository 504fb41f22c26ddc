//! The library's operators as native functions on DLPack capsules. The `ck_rs` Python layer
//! makes the capsules (and allocates the outputs like the inputs), so each function here checks
//! shapes and types, picks the kernel by element type and runs it where the tensors are.

use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer, LaunchError, LaunchStats};
use ck_core::rules;
use ck_kernels as kernels;
use ck_python::{launch_error, type_error, value_error, Backend, Dtype, Tensor};
use kernels::rows;
use pyo3::prelude::*;

type Launched = Result<LaunchStats, LaunchError>;

/// The plain GEMM of one element type (the row operators are generic over it).
trait Kernels: Sized {
    fn gemm(d: &Device, a: &Buf<Self>, b: &Buf<Self>, c: &mut Buf<f32>, p: Mnk) -> Launched;
}

type Buf<T> = DeviceBuffer<T>;
type Mnk = (u32, u32, u32);

impl Kernels for f32 {
    fn gemm(d: &Device, a: &Buf<f32>, b: &Buf<f32>, c: &mut Buf<f32>, p: Mnk) -> Launched {
        kernels::gemm::mma_sync::host::launch_f32(d, a, b, c, p)
    }
}

impl Kernels for Bf16 {
    fn gemm(d: &Device, a: &Buf<Bf16>, b: &Buf<Bf16>, c: &mut Buf<f32>, p: Mnk) -> Launched {
        kernels::gemm::auto::launch_bf16(d, a, b, c, p)
    }
}

/// Runs `$body` with `$t` the element type of `$dtype`.
macro_rules! by_dtype {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            Dtype::F32 => {
                type $t = f32;
                $body
            }
            Dtype::Bf16 => {
                type $t = Bf16;
                $body
            }
        }
    };
}

fn tensor<'py>(name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<Tensor<'py>> {
    Tensor::from_capsule(name, obj)
}

/// Every tensor has `first`'s element type.
fn same_dtype(ts: &[&Tensor<'_>]) -> PyResult<Dtype> {
    let d = ts[0].dtype();
    match ts.iter().find(|t| t.dtype() != d) {
        Some(t) => Err(type_error(
            rules::DTYPE_MISMATCH,
            format!(
                "`{}` is {} but `{}` is {}; give every tensor of the call one element type",
                ts[0].name(),
                d.name(),
                t.name(),
                t.dtype().name()
            ),
        )),
        None => Ok(d),
    }
}

fn shape_error(t: &Tensor<'_>, want: String) -> PyErr {
    value_error(
        rules::SHAPE_MISMATCH,
        format!("`{}` is {}; {want}", t.name(), t.describe()),
    )
}

fn to_u32(what: &str, v: usize) -> PyResult<u32> {
    u32::try_from(v).map_err(|_| {
        value_error(
            rules::ARGUMENT_SIZE,
            format!(
                "{what} is {v}; kernels index with 32 bits (at most {})",
                u32::MAX
            ),
        )
    })
}

/// `(rows, columns)` of a row-wise operator's `x`: the last dimension, and the others
/// flattened.
fn rows_of(x: &Tensor<'_>) -> PyResult<(u32, u32)> {
    let Some(&n) = x.shape().last() else {
        return Err(shape_error(
            x,
            "give at least one dimension (rows are the last)".into(),
        ));
    };
    let m: usize = x.shape()[..x.shape().len() - 1].iter().product();
    Ok((
        to_u32("the number of rows", m)?,
        to_u32("the row length", n)?,
    ))
}

/// `t` has exactly `shape`.
fn expect_shape(t: &Tensor<'_>, shape: &[usize]) -> PyResult<()> {
    if t.shape() != shape {
        return Err(shape_error(t, format!("it must be {shape:?}")));
    }
    Ok(())
}

/// A finite, non-negative epsilon (the CLI's `--eps` rule).
fn check_eps(eps: f32) -> PyResult<()> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(value_error(
            rules::BAD_EPS,
            format!("eps is {eps}; give a finite, non-negative number"),
        ));
    }
    Ok(())
}

/// RMSNorm of each row of `x` into `y`.
#[pyfunction]
#[pyo3(signature = (x, gamma, y, eps, stream=None))]
pub fn rmsnorm(
    x: &Bound<'_, PyAny>,
    gamma: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    eps: f32,
    stream: Option<u64>,
) -> PyResult<()> {
    let (x, gamma, y) = (tensor("x", x)?, tensor("gamma", gamma)?, tensor("y", y)?);
    let dtype = same_dtype(&[&x, &gamma, &y])?;
    let (m, n) = rows_of(&x)?;
    expect_shape(&gamma, &[n as usize])?;
    expect_shape(&y, x.shape())?;
    check_eps(eps)?;
    // SAFETY: `stream` is the handle `ck_rs` passes: torch's current stream of the tensors'
    // device, which torch keeps alive while work is queued on it.
    let be = unsafe { Backend::of(&[&x, &gamma, &y], stream)? };
    if m == 0 || n == 0 {
        return Ok(()); // no element to compute
    }
    by_dtype!(dtype, T => {
        let (xb, gb, mut yb) = (be.buffer::<T>(&x)?, be.buffer::<T>(&gamma)?, be.buffer::<T>(&y)?);
        rows::rmsnorm::host::launch(be.device(), &xb, &gb, &mut yb, (m, n, eps)).map_err(launch_error)?;
        be.finish(&yb, &y)
    })
}

/// `r = x + residual` and the RMSNorm of `r`'s rows into `y`.
#[pyfunction]
#[pyo3(signature = (x, residual, gamma, r, y, eps, stream=None))]
pub fn add_rmsnorm(
    x: &Bound<'_, PyAny>,
    residual: &Bound<'_, PyAny>,
    gamma: &Bound<'_, PyAny>,
    r: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    eps: f32,
    stream: Option<u64>,
) -> PyResult<()> {
    let (x, res, gamma) = (
        tensor("x", x)?,
        tensor("residual", residual)?,
        tensor("gamma", gamma)?,
    );
    let (r, y) = (tensor("residual_out", r)?, tensor("y", y)?);
    let all = [&x, &res, &gamma, &r, &y];
    let dtype = same_dtype(&all)?;
    let (m, n) = rows_of(&x)?;
    expect_shape(&gamma, &[n as usize])?;
    for t in [&res, &r, &y] {
        expect_shape(t, x.shape())?;
    }
    check_eps(eps)?;
    // SAFETY: `stream` is the handle `ck_rs` passes: torch's current stream of the tensors'
    // device, which torch keeps alive while work is queued on it.
    let be = unsafe { Backend::of(&all, stream)? };
    if m == 0 || n == 0 {
        return Ok(());
    }
    by_dtype!(dtype, T => {
        let (xb, rb, gb) = (be.buffer::<T>(&x)?, be.buffer::<T>(&res)?, be.buffer::<T>(&gamma)?);
        let (mut rob, mut yb) = (be.buffer::<T>(&r)?, be.buffer::<T>(&y)?);
        rows::add_rmsnorm::host::launch(be.device(), (&xb, &rb, &gb), (&mut rob, &mut yb), (m, n, eps))
            .map_err(launch_error)?;
        be.finish(&rob, &r)?;
        be.finish(&yb, &y)
    })
}

/// LayerNorm of each row of `x` into `y`; each row's mean and `rsqrt(var + eps)` into `mean`
/// and `rstd` (float32, one per row) when given.
#[pyfunction]
#[pyo3(signature = (x, gamma, beta, y, eps, mean=None, rstd=None, stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm(
    x: &Bound<'_, PyAny>,
    gamma: &Bound<'_, PyAny>,
    beta: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    eps: f32,
    mean: Option<&Bound<'_, PyAny>>,
    rstd: Option<&Bound<'_, PyAny>>,
    stream: Option<u64>,
) -> PyResult<()> {
    let (x, gamma, beta, y) = (
        tensor("x", x)?,
        tensor("gamma", gamma)?,
        tensor("beta", beta)?,
        tensor("y", y)?,
    );
    let dtype = same_dtype(&[&x, &gamma, &beta, &y])?;
    let (m, n) = rows_of(&x)?;
    expect_shape(&gamma, &[n as usize])?;
    expect_shape(&beta, &[n as usize])?;
    expect_shape(&y, x.shape())?;
    check_eps(eps)?;
    let stats = match (mean, rstd) {
        (Some(a), Some(b)) => Some((tensor("mean", a)?, tensor("rstd", b)?)),
        (None, None) => None,
        _ => {
            return Err(value_error(
                rules::SHAPE_MISMATCH,
                "give both `mean` and `rstd`, or neither".into(),
            ))
        }
    };
    let mut all = vec![&x, &gamma, &beta, &y];
    if let Some((a, b)) = &stats {
        for t in [a, b] {
            if t.dtype() != Dtype::F32 {
                return Err(type_error(
                    rules::DTYPE_MISMATCH,
                    format!(
                        "`{}` is {}; the statistics are float32",
                        t.name(),
                        t.describe()
                    ),
                ));
            }
            expect_shape(t, &x.shape()[..x.shape().len() - 1])?;
        }
        all.extend([a, b]);
    }
    // SAFETY: `stream` is the handle `ck_rs` passes: torch's current stream of the tensors'
    // device, which torch keeps alive while work is queued on it.
    let be = unsafe { Backend::of(&all, stream)? };
    if m == 0 || n == 0 {
        // No element to compute; the statistics of empty rows (n = 0) are NaN, written by
        // the Python layer.
        return Ok(());
    }
    let (mut mb, mut rb) = match &stats {
        Some((a, b)) => (be.buffer::<f32>(a)?, be.buffer::<f32>(b)?),
        None => {
            let empty = || DeviceBuffer::<f32>::empty(be.device()).map_err(launch_error);
            (empty()?, empty()?)
        }
    };
    by_dtype!(dtype, T => {
        let (xb, gb, bb, mut yb) = (
            be.buffer::<T>(&x)?,
            be.buffer::<T>(&gamma)?,
            be.buffer::<T>(&beta)?,
            be.buffer::<T>(&y)?,
        );
        let bufs = kernels::rows::layernorm::host::Buffers {
            x: &xb,
            gamma: &gb,
            beta: &bb,
            y: &mut yb,
            mean: &mut mb,
            rstd: &mut rb,
        };
        rows::layernorm::host::launch(be.device(), bufs, (m, n, eps)).map_err(launch_error)?;
        be.finish(&yb, &y)
    })?;
    if let Some((a, b)) = &stats {
        be.finish(&mb, a)?;
        be.finish(&rb, b)?;
    }
    Ok(())
}

/// Softmax of each row of `x` into `y`.
#[pyfunction]
#[pyo3(signature = (x, y, stream=None))]
pub fn softmax(x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, stream: Option<u64>) -> PyResult<()> {
    let (x, y) = (tensor("x", x)?, tensor("y", y)?);
    let dtype = same_dtype(&[&x, &y])?;
    let (m, n) = rows_of(&x)?;
    expect_shape(&y, x.shape())?;
    // SAFETY: `stream` is the handle `ck_rs` passes: torch's current stream of the tensors'
    // device, which torch keeps alive while work is queued on it.
    let be = unsafe { Backend::of(&[&x, &y], stream)? };
    if m == 0 || n == 0 {
        return Ok(());
    }
    by_dtype!(dtype, T => {
        let (xb, mut yb) = (be.buffer::<T>(&x)?, be.buffer::<T>(&y)?);
        rows::softmax::host::launch(be.device(), &xb, &mut yb, (m, n)).map_err(launch_error)?;
        be.finish(&yb, &y)
    })
}

/// `c = act(alpha · a·b + beta · d + bias)` (`a` M × K, `b` K × N; `c` and `d` M × N, `bias`
/// N). Without an epilogue and with a float32 `c`: float32 `a`, `b` on the f32 GEMM, bfloat16
/// ones on the bf16 GEMM (where N or K is not a multiple of 8) or else on the kernel
/// `gemm::auto` picks, as `ck run gemm` does. With an epilogue, or a bfloat16 `c`: that choice
/// among the bf16 tensor-core GEMMs with the fused epilogue (on the emulator float32 `a`, `b` are rounded to bfloat16; on a GPU they must be
/// bfloat16), `d` and `bias` of `c`'s type. `activation`: 0 none, 1 relu, 2 gelu, 3 silu.
#[pyfunction]
#[pyo3(signature = (a, b, c, d=None, bias=None, alpha=1.0, beta=1.0, activation=0, stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    c: &Bound<'_, PyAny>,
    d: Option<&Bound<'_, PyAny>>,
    bias: Option<&Bound<'_, PyAny>>,
    alpha: f32,
    beta: f32,
    activation: u32,
    stream: Option<u64>,
) -> PyResult<()> {
    use kernels::gemm::epilogue::Activation;
    let (a, b, c) = (tensor("a", a)?, tensor("b", b)?, tensor("c", c)?);
    let d = d.map(|d| tensor("d", d)).transpose()?;
    let bias = bias.map(|t| tensor("bias", t)).transpose()?;
    let dtype = same_dtype(&[&a, &b])?;
    let ([m, k], [k2, n]) = (matrix(&a)?, matrix(&b)?);
    if k != k2 {
        return Err(shape_error(
            &b,
            format!("its rows must match `a`'s columns ({k})"),
        ));
    }
    expect_shape(&c, &[m, n])?;
    let activation = match activation {
        0 => Activation::None,
        1 => Activation::Relu,
        2 => Activation::Gelu,
        3 => Activation::Silu,
        other => {
            return Err(value_error(
                rules::BAD_ACTIVATION,
                format!("activation code {other}; use none, relu, gelu or silu"),
            ))
        }
    };
    let mnk = (to_u32("M", m)?, to_u32("N", n)?, to_u32("K", k)?);
    let mut all = vec![&a, &b, &c];
    all.extend(d.iter());
    all.extend(bias.iter());
    // SAFETY: `stream` is the handle `ck_rs` passes: torch's current stream of the tensors'
    // device, which torch keeps alive while work is queued on it.
    let be = unsafe { Backend::of(&all, stream)? };
    let fused = d.is_some()
        || bias.is_some()
        || alpha != 1.0
        || activation != Activation::None
        || c.dtype() == Dtype::Bf16;
    let auto = dtype == Dtype::Bf16 && n % 8 == 0 && k % 8 == 0;
    if !fused && (m == 0 || n == 0) {
        return Ok(()); // C is empty (K = 0 runs: the kernel writes the empty sum, 0)
    }
    if !fused && !auto {
        return by_dtype!(dtype, T => {
            let (ab, bb, mut cb) = (be.buffer::<T>(&a)?, be.buffer::<T>(&b)?, be.buffer::<f32>(&c)?);
            T::gemm(be.device(), &ab, &bb, &mut cb, mnk).map_err(launch_error)?;
            be.finish(&cb, &c)
        });
    }
    if !be.device().is_emulator() && dtype != Dtype::Bf16 {
        return Err(type_error(
            rules::DTYPE_UNSUPPORTED,
            format!(
                "`a` is {}; the fused GEMM on the GPU takes bfloat16 operands",
                a.describe()
            ),
        ));
    }
    if let Some(t) = d.iter().chain(bias.iter()).find(|t| t.dtype() != c.dtype()) {
        return Err(type_error(
            rules::DTYPE_MISMATCH,
            format!(
                "`{}` is {}; give it `c`'s type ({})",
                t.name(),
                t.describe(),
                c.dtype().name()
            ),
        ));
    }
    if let Some(d) = &d {
        expect_shape(d, &[m, n])?;
    }
    if let Some(bias) = &bias {
        expect_shape(bias, &[n])?;
    }
    let (ab, bb) = (be.bf16(&a)?, be.bf16(&b)?);
    by_dtype!(c.dtype(), O => {
        let db = d.as_ref().map(|t| be.buffer::<O>(t)).transpose()?;
        let biasb = bias.as_ref().map(|t| be.buffer::<O>(t)).transpose()?;
        let mut cb = be.buffer::<O>(&c)?;
        let args = kernels::gemm::fused::EpilogueArgs {
            alpha,
            beta,
            d: db.as_ref(),
            bias: biasb.as_ref(),
            activation,
        };
        kernels::gemm::auto::launch(be.device(), (&ab, &bb), &mut cb, 1, mnk, &args)
            .map_err(launch_error)?;
        be.finish(&cb, &c)
    })
}

/// A mixture-of-experts layer's grouped product: `c[rows of expert g] = a[its rows] · b[g]`,
/// `a` `[Σ tokens, K]`, `b` `[experts, K, N]`, `c` `[Σ tokens, N]` (float32 or bfloat16),
/// expert `g`'s rows the `tokens[g]` after expert `g − 1`'s, in one launch of the grouped GEMM
/// (`ck_kernels::gemm::grouped`). N and K multiples of 8 (each expert's rows are read and
/// written in place); `a` and `b` bfloat16 (float32 on the emulator too: rounded).
#[pyfunction]
#[pyo3(signature = (a, b, c, tokens, stream=None))]
pub fn grouped_mm(
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    c: &Bound<'_, PyAny>,
    tokens: Vec<u64>,
    stream: Option<u64>,
) -> PyResult<()> {
    use kernels::gemm::grouped::host::{GroupedGemm, Problem};
    let (a, b, c) = (tensor("a", a)?, tensor("b", b)?, tensor("c", c)?);
    let dtype = same_dtype(&[&a, &b])?;
    let [m, k] = matrix(&a)?;
    let [experts, k2, n] = match b.shape()[..] {
        [e, r, c] => [e, r, c],
        _ => {
            return Err(shape_error(
                &b,
                "give the experts' weights as [experts, K, N]".into(),
            ))
        }
    };
    if k2 != k {
        return Err(shape_error(
            &b,
            format!("its rows must match `a`'s columns ({k})"),
        ));
    }
    expect_shape(&c, &[m, n])?;
    if tokens.len() != experts {
        return Err(value_error(
            rules::SHAPE_MISMATCH,
            format!(
                "{} token counts for {experts} experts; give one per expert",
                tokens.len()
            ),
        ));
    }
    let total: u64 = tokens.iter().sum();
    if total != m as u64 {
        return Err(value_error(
            rules::SHAPE_MISMATCH,
            format!("the token counts add up to {total} but `a` has {m} rows; give each expert's rows, in order"),
        ));
    }
    if n % 8 != 0 || k % 8 != 0 {
        return Err(value_error(
            rules::SHAPE_UNSUPPORTED,
            format!("N = {n}, K = {k}: each expert's rows are read and written in place as 16-byte vectors, so N and K must be multiples of 8; pad the weights (and `a`'s columns) with zeros"),
        ));
    }
    // SAFETY: `stream` is the handle `ck_rs` passes: torch's current stream of the tensors'
    // device, which torch keeps alive while work is queued on it.
    let be = unsafe { Backend::of(&[&a, &b, &c], stream)? };
    if !be.device().is_emulator() && dtype != Dtype::Bf16 {
        return Err(type_error(
            rules::DTYPE_UNSUPPORTED,
            format!(
                "`a` is {}; the grouped GEMM on the GPU takes bfloat16 operands",
                a.describe()
            ),
        ));
    }
    let (n, k) = (to_u32("N", n)?, to_u32("K", k)?);
    let problems = tokens
        .iter()
        .map(|&t| Ok(Problem::new(to_u32("a token count", t as usize)?, n, k)))
        .collect::<PyResult<Vec<_>>>()?;
    let grouped = GroupedGemm::new(be.device(), &problems).map_err(launch_error)?;
    let (ab, bb) = (be.bf16(&a)?, be.bf16(&b)?);
    by_dtype!(c.dtype(), O => {
        let mut cb = be.buffer::<O>(&c)?;
        let args = kernels::gemm::fused::EpilogueArgs::default();
        grouped
            .launch(be.device(), (&ab, &bb), &mut cb, &args)
            .map_err(launch_error)?;
        be.finish(&cb, &c)
    })
}

fn matrix(t: &Tensor<'_>) -> PyResult<[usize; 2]> {
    match t.shape()[..] {
        [r, c] => Ok([r, c]),
        _ => Err(shape_error(t, "give a matrix (2 dimensions)".into())),
    }
}

/// Attention forward: `o = softmax(scale · q·kᵀ + mask) · v` and the row log-sum-exp into
/// `lse` (float32). q, k, v and o are bfloat16 (float32 on the emulator too: rounded to
/// bfloat16 before the kernel, `o` widened after it).
#[pyfunction]
#[pyo3(signature = (q, k, v, o, lse, causal=false, scale=None, stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn attention(
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    o: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    causal: bool,
    scale: Option<f32>,
    stream: Option<u64>,
) -> PyResult<()> {
    let (q, k, v) = (tensor("q", q)?, tensor("k", k)?, tensor("v", v)?);
    let (o, lse) = (tensor("o", o)?, tensor("lse", lse)?);
    let four = |t: &Tensor<'_>| -> PyResult<[usize; 4]> {
        match t.shape()[..] {
            [b, h, s, d] => Ok([b, h, s, d]),
            _ => Err(shape_error(t, "give [batch, heads, seq, head_dim]".into())),
        }
    };
    let ([batch, heads, sq, d], [kb, kv_heads, sk, kd]) = (four(&q)?, four(&k)?);
    if kb != batch || kd != d {
        return Err(shape_error(
            &k,
            format!(
                "it must be [{batch}, kv_heads, seq_k, {d}] for q {:?}",
                q.shape()
            ),
        ));
    }
    expect_shape(&v, k.shape())?;
    expect_shape(&o, q.shape())?;
    expect_shape(&lse, &[batch, heads, sq])?;
    if lse.dtype() != Dtype::F32 {
        return Err(type_error(
            rules::DTYPE_MISMATCH,
            format!("`lse` is {}; the log-sum-exp is float32", lse.describe()),
        ));
    }
    let shape = kernels::attention::host::Shape {
        batch: to_u32("batch", batch)?,
        heads: to_u32("heads", heads)?,
        kv_heads: to_u32("kv_heads", kv_heads)?,
        sq: to_u32("seq_q", sq)?,
        sk: to_u32("seq_k", sk)?,
        head_dim: to_u32("head_dim", d)?,
    };
    let options = kernels::attention::host::Options { causal, scale };
    let all = [&q, &k, &v, &o, &lse];
    // SAFETY: `stream` is the handle `ck_rs` passes: torch's current stream of the tensors'
    // device, which torch keeps alive while work is queued on it.
    let be = unsafe { Backend::of(&all, stream)? };
    if !be.device().is_emulator() {
        if let Some(t) = [&q, &k, &v, &o]
            .into_iter()
            .find(|t| t.dtype() != Dtype::Bf16)
        {
            return Err(type_error(
                rules::DTYPE_UNSUPPORTED,
                format!(
                    "`{}` is {}; attention on the GPU takes bfloat16 q, k, v and o",
                    t.name(),
                    t.describe()
                ),
            ));
        }
    }
    let (qb, kb, vb) = (be.bf16(&q)?, be.bf16(&k)?, be.bf16(&v)?);
    let (mut ob, mut lb) = (be.bf16(&o)?, be.buffer::<f32>(&lse)?);
    kernels::attention::host::launch(
        be.device(),
        (&qb, &kb, &vb),
        &mut ob,
        &mut lb,
        shape,
        options,
    )
    .map_err(launch_error)?;
    be.finish_bf16(&ob, &o)?;
    be.finish(&lb, &lse)
}
