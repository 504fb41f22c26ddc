//! The column sums of the backward kernels' workspaces: `out[j] = Σ_i partial[i, j]` over the
//! f32 rows the first kernel wrote (a row of column sums per block, [`row_stride`] apart), in a
//! fixed order, so that a parameter's gradient (`dgamma`, `dbeta`) is the same bits on every
//! run.
//!
//! A block of 256 threads owns 128 columns of a chunk of rows: each warp walks every 8th row of
//! the chunk, 4 columns per lane, and `block_reduce_x` over X0 adds the 8 warps' sums. One chunk
//! per column block would leave most SMs idle where the rows are narrow (N = 1024: 8 blocks,
//! each walking 4224 rows one dependent load after another), so the rows are cut into chunks
//! until about [`TARGET_BLOCKS`] blocks run, and a second launch adds the chunks' sums. For
//! example, 4224 rows of 1024: 8 column blocks × 33 chunks of 128 rows, then 8 blocks adding
//! 33 rows. The cut depends on the shape only, not on the device, so the bits do not either.

use ck_core::device::*;
#[cfg(not(target_arch = "nvptx64"))]
use ck_core::host::DeviceBuffer;
use ck_core::tile::{block_reduce_x, make_tile_window, DistributedTensor, View2};
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

/// `out[c, j] = Σ_i partial[i, j]` over the rows `i` of chunk `c` (`chunk` rows from `c · chunk`,
/// the last chunk up to `rows`; rows of `partial` `stride` apart, of `out` `n`), 128 columns
/// per block: block `b` takes column block `b mod ⌈n / 128⌉` of chunk `b / ⌈n / 128⌉`.
#[inline(always)]
fn column_sum<T: Real>(
    partial: Global<f32>,
    out: GlobalMut<T>,
    (rows, n, chunk, stride): (u32, u32, u32, u32),
    scratch: &SharedArray<u32, COLUMN_SCRATCH>,
) {
    let [step, cols] = ColumnSums::X_LENGTHS;
    let column_blocks = n.div_ceil(cols as u32);
    let (c, column_block) = (block_idx() / column_blocks, block_idx() % column_blocks);
    let (row0, col0) = (c * chunk, (column_block * cols as u32) as i32);
    // Rows past the chunk's end (the last chunk's past `rows`) read as zeros.
    let end = (row0 + chunk).min(rows);
    let pv = View2::<_, f32, 4>::new(partial, end, n, stride);
    let mut w = make_tile_window::<ColumnSums, _>(pv, [row0 as i32, col0]);
    let mut acc = DistributedTensor::<ColumnSums, f32>::zeros();
    for _ in 0..chunk.div_ceil(step as u32) {
        acc = acc.zip_map(&w.load::<f32>(), |a, b| a + b);
        w.move_by([step, 0]);
    }
    let sum = block_reduce_x::<ColumnSums, f32, 0, COLUMN_SCRATCH>(&acc, |a, b| a + b, scratch);
    let ov = View2::<_, T, 4>::new(out, c + 1, n, n);
    make_tile_window::<ColumnSums, _>(ov, [c as i32, col0]).store(&sum.round_to::<T>());
}

/// The distance between two rows of a backward's workspace of `n` columns: `n` rounded up to 4
/// floats, so that every row starts on 16 bytes (a block's row is a buffer of its own, which
/// must).
pub const fn row_stride(n: u32) -> u32 {
    n.next_multiple_of(4)
}

macro_rules! column_sum_kernel {
    ($name:ident, $t:ty) => {
        #[doc = concat!("The column sums of a backward's workspace by chunks of rows, into `", stringify!($t), "`.")]
        #[tile_kernel(block = 256, distributions(ColumnSums))]
        pub fn $name(
            partial: Global<f32>,
            out: GlobalMut<$t>,
            rows: u32,
            n: u32,
            chunk: u32,
            stride: u32,
        ) {
            let scratch = shared!(u32; COLUMN_SCRATCH);
            column_sum::<$t>(partial, out, (rows, n, chunk, stride), &scratch);
        }
    };
}

column_sum_kernel!(column_sum_f32, f32);
column_sum_kernel!(column_sum_bf16, Bf16);

#[cfg(not(target_arch = "nvptx64"))]
mod host {
    use super::*;
    use crate::op::OpElement;
    use ck_core::host::{Device, LaunchConfig, LaunchError, LaunchStats};

    /// The column sum of one element type.
    pub trait ColumnSum: OpElement {
        /// Launches the kernel of this type: row `c` of `out` ← the sums of chunk `c` of
        /// `rows` rows of `n`, `stride` apart (chunks of `chunk` rows), `cfg` covering every
        /// chunk.
        fn launch_chunks(
            device: &Device,
            cfg: LaunchConfig,
            partial: &DeviceBuffer<f32>,
            out: &mut DeviceBuffer<Self>,
            rows_n_chunk_stride: (u32, u32, u32, u32),
        ) -> Result<LaunchStats, LaunchError>;

        /// `out[j]` ← the sum of column `j` of `rows` workspace rows of `n`, `stride` apart
        /// ([`row_stride`]): by chunks of rows into a second f32 workspace, then their sums,
        /// where one launch would run too few blocks ([`chunks`]).
        fn column_sum(
            device: &Device,
            partial: &DeviceBuffer<f32>,
            out: &mut DeviceBuffer<Self>,
            (rows, n, stride): (u32, u32, u32),
        ) -> Result<LaunchStats, LaunchError> {
            let (count, chunk) = chunks(rows, n);
            if count == 1 {
                let whole = (rows, n, rows, stride);
                return Self::launch_chunks(device, config(n, 1), partial, out, whole);
            }
            let mut sums = take_partials(device, CHUNK_WORKSPACE, (count * n) as usize)?;
            let first = f32::launch_chunks(
                device,
                config(n, count),
                partial,
                &mut sums,
                (rows, n, chunk, stride),
            );
            let both = first.and_then(|mut stats| {
                let second =
                    Self::launch_chunks(device, config(n, 1), &sums, out, (count, n, count, n))?;
                stats.add(&second);
                stats.elapsed += second.elapsed;
                Ok(stats)
            });
            device.keep_workspace(CHUNK_WORKSPACE, sums);
            both
        }
    }

    impl ColumnSum for f32 {
        fn launch_chunks(
            d: &Device,
            cfg: LaunchConfig,
            p: &DeviceBuffer<f32>,
            o: &mut DeviceBuffer<f32>,
            (rows, n, chunk, stride): (u32, u32, u32, u32),
        ) -> Result<LaunchStats, LaunchError> {
            ColumnSumF32::launch(d, cfg, p, o, rows, n, chunk, stride)
        }
    }

    impl ColumnSum for Bf16 {
        fn launch_chunks(
            d: &Device,
            cfg: LaunchConfig,
            p: &DeviceBuffer<f32>,
            o: &mut DeviceBuffer<Bf16>,
            (rows, n, chunk, stride): (u32, u32, u32, u32),
        ) -> Result<LaunchStats, LaunchError> {
            ColumnSumBf16::launch(d, cfg, p, o, rows, n, chunk, stride)
        }
    }

    /// The device's workspace of the chunks' column sums (kept between launches).
    const CHUNK_WORKSPACE: &str = "column sums by chunks";

    /// Blocks the first launch of a column sum aims for: two per SM of an H100 or H200 (132
    /// SMs), on any device, so that the cut into chunks — and the order of the additions —
    /// depends on the shape alone.
    pub const TARGET_BLOCKS: u32 = 264;

    /// Rows a chunk has at least (four rows per warp).
    const MIN_CHUNK_ROWS: u32 = 32;

    /// `(chunks, rows per chunk)` of a column sum over `rows` rows of `n`: enough chunks for
    /// about [`TARGET_BLOCKS`] blocks, each of at least [`MIN_CHUNK_ROWS`] rows (4224 rows of
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

    /// `chunks` chunks of every column block.
    fn config(n: u32, chunks: u32) -> LaunchConfig {
        let [_, cols] = ColumnSums::X_LENGTHS;
        LaunchConfig::new(n.div_ceil(cols as u32) * chunks, ColumnSums::BLOCK_SIZE)
    }
}
#[cfg(not(target_arch = "nvptx64"))]
pub use host::{
    chunks, grid, take_partials, workspace, ColumnSum, MAX_THREADS, MIN_TILES_PER_BLOCK,
    TARGET_BLOCKS,
};

#[cfg(test)]
mod tests {
    use super::{chunks, grid, row_stride, workspace, ColumnSum};
    use ck_core::device::Bf16;
    use ck_core::host::{Device, DeviceBuffer};

    /// 4 blocks of 256 threads per SM of an H100 (132 SMs), in blocks of any size, each with
    /// at least 16 row tiles where there are enough; never more blocks than row tiles, never
    /// none.
    #[test]
    fn the_grid_of_a_backward() {
        assert_eq!(grid(65536, (1, 256), None), 4 * 132);
        assert_eq!(grid(65536, (1, 32), None), 65536 / 16);
        assert_eq!(grid(1 << 20, (1, 32), None), 8 * 4 * 132);
        assert_eq!(grid(65536, (4, 128), None), 65536 / 4 / 16);
        assert_eq!(grid(4096, (1, 128), None), 4096 / 16);
        assert_eq!(grid(100, (1, 32), None), 7);
        assert_eq!(grid(10, (4, 128), None), 1);
        assert_eq!(grid(0, (1, 32), None), 1);
        assert_eq!(grid(100, (1, 32), Some(2)), 2);
    }

    /// Rows 16 bytes apart; a workspace past 32-bit offsets is refused, saying so.
    #[test]
    fn the_workspace_of_a_backward() {
        assert_eq!(workspace(4, 7).unwrap(), (8, 32));
        assert_eq!(workspace(3, 1024).unwrap(), (1024, 3072));
        let e = workspace(528, 1 << 24).unwrap_err();
        assert_eq!(e.rule(), ck_core::rules::ARGUMENT_SIZE);
        assert!(e.to_string().contains("fewer rows"), "{e}");
    }

    #[test]
    fn the_cut_into_chunks() {
        assert_eq!(chunks(4224, 1024), (33, 128));
        assert_eq!(chunks(528, 8192), (5, 106));
        assert_eq!(chunks(528, 4096), (9, 59));
        assert_eq!(chunks(8, 1024), (1, 8));
        assert_eq!(chunks(1, 1), (1, 1));
        for (rows, n) in [(4224, 1024), (528, 300), (97, 5000), (33, 129)] {
            let (count, chunk) = chunks(rows, n);
            assert!(
                count * chunk >= rows && (count - 1) * chunk < rows,
                "{rows} x {n}"
            );
        }
    }

    /// Small integers, whose f32 sums are exact in any order: every column's sum, through one
    /// launch and through chunks, f32 and bf16, rows `row_stride(n)` apart (the padding NaN,
    /// which no sum may read).
    #[test]
    fn sums_by_chunks_are_the_column_sums() {
        let device = Device::emulator();
        for (rows, n) in [(8u32, 200u32), (300, 130), (1000, 64), (40, 7)] {
            let value = |i: u32, j: u32| ((i * 7 + j * 3) % 11) as f32 - 5.0;
            let stride = row_stride(n);
            let at = |k: u32| (k / stride, k % stride);
            let partial: Vec<f32> = (0..rows * stride)
                .map(|k| match at(k) {
                    (i, j) if j < n => value(i, j),
                    _ => f32::NAN,
                })
                .collect();
            let want: Vec<f32> = (0..n)
                .map(|j| (0..rows).map(|i| value(i, j)).sum())
                .collect();
            let p = DeviceBuffer::from_slice(&device, &partial).unwrap();
            let mut out = DeviceBuffer::from_slice(&device, &vec![f32::NAN; n as usize]).unwrap();
            f32::column_sum(&device, &p, &mut out, (rows, n, stride)).unwrap();
            assert_eq!(
                out.to_vec().unwrap(),
                want,
                "{rows} x {n}, {:?}",
                chunks(rows, n)
            );
            let mut out =
                DeviceBuffer::from_slice(&device, &vec![Bf16(0x7fc0); n as usize]).unwrap();
            Bf16::column_sum(&device, &p, &mut out, (rows, n, stride)).unwrap();
            let got: Vec<f32> = out.to_vec().unwrap().iter().map(|x| x.to_f32()).collect();
            let rounded: Vec<f32> = want.iter().map(|&x| Bf16::from_f32(x).to_f32()).collect();
            assert_eq!(got, rounded, "bf16 {rows} x {n}");
        }
    }
}
