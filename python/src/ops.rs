//! The operator not yet in the registry — attention against a KV cache, whose caches a call
//! writes in place — as a native function (the registry's operators go through
//! [`crate::registry::call`]): [`scratch_lens`] (the split scratch the caller allocates) and
//! [`run_kvcache`], reached from Python on DLPack capsules ([`decode_scratch`],
//! [`attention_kvcache`]) and from the C++ torch op on `DLTensor`s (`capi.rs`). The callers
//! allocate the outputs like the inputs; these check shapes and types and run the kernel where
//! the tensors are.

use ck_core::host::DeviceBuffer;
use ck_core::rules;
use ck_kernels as kernels;
use ck_python::{launch_error, type_error, value_error, Backend, Dtype, Tensor};
use pyo3::prelude::*;

fn tensor<'py>(name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<Tensor<'py>> {
    Tensor::from_capsule(name, obj)
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

/// `t` has exactly `shape`.
fn expect_shape(t: &Tensor<'_>, shape: &[usize]) -> PyResult<()> {
    if t.shape() != shape {
        return Err(shape_error(t, format!("it must be {shape:?}")));
    }
    Ok(())
}

/// The split scratch's lengths `(partial O, partial log-sum-exp)` in f32 elements of a decode
/// call ([`kernels::attention::decode::host::scratch_len`]: none for one split) for the split
/// count its launch plans ([`kernels::attention::decode::host::plan`]: `num_splits`, or with 0
/// the heuristic's for the multiprocessors of GPU `ordinal`, or of the emulator for `None`) —
/// what the caller allocates before [`run_kvcache`].
pub fn scratch_lens(
    shape: &kernels::attention::decode::host::Shape,
    capacity: u64,
    num_splits: u32,
    ordinal: Option<usize>,
) -> PyResult<(u64, u64)> {
    use kernels::attention::decode::host::{plan, scratch_len};
    let asked = (num_splits != 0).then_some(num_splits);
    let sms = ck_python::multiprocessors(ordinal)?;
    let plan = plan(shape, capacity, asked, sms).map_err(launch_error)?;
    Ok(scratch_len(shape, plan.splits))
}

/// [`scratch_lens`] for Python: `ordinal` −1 for the emulator.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn decode_scratch(
    batch: u32,
    heads: u32,
    kv_heads: u32,
    sq: u32,
    head_dim: u32,
    capacity: u64,
    num_splits: u32,
    ordinal: i64,
) -> PyResult<(u64, u64)> {
    let shape = kernels::attention::decode::host::Shape {
        batch,
        heads,
        kv_heads,
        sq,
        head_dim,
    };
    scratch_lens(&shape, capacity, num_splits, usize::try_from(ordinal).ok())
}

/// An optional tensor argument.
fn optional<'py>(
    name: &'static str,
    t: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<Tensor<'py>>> {
    t.map(|t| tensor(name, t)).transpose()
}

/// `t`'s int32 buffer of exactly `shape`.
fn indices(be: &Backend, t: &Tensor<'_>, shape: &[usize]) -> PyResult<DeviceBuffer<i32>> {
    if t.dtype() != Dtype::I32 {
        return Err(type_error(
            rules::DTYPE_MISMATCH,
            format!("`{}` is {}; it holds int32 indices", t.name(), t.describe()),
        ));
    }
    expect_shape(t, shape)?;
    be.buffer::<i32>(t)
}

/// The tensors of a decode call (see `ck_rs.attention_with_kvcache`): `q` `[batch, sq, heads,
/// D]`; `k_cache`, `v_cache` `[batch, capacity, kv_heads, D]`, or with `page_table` `[batch,
/// max_pages]` `[pages, page_size, kv_heads, D]`; `cache_seqlens` `[batch]` (int32); new `k`, `v`
/// `[batch, sq, kv_heads, D]` appended first (keys rotated with `rotary_cos`, `rotary_sin`
/// `[positions, rotary_dim / 2]`, and the queries into `q_rotated`); `o` like `q`, `lse`
/// `[batch, heads, sq]`; the split scratch `o_part`, `lse_part` ([`scratch_lens`]).
pub struct KvTensors<'py> {
    pub q: Tensor<'py>,
    pub k_cache: Tensor<'py>,
    pub v_cache: Tensor<'py>,
    pub cache_seqlens: Tensor<'py>,
    pub o: Tensor<'py>,
    pub lse: Tensor<'py>,
    pub o_part: Tensor<'py>,
    pub lse_part: Tensor<'py>,
    pub page_table: Option<Tensor<'py>>,
    pub k: Option<Tensor<'py>>,
    pub v: Option<Tensor<'py>>,
    pub rotary_cos: Option<Tensor<'py>>,
    pub rotary_sin: Option<Tensor<'py>>,
    pub q_rotated: Option<Tensor<'py>>,
}

impl KvTensors<'_> {
    /// The names of the tensors, in the order of the C entry's array (`capi.rs`).
    pub const NAMES: [&'static str; 14] = [
        "q",
        "k_cache",
        "v_cache",
        "cache_seqlens",
        "o",
        "lse",
        "o_part",
        "lse_part",
        "page_table",
        "k",
        "v",
        "rotary_cos",
        "rotary_sin",
        "q_rotated",
    ];
}

/// A decode call's scalars: the causal mask among the new tokens, the scale (`None`: 1/√D),
/// the split count asked for (0: the heuristic's; the scratch as [`scratch_lens`] sizes it),
/// the rotary style.
#[derive(Clone, Copy, Debug)]
pub struct KvOptions {
    pub causal: bool,
    pub scale: Option<f32>,
    pub splits: u32,
    pub rotary_interleaved: bool,
}

/// Decode attention against a KV cache from Python (the capsules of [`KvTensors`]).
#[pyfunction]
#[pyo3(signature = (q, k_cache, v_cache, cache_seqlens, o, lse, o_part, lse_part, page_table=None, k=None, v=None, rotary_cos=None, rotary_sin=None, q_rotated=None, causal=true, scale=None, num_splits=1, rotary_interleaved=false, stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn attention_kvcache(
    q: &Bound<'_, PyAny>,
    k_cache: &Bound<'_, PyAny>,
    v_cache: &Bound<'_, PyAny>,
    cache_seqlens: &Bound<'_, PyAny>,
    o: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    o_part: &Bound<'_, PyAny>,
    lse_part: &Bound<'_, PyAny>,
    page_table: Option<&Bound<'_, PyAny>>,
    k: Option<&Bound<'_, PyAny>>,
    v: Option<&Bound<'_, PyAny>>,
    rotary_cos: Option<&Bound<'_, PyAny>>,
    rotary_sin: Option<&Bound<'_, PyAny>>,
    q_rotated: Option<&Bound<'_, PyAny>>,
    causal: bool,
    scale: Option<f32>,
    num_splits: u32,
    rotary_interleaved: bool,
    stream: Option<u64>,
) -> PyResult<()> {
    let tensors = KvTensors {
        q: tensor("q", q)?,
        k_cache: tensor("k_cache", k_cache)?,
        v_cache: tensor("v_cache", v_cache)?,
        cache_seqlens: tensor("cache_seqlens", cache_seqlens)?,
        o: tensor("o", o)?,
        lse: tensor("lse", lse)?,
        o_part: tensor("o_part", o_part)?,
        lse_part: tensor("lse_part", lse_part)?,
        page_table: optional("page_table", page_table)?,
        k: optional("k", k)?,
        v: optional("v", v)?,
        rotary_cos: optional("rotary_cos", rotary_cos)?,
        rotary_sin: optional("rotary_sin", rotary_sin)?,
        q_rotated: optional("q_rotated", q_rotated)?,
    };
    let options = KvOptions {
        causal,
        scale,
        splits: num_splits,
        rotary_interleaved,
    };
    // SAFETY: `stream` is the handle `ck_rs` passes: torch's current stream of the tensors'
    // device, which torch keeps alive while work is queued on it.
    unsafe { run_kvcache(tensors, options, stream) }
}

/// Checks a decode call's tensors and runs it where they are (CUDA tensors on `stream`).
///
/// # Safety
/// As for [`ck_python::Backend::of`]: `stream`, for CUDA tensors, is a live stream of their
/// device's primary context that outlives the kernels queued on it.
pub unsafe fn run_kvcache(
    tensors: KvTensors<'_>,
    options: KvOptions,
    stream: Option<u64>,
) -> PyResult<()> {
    use kernels::attention::decode::host::{
        launch, CacheBuffers, CacheLayout, NewKv, Options, Rope, Scratch, Shape,
    };
    let KvTensors {
        q,
        k_cache: kc,
        v_cache: vc,
        cache_seqlens: seqlens,
        o,
        lse,
        o_part,
        lse_part,
        page_table: table,
        k,
        v,
        rotary_cos: cos,
        rotary_sin: sin,
        q_rotated: q_rot,
    } = tensors;
    let KvOptions {
        causal,
        scale,
        splits: num_splits,
        rotary_interleaved,
    } = options;
    let four = |t: &Tensor<'_>, what: &str| -> PyResult<[usize; 4]> {
        match t.shape()[..] {
            [a, b, c, d] => Ok([a, b, c, d]),
            _ => Err(shape_error(t, format!("give {what}"))),
        }
    };
    let [batch, sq, heads, d] = four(&q, "[batch, seq_q, heads, head_dim]")?;
    let [rows_a, rows_b, kv_heads, kd] = four(&kc, "[batch, capacity, kv_heads, head_dim] (or [pages, page_size, kv_heads, head_dim] with a page table)")?;
    if kd != d {
        return Err(shape_error(&kc, format!("its head dim must be q's, {d}")));
    }
    expect_shape(&vc, kc.shape())?;
    let layout = match &table {
        None => {
            if rows_a != batch {
                return Err(shape_error(
                    &kc,
                    format!("without a page table it is [batch = {batch}, capacity, kv_heads, head_dim]"),
                ));
            }
            CacheLayout::Contiguous {
                capacity: to_u32("the cache's capacity", rows_b)?,
            }
        }
        Some(t) => {
            let max_pages = match t.shape()[..] {
                [b, m] if b == batch => m,
                _ => {
                    return Err(shape_error(
                        t,
                        format!("it must be [batch = {batch}, max_pages]"),
                    ))
                }
            };
            CacheLayout::Paged {
                pages: to_u32("pages", rows_a)?,
                page_size: to_u32("page_size", rows_b)?,
                max_pages: to_u32("max_pages", max_pages)?,
            }
        }
    };
    let shape = Shape {
        batch: to_u32("batch", batch)?,
        heads: to_u32("heads", heads)?,
        kv_heads: to_u32("kv_heads", kv_heads)?,
        sq: to_u32("seq_q", sq)?,
        head_dim: to_u32("head_dim", d)?,
    };
    expect_shape(&o, q.shape())?;
    expect_shape(&lse, &[batch, heads, sq])?;
    if let Some(t) = [&lse, &o_part, &lse_part]
        .into_iter()
        .find(|t| t.dtype() != Dtype::F32)
    {
        return Err(type_error(
            rules::DTYPE_MISMATCH,
            format!("`{}` is {}; it is float32", t.name(), t.describe()),
        ));
    }
    let new_shape = [batch, sq, kv_heads, d];
    let rope = match (&k, &v, &cos, &sin) {
        (None, None, None, None) => None,
        (Some(k), Some(v), c, s) => {
            expect_shape(k, &new_shape)?;
            expect_shape(v, &new_shape)?;
            match (c, s) {
                (None, None) => None,
                (Some(c), Some(s)) => {
                    let (rows, half) = match c.shape()[..] {
                        [r, h] => (r, h),
                        _ => return Err(shape_error(c, "give [positions, rotary_dim / 2]".into())),
                    };
                    expect_shape(s, c.shape())?;
                    if let Some(t) = [c, s].into_iter().find(|t| t.dtype() != Dtype::F32) {
                        return Err(type_error(
                            rules::DTYPE_MISMATCH,
                            format!("`{}` is {}; the rotary tables are float32", t.name(), t.describe()),
                        ));
                    }
                    Some(Rope {
                        rotary_dim: to_u32("rotary_dim", 2 * half)?,
                        interleaved: rotary_interleaved,
                        table_rows: to_u32("the rotary tables' rows", rows)?,
                    })
                }
                _ => {
                    return Err(value_error(
                        rules::SHAPE_MISMATCH,
                        "give rotary_cos and rotary_sin together".into(),
                    ))
                }
            }
        }
        _ => {
            return Err(value_error(
                rules::SHAPE_MISMATCH,
                "give new k and v together; rotary_cos/rotary_sin rotate them (FlashAttention's contract: no rotation without new keys)".into(),
            ))
        }
    };
    let options = Options {
        causal,
        scale,
        splits: (num_splits != 0).then_some(num_splits),
    };
    let mut all = vec![&q, &kc, &vc, &seqlens, &o, &lse, &o_part, &lse_part];
    all.extend([&table, &k, &v, &cos, &sin, &q_rot].into_iter().flatten());
    // SAFETY: the caller's promise.
    let be = unsafe { Backend::of(&all, stream)? };
    let values = [
        Some(&q),
        Some(&kc),
        Some(&vc),
        Some(&o),
        k.as_ref(),
        v.as_ref(),
        q_rot.as_ref(),
    ];
    let emulator = be.device().is_emulator();
    let takes = |t: &&Tensor<'_>| t.dtype() == Dtype::Bf16 || (emulator && t.dtype() == Dtype::F32);
    {
        if let Some(t) = values.into_iter().flatten().find(|t| !takes(t)) {
            return Err(type_error(
                rules::DTYPE_UNSUPPORTED,
                format!(
                    "`{}` is {}; decode attention takes bfloat16 queries, keys and values (float32 too on the emulator)",
                    t.name(),
                    t.describe()
                ),
            ));
        }
    }
    let qb = be.bf16(&q)?;
    let (mut kb, mut vb) = (be.bf16(&kc)?, be.bf16(&vc)?);
    let sb = indices(&be, &seqlens, &[batch])?;
    let tb = match (&table, layout) {
        (Some(t), CacheLayout::Paged { max_pages, .. }) => {
            Some(indices(&be, t, &[batch, max_pages as usize])?)
        }
        _ => None,
    };
    let newb = match (&k, &v) {
        (Some(k), Some(v)) => Some((be.bf16(k)?, be.bf16(v)?)),
        _ => None,
    };
    // On the emulator the lengths and the table are on the host: the pages the call reads are
    // checked (on a GPU the kernels read them in place, unchecked: no synchronisation).
    if let (true, Some(t)) = (emulator, &tb) {
        let appended = if newb.is_some() { shape.sq } else { 0 };
        let lens = sb.to_vec().map_err(launch_error)?;
        let pages = t.to_vec().map_err(launch_error)?;
        layout
            .check_pages(&lens, &pages, appended)
            .map_err(launch_error)?;
    }
    let tables = match (&cos, &sin) {
        (Some(c), Some(s)) => Some((be.buffer::<f32>(c)?, be.buffer::<f32>(s)?)),
        _ => None,
    };
    let mut qrb = match (&q_rot, rope) {
        (Some(t), Some(_)) => {
            expect_shape(t, q.shape())?;
            Some(be.bf16(t)?)
        }
        _ => None,
    };
    let (mut ob, mut lb) = (be.bf16(&o)?, be.buffer::<f32>(&lse)?);
    let (mut opb, mut lpb) = (be.buffer::<f32>(&o_part)?, be.buffer::<f32>(&lse_part)?);
    launch(
        be.device(),
        &qb,
        CacheBuffers {
            k: &mut kb,
            v: &mut vb,
            seqlens: &sb,
            page_table: tb.as_ref(),
        },
        newb.as_ref().map(|(k, v)| NewKv {
            k,
            v,
            rope: match (rope, &tables) {
                (Some(r), Some((c, s))) => Some((r, c, s)),
                _ => None,
            },
        }),
        (&mut ob, &mut lb),
        Scratch {
            o_part: &mut opb,
            lse_part: &mut lpb,
            q_rotated: qrb.as_mut(),
        },
        (shape, layout),
        options,
    )
    .map_err(launch_error)?;
    if newb.is_some() {
        be.finish_bf16(&kb, &kc)?;
        be.finish_bf16(&vb, &vc)?;
    }
    be.finish_bf16(&ob, &o)?;
    be.finish(&lb, &lse)
}
