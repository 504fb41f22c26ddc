//! The column sums of the backward kernels' workspaces: `out[j] = Σ_i partial[i, j]` over the
//! f32 rows the first kernel wrote (a row of column sums per block, [`row_stride`] apart), in a
//! fixed order, so that a parameter's gradient (`dgamma`, `dbeta`) is the same bits on every
//! run.
//!
//! A block of 256 threads owns 128 columns of a chunk of rows: each warp walks every 8th row of
//! the chunk, 4 columns per lane, and `block_reduce_x` over X0 adds the 8 warps' sums. One chunk
//! per column block would leave most SMs idle where the rows are narrow (N = 1024: 8 blocks,
//! each walking 4224 rows one dependent load after another), so the rows are cut into chunks
//! until about [`TARGET_BLOCKS`] blocks run. Each block stores its chunk's sums and takes a
//! ticket of its column block ([`last_arrival`], as the stream-K GEMM's hand-over); the block
//! whose ticket completes the count adds the chunks' sums in chunk order, whichever finished
//! last, and writes the output — one launch, where a second launch over the chunks' sums
//! cost 4–6 µs on an H100 (ncu, job 119). For example, 4224 rows of 1024: 8 column blocks ×
//! 33 chunks of 128 rows, the last of each column block's 33 adding 33 rows. The cut depends on
//! the shape only, not on the device, so the bits do not either. Two workspaces of one shape
//! (LayerNorm's `dgamma` and `dbeta`) are summed by the same launch, the second half of the
//! blocks taking the second workspace: the same bits as apart. The launch overlaps the backward
//! kernel's ([`LaunchConfig::overlapping`](ck_core::host::LaunchConfig::overlapping)): its blocks
//! start as the backward's leave and wait for it to finish (bf16 4096² 1.02–1.04 × faster on an
//! H100, the larger shapes 1.00–1.02 ×).

use ck_core::device::*;
#[cfg(not(target_arch = "nvptx64"))]
use ck_core::host::DeviceBuffer;
use ck_core::tile::{block_reduce_x, make_tile_window, DistributedTensor, View, View2};
use ck_macros::{tile_distribution, tile_kernel};

tile_distribution! {
    /// The column sum's tile: 8 workspace rows (one per warp) × 128 columns (4 per lane).
    pub struct ColumnSums {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 8], n: [lane: 32, vec: 4] },
        p: [[m.warp], [n.lane]],
        y: [n.vec],
    }
}

/// Scratch for the column sum's reduction over its 8 warps: `BLOCK_SIZE · 4` words.
const COLUMN_SCRATCH: usize = 1024;

/// The blocks of one workspace's sums: 128 columns of one chunk each.
pub const fn blocks_per_sum(rows: u32, n: u32, chunk: u32) -> u32 {
    let cols = ColumnSums::X_LENGTHS[1] as u32;
    n.div_ceil(cols) * rows.div_ceil(chunk)
}

/// `(chunk sums, tickets)` of one workspace's sums in chunks of `chunk` rows: a row of `n` f32
/// per chunk and a ticket per column block, each rounded up to 16 bytes (the second
/// workspace's start after them).
pub const fn chunk_workspace(rows: u32, n: u32, chunk: u32) -> (u32, u32) {
    let cols = ColumnSums::X_LENGTHS[1] as u32;
    (
        (rows.div_ceil(chunk) * n).next_multiple_of(4),
        n.div_ceil(cols).next_multiple_of(4),
    )
}

/// The sums of 128 columns from `col0` over `steps` tile steps of 8 rows of `view` from `row0`
/// (rows past the view's end read as zeros): every warp adds its rows in order, then the
/// warps' sums are added in order. Four loads are issued before their four additions, which
/// add in the same order as one load at a time would.
#[inline(always)]
fn sum_rows<V: View<f32>>(
    view: V,
    (row0, col0): (u32, i32),
    steps: u32,
    scratch: &SharedArray<u32, COLUMN_SCRATCH>,
) -> DistributedTensor<ColumnSums, f32> {
    let step = ColumnSums::X_LENGTHS[0];
    let mut w = make_tile_window::<ColumnSums, _>(view, [row0 as i32, col0]);
    let mut acc = DistributedTensor::<ColumnSums, f32>::zeros();
    let mut left = steps;
    while left >= 4 {
        let loads = [(); 4].map(|()| {
            let t = w.load::<f32>();
            w.move_by([step, 0]);
            t
        });
        for t in &loads {
            acc = acc.zip_map(t, |a, b| a + b);
        }
        left -= 4;
    }
    for _ in 0..left {
        acc = acc.zip_map(&w.load::<f32>(), |a, b| a + b);
        w.move_by([step, 0]);
    }
    block_reduce_x::<ColumnSums, f32, 0, COLUMN_SCRATCH>(&acc, |a, b| a + b, scratch)
}

/// A column sum's shared memory: the reduction's scratch and the word through which thread 0
/// tells the block what its ticket said.
struct ColumnShared<'a> {
    scratch: &'a SharedArray<u32, COLUMN_SCRATCH>,
    said: &'a SharedArray<u32, 1>,
}

/// `out[j] = Σ_i partial[i, j]` over `rows` rows of `partial` (`stride` apart), 128 columns per
/// block, in chunks of `chunk` rows: `block` takes column block `block mod ⌈n / 128⌉` of chunk
/// `c = block / ⌈n / 128⌉`. With one chunk, the block's sums are the output. With several, it
/// stores them as row `c` of `sums` (`⌈rows / chunk⌉` rows of `n`), then takes a ticket of its
/// column block; the block whose ticket completes the count sets it back to zero for the next
/// launch and adds the chunks' rows in order, whichever came last: the same bits every run.
#[inline(always)]
fn column_sum<T: Real>(
    partial: Global<f32>,
    (sums, tickets): (GlobalMut<f32>, GlobalMut<u32>),
    out: GlobalMut<T>,
    (rows, n, chunk, stride): (u32, u32, u32, u32),
    block: u32,
    smem: &ColumnShared<'_>,
) {
    let [step, cols] = ColumnSums::X_LENGTHS;
    let column_blocks = n.div_ceil(cols as u32);
    let (c, column_block) = (block / column_blocks, block % column_blocks);
    let (row0, col0) = (c * chunk, (column_block * cols as u32) as i32);
    let count = rows.div_ceil(chunk);
    // Rows past the chunk's end (the last chunk's past `rows`) read as zeros.
    let end = (row0 + chunk).min(rows);
    let pv = View2::<_, f32, 4>::new(partial, end, n, stride);
    let steps = chunk.div_ceil(step as u32);
    let sum = sum_rows(pv, (row0, col0), steps, smem.scratch);
    let ov = View2::<_, T, 4>::new(out, 1, n, n);
    if count == 1 {
        make_tile_window::<ColumnSums, _>(ov, [0, col0]).store(&sum.round_to::<T>());
        return;
    }
    // Every warp holds the sums; views ending at the stored row keep the other warps' copies
    // out.
    let sv = |rows| View2::<_, f32, 4>::new(sums, rows, n, n);
    make_tile_window::<ColumnSums, _>(sv(c + 1), [c as i32, col0]).store(&sum);
    fence_acq_rel_gpu();
    if last_arrival((tickets, column_block), count, smem.said, block_sync) {
        let total = sum_rows(
            sv(count),
            (0, col0),
            count.div_ceil(step as u32),
            smem.scratch,
        );
        make_tile_window::<ColumnSums, _>(ov, [0, col0]).store(&total.round_to::<T>());
    }
}

/// The distance between two rows of a backward's workspace of `n` columns: `n` rounded up to 4
/// floats, so that every row starts on 16 bytes (a block's row is a buffer of its own, which
/// must).
pub const fn row_stride(n: u32) -> u32 {
    n.next_multiple_of(4)
}

macro_rules! column_sum_kernel {
    ($name:ident, $pair:ident, $t:ty) => {
        #[doc = concat!("The column sums of a backward's workspace by chunks of rows, into `", stringify!($t), "`; `sums` and `tickets` the chunks' workspace (see `column_sum`).")]
        #[tile_kernel(block = 256, distributions(ColumnSums))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            partial: Global<f32>,
            sums: GlobalMut<f32>,
            tickets: GlobalMut<u32>,
            out: GlobalMut<$t>,
            rows: u32,
            n: u32,
            chunk: u32,
            stride: u32,
        ) {
            // Launched to overlap the backward kernel: its rows are read once it has finished.
            grid_dependency_wait();
            let (scratch, said) = (shared!(u32; COLUMN_SCRATCH), shared!(u32; 1));
            let smem = ColumnShared { scratch: &scratch, said: &said };
            let shape = (rows, n, chunk, stride);
            column_sum::<$t>(partial, (sums, tickets), out, shape, block_idx(), &smem);
        }

        #[doc = concat!("The column sums of two workspaces of one shape, into `", stringify!($t), "`: the first [`blocks_per_sum`] blocks `partial_a`'s into `out_a`, the rest `partial_b`'s into `out_b`, each half with its half of `sums` and `tickets`.")]
        #[tile_kernel(block = 256, distributions(ColumnSums))]
        #[allow(clippy::too_many_arguments)]
        pub fn $pair(
            partial_a: Global<f32>,
            partial_b: Global<f32>,
            sums: GlobalMut<f32>,
            tickets: GlobalMut<u32>,
            out_a: GlobalMut<$t>,
            out_b: GlobalMut<$t>,
            rows: u32,
            n: u32,
            chunk: u32,
            stride: u32,
        ) {
            grid_dependency_wait(); // as above
            let (scratch, said) = (shared!(u32; COLUMN_SCRATCH), shared!(u32; 1));
            let smem = ColumnShared { scratch: &scratch, said: &said };
            let (half, block) = (blocks_per_sum(rows, n, chunk), block_idx());
            let (partial, out, block, p) = if block < half {
                (partial_a, out_a, block, 0)
            } else {
                (partial_b, out_b, block - half, 1)
            };
            let part = if rows.div_ceil(chunk) == 1 {
                (sums, tickets) // one chunk: neither is used
            } else {
                let (sums_len, tickets_len) = chunk_workspace(rows, n, chunk);
                (
                    sums.slice(p * sums_len, sums_len),
                    tickets.slice(p * tickets_len, tickets_len),
                )
            };
            let shape = (rows, n, chunk, stride);
            column_sum::<$t>(partial, part, out, shape, block, &smem);
        }
    };
}

column_sum_kernel!(column_sum_f32, column_sum_pair_f32, f32);
column_sum_kernel!(column_sum_bf16, column_sum_pair_bf16, Bf16);

#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use crate::op::OpElement;
    use ck_core::host::{Device, LaunchConfig, LaunchError, LaunchStats};

    /// The column sums of one element type.
    pub trait ColumnSum: OpElement {
        /// Launches the kernel of this type over one workspace or two (`partials` and `outs`
        /// of one length): each out ← the column sums of its workspace's `rows` rows of `n`,
        /// `stride` apart, in chunks of `chunk` rows, through `sums` and `tickets` where there
        /// are several ([`chunk_workspace`] per workspace).
        fn launch_chunks(
            device: &Device,
            partials: &[&DeviceBuffer<f32>],
            sums_tickets: (&mut DeviceBuffer<f32>, &mut DeviceBuffer<u32>),
            outs: &mut [&mut DeviceBuffer<Self>],
            rows_n_chunk_stride: (u32, u32, u32, u32),
        ) -> Result<LaunchStats, LaunchError>;

        /// `out[j]` ← the sum of column `j` of `rows` workspace rows of `n`, `stride` apart
        /// ([`row_stride`]), by chunks of rows where one chunk would run too few blocks
        /// ([`chunks`]): one launch.
        fn column_sum(
            device: &Device,
            partial: &DeviceBuffer<f32>,
            out: &mut DeviceBuffer<Self>,
            shape: (u32, u32, u32),
        ) -> Result<LaunchStats, LaunchError> {
            Self::column_sums(device, &[partial], &mut [out], shape)
        }

        /// [`ColumnSum::column_sum`] of one or two workspaces of one shape, by the same
        /// launch (each output the same bits as alone).
        fn column_sums(
            device: &Device,
            partials: &[&DeviceBuffer<f32>],
            outs: &mut [&mut DeviceBuffer<Self>],
            (rows, n, stride): (u32, u32, u32),
        ) -> Result<LaunchStats, LaunchError> {
            let (count, chunk) = chunks(rows, n);
            let shape = (rows, n, chunk, stride);
            if count == 1 {
                let (mut sums, mut tickets) =
                    (DeviceBuffer::empty(device)?, DeviceBuffer::empty(device)?);
                let none = (&mut sums, &mut tickets);
                return Self::launch_chunks(device, partials, none, outs, shape);
            }
            let (sums_len, tickets_len) = chunk_workspace(rows, n, chunk);
            let parts = partials.len();
            let mut sums = take_partials(device, CHUNK_SUMS, sums_len as usize * parts)?;
            let taken = device.take_workspace::<u32>(TICKETS, tickets_len as usize * parts);
            let mut tickets = match taken.and_then(|t| match t {
                Some(t) => Ok(t),
                // A stream being captured: tickets of the graph's own, zeroed.
                None => DeviceBuffer::zeros(device, tickets_len as usize * parts),
            }) {
                Ok(t) => t,
                Err(e) => {
                    device.keep_workspace(CHUNK_SUMS, sums);
                    return Err(e);
                }
            };
            let launched =
                Self::launch_chunks(device, partials, (&mut sums, &mut tickets), outs, shape);
            device.keep_workspace(CHUNK_SUMS, sums);
            // Kept only after a launch that ran: a failed one may have left tickets counted.
            if launched.is_ok() {
                device.keep_workspace(TICKETS, tickets);
            }
            launched
        }
    }

    macro_rules! column_sum_impl {
        ($t:ty, $one:ident, $pair:ident) => {
            impl ColumnSum for $t {
                fn launch_chunks(
                    d: &Device,
                    partials: &[&DeviceBuffer<f32>],
                    (s, k): (&mut DeviceBuffer<f32>, &mut DeviceBuffer<u32>),
                    outs: &mut [&mut DeviceBuffer<$t>],
                    (rows, n, chunk, stride): (u32, u32, u32, u32),
                ) -> Result<LaunchStats, LaunchError> {
                    let blocks = blocks_per_sum(rows, n, chunk) * partials.len() as u32;
                    // Its launch and its blocks' start behind the backward kernel's last rows.
                    let cfg = LaunchConfig::new(blocks, ColumnSums::BLOCK_SIZE).overlapping();
                    match (partials, outs) {
                        ([p], [o]) => $one::launch(d, cfg, p, s, k, o, rows, n, chunk, stride),
                        ([pa, pb], [oa, ob]) => {
                            $pair::launch(d, cfg, pa, pb, s, k, oa, ob, rows, n, chunk, stride)
                        }
                        (p, o) => Err(LaunchError::invalid(
                            ck_core::rules::INTERNAL,
                            format!(
                                "column sums of one or two workspaces, not {} into {}",
                                p.len(),
                                o.len()
                            ),
                        )),
                    }
                }
            }
        };
    }
    column_sum_impl!(f32, ColumnSumF32, ColumnSumPairF32);
    column_sum_impl!(Bf16, ColumnSumBf16, ColumnSumPairBf16);

    /// The device's workspaces of the chunks' sums and of their tickets (which every launch
    /// leaves at zero), kept between launches.
    const CHUNK_SUMS: &str = "column sums by chunks";
    pub const TICKETS: &str = "column sums' tickets";

    /// Blocks the first launch of a column sum aims for: two per SM of an H100 or H200 (132
    /// SMs), on any device, so that the cut into chunks — and the order of the additions —
    /// depends on the shape alone.
    pub const TARGET_BLOCKS: u32 = 264;

    /// Rows a chunk has at least (four rows per warp).
    const MIN_CHUNK_ROWS: u32 = 32;

    /// `(chunks, rows per chunk)` of a column sum over `rows` rows of `n`: enough chunks for
    /// about [`TARGET_BLOCKS`] blocks, each of at least `MIN_CHUNK_ROWS` rows (4224 rows of
    /// 1024 columns: 33 chunks of 128; 528 rows of 8192: 5 chunks of 106; 8 rows: one).
    pub fn chunks(rows: u32, n: u32) -> (u32, u32) {
        let [_, cols] = ColumnSums::X_LENGTHS;
        let wanted = TARGET_BLOCKS.div_ceil(n.div_ceil(cols as u32).max(1));
        let count = wanted.min(rows.div_ceil(MIN_CHUNK_ROWS)).max(1);
        let chunk = rows.div_ceil(count).max(1);
        (rows.div_ceil(chunk).max(1), chunk)
    }

    /// The most threads of a backward's first kernel: 4 blocks of 256 on each SM of an H100,
    /// so that every SM has work in blocks of any size.
    pub const MAX_THREADS: u32 = 528 * 256;

    /// Row tiles a block walks at least where the rows allow: each block writes a workspace
    /// row of N f32 that the column sum reads back. At 4096 rows of 4096 in one-row tiles, 256
    /// blocks move 8 MB of workspace beside bf16 RMSNorm's 101 MB; with 512 blocks RMSNorm was
    /// 6–9 % slower (f32 and bf16, notes/rows.md).
    pub const MIN_TILES_PER_BLOCK: u32 = 16;

    /// Blocks of `threads` of a backward's first kernel over `m` rows in tiles of `rows`, at
    /// most `max_blocks` where given (the tests, so that blocks walk several row tiles), else
    /// [`MAX_THREADS`]' worth and one per [`MIN_TILES_PER_BLOCK`] row tiles; each writes one
    /// workspace row.
    pub fn grid(m: u32, (rows, threads): (u32, u32), max_blocks: Option<u32>) -> u32 {
        let tiles = m.div_ceil(rows);
        let most = max_blocks.unwrap_or_else(|| {
            (MAX_THREADS / threads.max(1)).min(tiles.div_ceil(MIN_TILES_PER_BLOCK))
        });
        tiles.clamp(1, most.max(1))
    }

    /// `(row stride, length)` of a workspace of `blocks` rows of `n` f32, [`row_stride`] apart;
    /// an `argument-size` error where a row would start past 32 bits (the kernels index the
    /// workspace with them).
    pub fn workspace(blocks: u32, n: u32) -> Result<(u32, usize), LaunchError> {
        let stride = row_stride(n);
        let len = blocks as u64 * stride as u64;
        if len > u32::MAX as u64 {
            return Err(LaunchError::invalid(
                ck_core::rules::ARGUMENT_SIZE,
                format!(
                    "rows of {n}: the backward's workspace of {blocks} rows would hold {len} \
                     floats, past the kernels' 32-bit offsets; call it on fewer rows at a time \
                     (a block per {MIN_TILES_PER_BLOCK} row tiles)"
                ),
            ));
        }
        Ok((stride, len as usize))
    }

    /// The device's workspace `name` of at least `len` f32 (kept between launches: give it back
    /// with `Device::keep_workspace`), or a fresh one where the device keeps none (a stream
    /// being captured into a CUDA graph). The first kernel writes every element it sums.
    pub fn take_partials(
        device: &Device,
        name: &'static str,
        len: usize,
    ) -> Result<DeviceBuffer<f32>, LaunchError> {
        match device.take_workspace::<f32>(name, len)? {
            Some(w) => Ok(w),
            None => DeviceBuffer::zeros(device, len),
        }
    }
}
#[cfg(not(target_arch = "nvptx64"))]
pub use host::{
    chunks, grid, take_partials, workspace, ColumnSum, MAX_THREADS, MIN_TILES_PER_BLOCK,
    TARGET_BLOCKS,
};
