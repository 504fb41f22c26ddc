//! Host side of decode attention: the call's shape and its checks, the split heuristic, the
//! launches (append, decode, combine), and the fp64 reference.
//!
//! ```
//! use ck_core::host::Device;
//! use ck_kernels::attention::decode::host::{decode, reference, CacheLayout, Call, Options, Shape};
//! // One sequence holding 3 keys, one new query token, one head of dim 64.
//! let shape = Shape { batch: 1, heads: 1, kv_heads: 1, sq: 1, head_dim: 64 };
//! let layout = CacheLayout::Contiguous { capacity: 8 };
//! let call = Call {
//!     q: vec![0.0; 64],
//!     k_cache: (0..8 * 64).map(|i| (i / 64) as f32).collect(),
//!     v_cache: (0..8 * 64).map(|i| (i / 64) as f32).collect(),
//!     seqlens: vec![3],
//!     page_table: vec![],
//!     new_kv: None,
//!     rope: None,
//! };
//! let out = decode(&Device::emulator(), &call, shape, layout, Options::default()).unwrap();
//! // q = 0: every key scores 0, so O is the mean of the first 3 values, (0 + 1 + 2) / 3.
//! assert_eq!(out.o[0], 1.0);
//! assert!((out.lse[0] - 3f32.ln()).abs() < 1e-6);
//! let (o, _) = reference(&call, shape, layout, Options::default());
//! assert_eq!(o[0], 1.0);
//! ```

use super::append::AttentionAppendKv;
use super::combine::{AttentionDecodeCombine, ROWS_PER_BLOCK};
use super::schedule::{BN, ROWS, THREADS};
use super::{AttentionDecodeD128, AttentionDecodeD64};
use crate::attention::host::{check_scale, scale_or_default};
use crate::attention::LOG2_E;
use ck_core::device::Bf16;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats, TensorMap};
use ck_core::rules;
use ck_core::wgmma::SwizzleMode;

/// A decode call's shape: `q` `[batch, sq, heads, head_dim]` (`sq` new tokens per sequence).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub batch: u32,
    pub heads: u32,
    /// Key/value heads, dividing `heads`.
    pub kv_heads: u32,
    pub sq: u32,
    /// 64 or 128.
    pub head_dim: u32,
}

/// The KV cache's layout: `k_cache`, `v_cache` as `[batch, capacity, kv_heads, head_dim]`, or as
/// `[pages, page_size, kv_heads, head_dim]` with a page table `[batch, max_pages]` (int32) naming
/// each sequence's pages in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheLayout {
    Contiguous {
        capacity: u32,
    },
    Paged {
        pages: u32,
        page_size: u32,
        max_pages: u32,
    },
}

impl CacheLayout {
    /// Keys one sequence can hold.
    pub fn capacity(&self) -> u64 {
        match *self {
            CacheLayout::Contiguous { capacity } => capacity as u64,
            CacheLayout::Paged {
                page_size,
                max_pages,
                ..
            } => page_size as u64 * max_pages as u64,
        }
    }

    /// Rows of the cache tensor, `[rows, kv_heads, head_dim]`, for a batch of `batch`.
    fn rows(&self, batch: u32) -> u64 {
        match *self {
            CacheLayout::Contiguous { capacity } => batch as u64 * capacity as u64,
            CacheLayout::Paged {
                pages, page_size, ..
            } => pages as u64 * page_size as u64,
        }
    }

    /// Elements of `k_cache` (and `v_cache`).
    pub fn len(&self, shape: &Shape) -> u64 {
        self.rows(shape.batch) * shape.kv_heads as u64 * shape.head_dim as u64
    }

    /// Entries of the page table (0 for a contiguous cache).
    pub fn table_len(&self, batch: u32) -> u64 {
        match *self {
            CacheLayout::Contiguous { .. } => 0,
            CacheLayout::Paged { max_pages, .. } => batch as u64 * max_pages as u64,
        }
    }

    /// The page-table entries a call reads — pages `0..⌈keys / page_size⌉` of each sequence, its
    /// `keys` its `cache_seqlens` entry plus the `appended` new tokens — each a page of the pool,
    /// `0..pages`. Other entries are never read (a pool may mark them −1), nor those of a
    /// sequence whose length is out of range (its rows are NaN). The kernels read the table on
    /// the device and cannot refuse an entry (one outside the pool reads as zeros): [`decode`]
    /// and the Python call on the emulator, which hold it on the host, check it here.
    pub fn check_pages(
        &self,
        seqlens: &[i32],
        table: &[i32],
        appended: u32,
    ) -> Result<(), LaunchError> {
        let CacheLayout::Paged {
            pages,
            page_size,
            max_pages,
        } = *self
        else {
            return Ok(());
        };
        for (b, &len) in seqlens.iter().enumerate() {
            let keys = len as i64 + appended as i64;
            if len < 0 || keys as u64 > self.capacity() {
                continue;
            }
            let used = (keys as u64).div_ceil(page_size as u64) as usize;
            // A table shorter than the shape's is refused by the launch's length checks.
            let start = b * max_pages as usize;
            let Some(row) = table.get(start..start + used) else {
                continue;
            };
            if let Some((j, &page)) = row
                .iter()
                .enumerate()
                .find(|&(_, &p)| p < 0 || p as u32 >= pages)
            {
                return Err(invalid(
                    rules::BAD_PAGE_TABLE,
                    format!(
                        "page_table[{b}][{j}] is {page}, but sequence {b}'s {keys} keys lie in its \
                         pages 0..{used} and the pool holds pages 0..{pages}: give each of them a \
                         page of the pool"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The kernels' view: (page size or 0, max pages, pages, rows per page).
    fn kernel_args(&self, batch: u32) -> (u32, u32, u32, u32) {
        match *self {
            CacheLayout::Contiguous { capacity } => (0, 0, batch, capacity),
            CacheLayout::Paged {
                pages,
                page_size,
                max_pages,
            } => (page_size, max_pages, pages, page_size),
        }
    }
}

/// RoPE on the way into the cache: the first `rotary_dim` elements of each query and new key
/// rotated, half-split (Llama, NeoX) or `interleaved` pairs (GPT-J); the angles of position `p`
/// are row `p` of the cos/sin tables `[table_rows, rotary_dim / 2]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rope {
    pub rotary_dim: u32,
    pub interleaved: bool,
    pub table_rows: u32,
}

/// Masking, scale, and the split count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// New token `t` sees keys `≤ t + seqlen − sq` (the new tokens are the sequence's last `sq`
    /// positions; they see every cached key and, causally, each other).
    pub causal: bool,
    /// The scores' scale; `1 / √head_dim` when `None`.
    pub scale: Option<f32>,
    /// Splits of each sequence's keys; the heuristic's cut ([`plan`]) when `None`.
    pub splits: Option<u32>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            causal: true,
            scale: None,
            splits: None,
        }
    }
}

/// Row tiles per KV head: `group` heads × `sq` tokens in tiles of at most 64 rows.
fn row_tiles(shape: &Shape) -> (u32, u32, u32, u32) {
    let group = shape.heads / shape.kv_heads.max(1);
    let hc = group.clamp(1, ROWS);
    let tc = (ROWS / hc).min(shape.sq).max(1);
    (hc, tc, group.div_ceil(hc), shape.sq.div_ceil(tc))
}

/// How a call splits its sequences' keys: at most `splits` per sequence (the scratch holds two
/// slots per split), and — `target > 0` — cut on the device into chunks of one size across the
/// batch, `target` being the grid (the heuristic's [`super::schedule::Chunking`]); `target = 0`:
/// every sequence in `splits` equal shares (a count asked for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub splits: u32,
    pub target: u32,
}

/// The plan of a call on a cache of `capacity` keys on `multiprocessors`: the split count
/// `asked` for (1 to 1024, else an `argument-size` error), or the heuristic's.
///
/// The heuristic leaves the cut to the device, which reads the lengths (the host does not
/// know them): chunks of one block's share of the work, rounded to whole waves of items
/// ([`super::schedule::balanced_chunk`]). The host plans the room: `2 · multiprocessors / (KV
/// heads × row tiles) + 1` splits of one sequence — what a sequence holding nearly all the
/// batch's keys gets in two waves — each of at least two key tiles (one per consumer
/// warpgroup). A cache too short to split is not split: the block merges its warpgroups'
/// halves and no scratch is used.
///
/// ```
/// use ck_kernels::attention::decode::host::{plan, Plan, Shape};
/// let one = |batch| Shape { batch, heads: 32, kv_heads: 8, sq: 1, head_dim: 128 };
/// // 8 items per split: room for 264 / 8 + 1 = 34 splits, but a cache of 2048 keys holds 16
/// // tiles: at most 8 splits of two.
/// assert_eq!(plan(&one(64), 2048, None, 132)?, Plan { splits: 8, target: 132 });
/// assert_eq!(plan(&one(16), 32768, None, 132)?, Plan { splits: 34, target: 132 });
/// assert_eq!(plan(&one(1), 32768, None, 132)?, Plan { splits: 34, target: 132 });
/// // One sequence of 2 splits on 8 KV heads: a grid of 16 blocks.
/// assert_eq!(plan(&one(1), 512, None, 132)?, Plan { splits: 2, target: 16 });
/// assert_eq!(plan(&one(1), 256, None, 132)?, Plan { splits: 1, target: 0 }); // two key tiles
/// assert_eq!(plan(&one(1), 32768, Some(4), 132)?, Plan { splits: 4, target: 0 });
/// assert!(plan(&one(1), 32768, Some(5000), 132).is_err()); // its scratch: 5000 × 2 slots
/// # Ok::<(), ck_core::host::LaunchError>(())
/// ```
pub fn plan(
    shape: &Shape,
    capacity: u64,
    asked: Option<u32>,
    multiprocessors: u32,
) -> Result<Plan, LaunchError> {
    if let Some(splits) = asked {
        check_splits(splits)?;
        return Ok(Plan { splits, target: 0 });
    }
    let (_, _, hn, tn) = row_tiles(shape);
    let per_split = (shape.kv_heads as u64 * hn as u64 * tn as u64).max(1);
    let most = (capacity.div_ceil(BN as u64) / 2).clamp(1, 128);
    if most == 1 {
        return Ok(Plan {
            splits: 1,
            target: 0,
        });
    }
    let sms = multiprocessors.max(1) as u64;
    let splits = (2 * sms / per_split + 1).clamp(2, most);
    // The launch's grid: the most items the cut can make, at most a block per SM.
    let grid = (shape.batch as u64 * per_split * splits).min(sms);
    Ok(Plan {
        splits: splits as u32,
        target: grid as u32,
    })
}

/// Elements of the split scratch: partial O `[slots, batch, sq, heads, head_dim]` and partial
/// log-sum-exp `[slots, batch, sq, heads]` (two slots per split), then each sequence's split
/// count `[batch]` (for the combine launch) and a ticket per row tile ([`tickets`]: for the
/// merge in the kernel; u32 in f32 words); none for one split (the decode blocks write O
/// themselves).
pub fn scratch_len(shape: &Shape, splits: u32) -> (u64, u64) {
    if splits == 1 {
        return (0, 0);
    }
    let rows = 2 * splits as u64 * shape.batch as u64 * shape.sq as u64 * shape.heads as u64;
    (
        rows * shape.head_dim as u64,
        rows + shape.batch as u64 + tickets(shape),
    )
}

/// The row tiles of a call (`batch · kv_heads · row tiles per KV head`), each with a ticket in
/// the split scratch that counts its splits' arrivals where the kernel merges them.
pub fn tickets(shape: &Shape) -> u64 {
    let (_, _, hn, tn) = row_tiles(shape);
    shape.batch as u64 * shape.kv_heads as u64 * (hn * tn) as u64
}

/// Whether the decode kernel merges a row tile's splits itself (the block whose split ends
/// last), rather than a combine launch after it: for tiles of at most
/// [`MERGED_ROWS`](super::combine::MERGED_ROWS) rows, whose merge on one multiprocessor is
/// shorter than a launch ([`super::combine`] has the measurements).
pub fn merges_in_kernel(shape: &Shape) -> bool {
    let (hc, tc, _, _) = row_tiles(shape);
    hc * tc <= super::combine::MERGED_ROWS
}

fn invalid(rule: ck_core::rules::RuleId, message: String) -> LaunchError {
    LaunchError::invalid(rule, message)
}

impl Shape {
    /// Elements of `q` (and `o`).
    pub fn q_len(&self) -> u64 {
        self.batch as u64 * self.sq as u64 * self.heads as u64 * self.head_dim as u64
    }

    /// Elements of new `k` (and `v`).
    pub fn new_kv_len(&self) -> u64 {
        self.batch as u64 * self.sq as u64 * self.kv_heads as u64 * self.head_dim as u64
    }

    /// Elements of `lse` `[batch, heads, sq]`.
    pub fn lse_len(&self) -> u64 {
        self.batch as u64 * self.heads as u64 * self.sq as u64
    }

    /// The checks of every call: the head dim, the heads, the cache's layout, the rotation.
    pub fn check(
        &self,
        layout: &CacheLayout,
        rope: Option<&Rope>,
        options: &Options,
    ) -> Result<(), LaunchError> {
        crate::attention::host::check_heads(self.head_dim, self.heads, self.kv_heads)?;
        if let CacheLayout::Paged { page_size, .. } = *layout {
            if page_size < 16 || !page_size.is_power_of_two() {
                return Err(invalid(
                    rules::SHAPE_UNSUPPORTED,
                    format!(
                        "page_size is {page_size}; pages hold a power of two of at least 16 keys (16, 32, …, 256, …)"
                    ),
                ));
            }
        }
        if layout.capacity() > i32::MAX as u64 {
            return Err(invalid(
                rules::TOO_LARGE,
                format!(
                    "a sequence can hold {} keys; the kernels take at most {}",
                    layout.capacity(),
                    i32::MAX
                ),
            ));
        }
        if let Some(r) = rope {
            let d = self.head_dim;
            if r.rotary_dim > d || r.rotary_dim == 0 || !r.rotary_dim.is_multiple_of(16) {
                return Err(invalid(
                    rules::SHAPE_UNSUPPORTED,
                    format!(
                        "rotary_dim {} with head_dim {d}: at most the head dim, and a multiple of 16 (each half, and each table row, whole 16-byte vectors)",
                        r.rotary_dim
                    ),
                ));
            }
        }
        check_scale(scale_or_default(options.scale, self.head_dim))?;
        Ok(())
    }
}

/// A split count: 1 to 1024.
fn check_splits(s: u32) -> Result<(), LaunchError> {
    if s == 0 || s > 1024 {
        return Err(invalid(
            rules::ARGUMENT_SIZE,
            format!("num_splits is {s}; give 1 to 1024, or none for the heuristic"),
        ));
    }
    Ok(())
}

fn check_len(what: &str, len: usize, expected: u64) -> Result<(), LaunchError> {
    if len as u64 == expected {
        return Ok(());
    }
    Err(invalid(
        rules::SHAPE_MISMATCH,
        format!("{what} has {len} elements, but the call's shape needs {expected}"),
    ))
}

/// The cache's device buffers.
pub struct CacheBuffers<'a> {
    pub k: &'a mut DeviceBuffer<Bf16>,
    pub v: &'a mut DeviceBuffer<Bf16>,
    /// Keys held per sequence before this call, `[batch]`.
    pub seqlens: &'a DeviceBuffer<i32>,
    /// `[batch, max_pages]`, for a paged cache.
    pub page_table: Option<&'a DeviceBuffer<i32>>,
}

/// New tokens to append before attending: `k`, `v` `[batch, sq, kv_heads, head_dim]`, and the
/// rotation's cos/sin tables.
pub struct NewKv<'a> {
    pub k: &'a DeviceBuffer<Bf16>,
    pub v: &'a DeviceBuffer<Bf16>,
    pub rope: Option<(Rope, &'a DeviceBuffer<f32>, &'a DeviceBuffer<f32>)>,
}

/// Buffers the call writes besides its outputs: the split scratch ([`scratch_len`]) and, when
/// queries are rotated, their rotated copy (like `q`).
pub struct Scratch<'a> {
    pub o_part: &'a mut DeviceBuffer<f32>,
    pub lse_part: &'a mut DeviceBuffer<f32>,
    pub q_rotated: Option<&'a mut DeviceBuffer<Bf16>>,
}

/// Appends the new tokens (if any), attends, and combines: `o` `[batch, sq, heads, head_dim]`
/// (bf16) and `lse` `[batch, heads, sq]`. Queued on the device's stream, no host
/// synchronisation and no allocation (a CUDA graph may capture it; the lengths are read on the
/// device). The scratch is sized for the call's [`plan`] on this device.
#[allow(clippy::too_many_arguments)]
pub fn launch(
    device: &Device,
    q: &DeviceBuffer<Bf16>,
    cache: CacheBuffers<'_>,
    new_kv: Option<NewKv<'_>>,
    (o, lse): (&mut DeviceBuffer<Bf16>, &mut DeviceBuffer<f32>),
    scratch: Scratch<'_>,
    (shape, layout): (Shape, CacheLayout),
    options: Options,
) -> Result<LaunchStats, LaunchError> {
    let rope = new_kv.as_ref().and_then(|n| n.rope.map(|r| r.0));
    shape.check(&layout, rope.as_ref(), &options)?;
    let plan = plan(
        &shape,
        layout.capacity(),
        options.splits,
        device.multiprocessors(),
    )?;
    let splits = plan.splits;
    let (page_size, max_pages, pages, page_rows) = layout.kernel_args(shape.batch);
    check_len("q", q.len(), shape.q_len())?;
    check_len("k_cache", cache.k.len(), layout.len(&shape))?;
    check_len("v_cache", cache.v.len(), layout.len(&shape))?;
    check_len("cache_seqlens", cache.seqlens.len(), shape.batch as u64)?;
    if let CacheLayout::Paged { .. } = layout {
        let table = cache.page_table.ok_or_else(|| {
            invalid(
                rules::SHAPE_MISMATCH,
                "a paged cache needs its page table".into(),
            )
        })?;
        check_len("page_table", table.len(), layout.table_len(shape.batch))?;
    }
    check_len("o", o.len(), shape.q_len())?;
    check_len("lse", lse.len(), shape.lse_len())?;
    let (o_part_len, lse_part_len) = scratch_len(&shape, splits);
    check_len("the partial O scratch", scratch.o_part.len(), o_part_len)?;
    check_len(
        "the partial LSE scratch",
        scratch.lse_part.len(),
        lse_part_len,
    )?;
    if shape.lse_len() == 0 {
        return Ok(LaunchStats::default());
    }
    // The attention reads the cache through the copy engine (no 32-bit limit); the other
    // tensors, and the cache where new tokens are written, are indexed with 32 bits.
    let appends = new_kv.is_some();
    if [o_part_len, shape.q_len()].iter().any(|&n| n >= 1 << 32)
        || (appends && layout.len(&shape) >= 1 << 32)
    {
        return Err(invalid(
            rules::TOO_LARGE,
            format!(
                "q has {} elements, the split scratch {o_part_len} and the cache {}; the kernels index these with 32 bits (the cache: where new tokens are appended) — split the batch, or use fewer splits",
                shape.q_len(),
                layout.len(&shape)
            ),
        ));
    }
    let table = cache.page_table.unwrap_or(cache.seqlens);
    let mut stats = LaunchStats::default();
    let mut appended = 0;
    let mut q_rotated = scratch.q_rotated;
    if let Some(new) = &new_kv {
        check_len("k", new.k.len(), shape.new_kv_len())?;
        check_len("v", new.v.len(), shape.new_kv_len())?;
        let kv = (&mut *cache.k, &mut *cache.v);
        let lengths = (cache.seqlens, table);
        stats.add(&match new.rope {
            Some((r, cos, sin)) => {
                let q_out = q_rotated.as_deref_mut().ok_or_else(|| {
                    invalid(
                        rules::SHAPE_MISMATCH,
                        "rotating the queries needs a buffer for them (Scratch::q_rotated)".into(),
                    )
                })?;
                let table_len = r.table_rows as u64 * (r.rotary_dim / 2) as u64;
                check_len("rotary_cos", cos.len(), table_len)?;
                check_len("rotary_sin", sin.len(), table_len)?;
                check_len("the rotated queries' buffer", q_out.len(), shape.q_len())?;
                append(
                    device,
                    (q, new.k, new.v),
                    (r, cos, sin),
                    (q_out, kv),
                    lengths,
                    (shape, layout),
                )?
            }
            // No rotation: no query block runs and the tables are never read, so any buffers
            // stand in for them (nothing is allocated: a CUDA graph may capture the call).
            None => {
                let unrotated = Rope {
                    rotary_dim: 0,
                    interleaved: false,
                    table_rows: 0,
                };
                let unused = &*scratch.lse_part;
                append(
                    device,
                    (q, new.k, new.v),
                    (unrotated, unused, unused),
                    (&mut *o, kv),
                    lengths,
                    (shape, layout),
                )?
            }
        });
        appended = shape.sq;
    }
    let rotated = new_kv.as_ref().is_some_and(|n| n.rope.is_some());
    let q_source = match q_rotated {
        Some(q_out) if rotated => &*q_out,
        _ => q,
    };
    finish(
        device,
        (q_source, &*cache.k, &*cache.v),
        (cache.seqlens, table),
        (o, lse),
        (scratch.o_part, scratch.lse_part),
        (shape, layout, (page_size, max_pages, pages, page_rows)),
        (options, plan, appended),
        stats,
    )
}

/// The append kernel: queries rotated into `q_out` (when `rope.rotary_dim > 0`), keys and
/// values into the cache.
fn append(
    device: &Device,
    (q, k, v): (
        &DeviceBuffer<Bf16>,
        &DeviceBuffer<Bf16>,
        &DeviceBuffer<Bf16>,
    ),
    (rope, cos, sin): (Rope, &DeviceBuffer<f32>, &DeviceBuffer<f32>),
    (q_out, (k_cache, v_cache)): (
        &mut DeviceBuffer<Bf16>,
        (&mut DeviceBuffer<Bf16>, &mut DeviceBuffer<Bf16>),
    ),
    (seqlens, table): (&DeviceBuffer<i32>, &DeviceBuffer<i32>),
    (shape, layout): (Shape, CacheLayout),
) -> Result<LaunchStats, LaunchError> {
    let (page_size, max_pages, pages, _) = layout.kernel_args(shape.batch);
    let rows = |heads: u32| (shape.batch * shape.sq * heads).div_ceil(crate::rope::ROWS);
    let q_blocks = if rope.rotary_dim > 0 {
        rows(shape.heads)
    } else {
        0
    };
    let kv_blocks = rows(shape.kv_heads);
    let cfg = LaunchConfig::new(q_blocks + 2 * kv_blocks, 256);
    AttentionAppendKv::launch(
        device,
        cfg,
        q,
        k,
        v,
        cos,
        sin,
        q_out,
        k_cache,
        v_cache,
        seqlens,
        table,
        shape.batch,
        shape.sq,
        shape.heads,
        shape.kv_heads,
        shape.head_dim,
        rope.rotary_dim,
        rope.interleaved,
        rope.table_rows,
        page_size,
        max_pages,
        pages,
        layout.capacity() as u32,
        q_blocks,
        kv_blocks,
    )
}

/// The decode kernel (its split scratch's tickets zeroed first where it merges the splits),
/// and the combine after it where it does not.
#[allow(clippy::too_many_arguments)]
fn finish(
    device: &Device,
    (q, k, v): (
        &DeviceBuffer<Bf16>,
        &DeviceBuffer<Bf16>,
        &DeviceBuffer<Bf16>,
    ),
    (seqlens, table): (&DeviceBuffer<i32>, &DeviceBuffer<i32>),
    (o, lse): (&mut DeviceBuffer<Bf16>, &mut DeviceBuffer<f32>),
    (o_part, lse_part): (&mut DeviceBuffer<f32>, &mut DeviceBuffer<f32>),
    (shape, layout, (page_size, max_pages, pages, page_rows)): (
        Shape,
        CacheLayout,
        (u32, u32, u32, u32),
    ),
    (options, plan, appended): (Options, Plan, u32),
    mut stats: LaunchStats,
) -> Result<LaunchStats, LaunchError> {
    let splits = plan.splits;
    let d = shape.head_dim as u64;
    let (_, _, hn, tn) = row_tiles(&shape);
    // The caches as [64, kv_heads, rows per page, D / 64, pages] (`producer::Map`): a box is a
    // page, or 128 rows, and every panel when it is 128 rows.
    let box_rows = if page_size == 0 {
        BN
    } else {
        page_size.min(BN)
    };
    let panels = (d / 64) as u32;
    let row = shape.kv_heads as u64 * d * 2;
    let cache_map = |x| {
        TensorMap::new(
            x,
            [
                64,
                shape.kv_heads as u64,
                page_rows as u64,
                panels as u64,
                pages as u64,
            ],
            [2, d * 2, row, 128, page_rows as u64 * row],
            [64, 1, box_rows, if box_rows == BN { panels } else { 1 }, 1],
            SwizzleMode::B128,
        )
    };
    let (km, vm) = (cache_map(k)?, cache_map(v)?);
    // The most items the cut can make (a sequence's splits are at most `splits`).
    let items = shape.batch as u64 * shape.kv_heads as u64 * splits as u64 * (hn * tn) as u64;
    let grid = items.min(device.multiprocessors().max(1) as u64) as u32;
    let cfg = LaunchConfig::new(grid, THREADS);
    let scale = scale_or_default(options.scale, shape.head_dim);
    let merges = merges_in_kernel(&shape);
    macro_rules! launch_as {
        ($kernel:ident) => {
            $kernel::launch(
                device,
                cfg,
                q,
                shape.heads * shape.head_dim,
                &km,
                &vm,
                &mut *o,
                &mut *lse,
                &mut *o_part,
                &mut *lse_part,
                seqlens,
                table,
                shape.sq,
                shape.batch,
                shape.heads,
                shape.kv_heads,
                splits,
                plan.target,
                appended,
                page_size,
                max_pages,
                pages,
                layout.capacity() as u32,
                box_rows,
                scale * LOG2_E,
                options.causal,
                merges,
            )
        };
    }
    if splits > 1 && merges {
        // The tickets zeroed before the kernel counts on them (it leaves them zero; a scratch
        // of the caller's may hold anything).
        let (_, lse_len) = scratch_len(&shape, splits);
        let first = (lse_len - tickets(&shape)) as usize;
        lse_part.zero_range(device, first..lse_len as usize)?;
    }
    stats.add(&match shape.head_dim {
        64 => launch_as!(AttentionDecodeD64),
        _ => launch_as!(AttentionDecodeD128),
    }?);
    if splits == 1 || merges {
        return Ok(stats);
    }
    let rows = shape.batch * shape.sq * shape.heads;
    let cfg = LaunchConfig::new(rows.div_ceil(ROWS_PER_BLOCK), 256);
    stats.add(&AttentionDecodeCombine::launch(
        device,
        cfg,
        &*o_part,
        &*lse_part,
        o,
        lse,
        splits,
        plan.target > 0,
        rows,
        shape.head_dim,
        shape.sq,
        shape.heads,
    )?);
    Ok(stats)
}

/// A call on host data (f32 values rounded to bf16 on upload), for tests and `ck run`: `q`
/// `[batch, sq, heads, D]`, the caches in `layout`, `seqlens` `[batch]`, `page_table`
/// (`[batch, max_pages]`, empty for a contiguous cache), and optionally new tokens and RoPE
/// tables.
#[derive(Clone, Debug, Default)]
pub struct Call {
    pub q: Vec<f32>,
    pub k_cache: Vec<f32>,
    pub v_cache: Vec<f32>,
    pub seqlens: Vec<i32>,
    pub page_table: Vec<i32>,
    /// New `k`, `v` `[batch, sq, kv_heads, D]`.
    pub new_kv: Option<(Vec<f32>, Vec<f32>)>,
    /// The rotation and its cos/sin tables `[table_rows, rotary_dim / 2]`.
    pub rope: Option<(Rope, Vec<f32>, Vec<f32>)>,
}

/// What [`decode`] returns: `o` `[batch, sq, heads, D]`, `lse` `[batch, heads, sq]`, the caches
/// after the call (widened to f32), and the launches' statistics.
#[derive(Clone, Debug)]
pub struct Output {
    pub o: Vec<f32>,
    pub lse: Vec<f32>,
    pub k_cache: Vec<f32>,
    pub v_cache: Vec<f32>,
    pub stats: LaunchStats,
}

/// Runs `call` on `device`, with the heuristic's cut ([`plan`]) unless `options` gives a
/// split count.
pub fn decode(
    device: &Device,
    call: &Call,
    shape: Shape,
    layout: CacheLayout,
    options: Options,
) -> Result<Output, LaunchError> {
    let up = |x| crate::attention::host::upload_bf16(device, x);
    let qd = up(&call.q)?;
    let (mut kd, mut vd) = (up(&call.k_cache)?, up(&call.v_cache)?);
    let appended = if call.new_kv.is_some() { shape.sq } else { 0 };
    layout.check_pages(&call.seqlens, &call.page_table, appended)?;
    let seqlens = DeviceBuffer::from_slice(device, &call.seqlens)?;
    let table = DeviceBuffer::from_slice(device, &call.page_table)?;
    let new = match &call.new_kv {
        Some((k, v)) => Some((up(k)?, up(v)?)),
        None => None,
    };
    let tables = match &call.rope {
        Some((r, cos, sin)) => Some((
            *r,
            DeviceBuffer::from_slice(device, cos)?,
            DeviceBuffer::from_slice(device, sin)?,
        )),
        None => None,
    };
    let plan = plan(
        &shape,
        layout.capacity(),
        options.splits,
        device.multiprocessors(),
    )?;
    let (o_part_len, lse_part_len) = scratch_len(&shape, plan.splits);
    // The scratch as a caller's allocator may leave it (NaN bits: huge tickets), and O and the
    // LSE NaN, so that whatever the launch does not zero or write shows.
    let scratch = |n: u64| DeviceBuffer::from_slice(device, &vec![f32::NAN; n as usize]);
    let (mut o_part, mut lse_part) = (scratch(o_part_len)?, scratch(lse_part_len)?);
    let mut q_rot = DeviceBuffer::<Bf16>::zeros(device, call.q.len())?;
    let mut o = DeviceBuffer::from_slice(device, &vec![Bf16(0x7fc0); call.q.len()])?;
    let mut lse = DeviceBuffer::from_slice(device, &vec![f32::NAN; shape.lse_len() as usize])?;
    let stats = launch(
        device,
        &qd,
        CacheBuffers {
            k: &mut kd,
            v: &mut vd,
            seqlens: &seqlens,
            page_table: matches!(layout, CacheLayout::Paged { .. }).then_some(&table),
        },
        new.as_ref().map(|(k, v)| NewKv {
            k,
            v,
            rope: tables.as_ref().map(|(r, c, s)| (*r, c, s)),
        }),
        (&mut o, &mut lse),
        Scratch {
            o_part: &mut o_part,
            lse_part: &mut lse_part,
            q_rotated: Some(&mut q_rot),
        },
        (shape, layout),
        options,
    )?;
    let widen = |b: &DeviceBuffer<Bf16>| -> Result<Vec<f32>, LaunchError> {
        Ok(b.to_vec()?.iter().map(|x| x.to_f32()).collect())
    };
    Ok(Output {
        o: widen(&o)?,
        lse: lse.to_vec()?,
        k_cache: widen(&kd)?,
        v_cache: widen(&vd)?,
        stats,
    })
}

/// The cache row of key `key` of sequence `b`: `[rows, kv_heads, D]`'s row index.
pub fn cache_row(call: &Call, layout: &CacheLayout, b: usize, key: usize) -> usize {
    match *layout {
        CacheLayout::Contiguous { capacity } => b * capacity as usize + key,
        CacheLayout::Paged {
            page_size,
            max_pages,
            ..
        } => {
            let (p, r) = (key / page_size as usize, key % page_size as usize);
            call.page_table[b * max_pages as usize + p] as usize * page_size as usize + r
        }
    }
}

/// Rotates `x` (one head row, f64) at table row `pos` as [`Rope`] says.
pub fn rotate(x: &mut [f64], rope: &Rope, (cos, sin): (&[f32], &[f32]), pos: usize) {
    let half = rope.rotary_dim as usize / 2;
    let (c, s) = (&cos[pos * half..][..half], &sin[pos * half..][..half]);
    for i in 0..half {
        let (a, b) = if rope.interleaved {
            (2 * i, 2 * i + 1)
        } else {
            (i, i + half)
        };
        let (xa, xb) = (x[a], x[b]);
        x[a] = xa * c[i] as f64 - xb * s[i] as f64;
        x[b] = xb * c[i] as f64 + xa * s[i] as f64;
    }
}

/// The fp64 reference, written from the contract: the new tokens' keys (rotated) and values
/// appended at each sequence's end, the queries rotated, then for every query row a plain
/// softmax over the keys it sees. Returns `o` `[batch, sq, heads, D]` and `lse` `[batch, heads,
/// sq]` (a row that sees no key: 0 and −∞; a sequence whose length is negative or, with the
/// appended tokens, past the cache's capacity: NaN).
pub fn reference(
    call: &Call,
    shape: Shape,
    layout: CacheLayout,
    options: Options,
) -> (Vec<f64>, Vec<f64>) {
    let Shape {
        batch,
        heads,
        kv_heads,
        sq,
        head_dim,
    } = shape;
    let (b_n, h_n, hkv, sq, d) = (
        batch as usize,
        heads as usize,
        kv_heads as usize,
        sq as usize,
        head_dim as usize,
    );
    let group = h_n / hkv;
    let scale = scale_or_default(options.scale, head_dim) as f64;
    let bf = |x: f32| Bf16::from_f32(x).to_f32() as f64;
    let rope = call.rope.as_ref();
    let mut o = vec![0.0; shape.q_len() as usize];
    let mut lse = vec![f64::NEG_INFINITY; shape.lse_len() as usize];
    for b in 0..b_n {
        let appended = if call.new_kv.is_some() { sq } else { 0 };
        let len = call.seqlens[b] as i64;
        if len < 0 || (len + appended as i64) as u64 > layout.capacity() {
            o[b * sq * h_n * d..(b + 1) * sq * h_n * d].fill(f64::NAN);
            lse[b * h_n * sq..(b + 1) * h_n * sq].fill(f64::NAN);
            continue;
        }
        let cached = len as usize;
        let sk = cached + appended;
        // Key/value row `j` of KV head `g`: from the cache, or a new (rotated) token.
        let kv = |j: usize, g: usize, which: usize| -> Vec<f64> {
            if j < cached {
                let cache = if which == 0 {
                    &call.k_cache
                } else {
                    &call.v_cache
                };
                let at = (cache_row(call, &layout, b, j) * hkv + g) * d;
                cache[at..at + d].iter().map(|&x| bf(x)).collect()
            } else {
                let (k, v) = call.new_kv.as_ref().expect("appended keys");
                let src = if which == 0 { k } else { v };
                let at = (((b * sq) + j - cached) * hkv + g) * d;
                let mut x: Vec<f64> = src[at..at + d].iter().map(|&x| bf(x)).collect();
                if let (0, Some((r, cos, sin))) = (which, rope) {
                    rotate(&mut x, r, (cos, sin), j);
                    // The cache holds the rotated key in bf16.
                    x.iter_mut().for_each(|v| *v = bf(*v as f32));
                }
                x
            }
        };
        for h in 0..h_n {
            let g = h / group;
            let keys: Vec<Vec<f64>> = (0..sk).map(|j| kv(j, g, 0)).collect();
            let values: Vec<Vec<f64>> = (0..sk).map(|j| kv(j, g, 1)).collect();
            for t in 0..sq {
                let at = ((b * sq + t) * h_n + h) * d;
                let mut qi: Vec<f64> = call.q[at..at + d].iter().map(|&x| bf(x)).collect();
                if let (Some((r, cos, sin)), true) = (rope, call.new_kv.is_some()) {
                    rotate(&mut qi, r, (cos, sin), cached + t);
                    qi.iter_mut().for_each(|v| *v = bf(*v as f32));
                }
                let seen = if options.causal {
                    (t as i64 + sk as i64 - sq as i64 + 1).clamp(0, sk as i64) as usize
                } else {
                    sk
                };
                if seen == 0 {
                    continue;
                }
                let scores: Vec<f64> = (0..seen)
                    .map(|j| scale * qi.iter().zip(&keys[j]).map(|(a, b)| a * b).sum::<f64>())
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                lse[(b * h_n + h) * sq + t] = max + sum.ln();
                for (j, p) in e.iter().enumerate() {
                    for (x, v) in o[at..at + d].iter_mut().zip(&values[j]) {
                        *x += p / sum * v;
                    }
                }
            }
        }
    }
    (o, lse)
}
