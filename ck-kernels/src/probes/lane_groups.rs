//! CK's short-row RMSNorm configurations, ported by copying their encodings: `rmsnorm2d`'s
//! `generate.py` traits `(tm 8, tn 8, vn 8)`, `(4, 16, 4)` and `(4, 16, 8)`, whose lane dim is a
//! lane group of 8 or 16 lanes in a 64-thread block (`ck_core::encoding`, "Lane groups").
//! Each configuration brings the three encodings of CK's pipeline in its raw spelling: the X
//! tile, gamma (X reduced over X0: replicated over the row groups) and the rows (X reduced over
//! X1: one value per row, replicated over the row's lanes). Each is compiled twice, declared for
//! 64-lane waves as CK writes it and for 32-lane warps; the thread ↔ element map is the same.
//!
//! The kernel loads an `ROWS × COLS` tile of x, reduces x² over each row inside its lane group
//! (`reduce_x_in_warp`), writes the row mean of squares through the rows' distribution, and
//! writes `y = x · rsqrt(mean + eps) · gamma` with gamma and the scale broadcast into the tile
//! (`broadcast_x`). It also sums x down each column of the tile (`block_reduce_x` over X0, whose
//! digits are the lane groups': the groups combine through shared memory) and writes every
//! row of the tile's `column_sums` with those sums. M must be a multiple of ROWS.

use ck_core::device::*;
use ck_core::tile::{
    block_reduce_x, broadcast_x, make_tile_window, reduce_x_in_warp, View1, View2,
};
use ck_core::TileDistribution;
use ck_macros::{tile_distribution, tile_kernel};

/// Threads per block of every configuration (one 64-lane wave, two 32-lane warps).
pub const BLOCK: u32 = 64;

/// Scratch of the column sums' combine across lane groups: `BLOCK · registers` words.
const SCRATCH: usize = 512;

/// RMSNorm of `x`, the rows' mean of squares and the tile's column sums with distributions
/// `X`, its gamma `G` (X reduced over X0) and its rows `R` (X reduced over X1).
#[inline(always)]
fn rmsnorm_rows<X, G, R, const VEC: usize>(
    x: Global<f32>,
    gamma: Global<f32>,
    (y, mean_square, column_sums): (GlobalMut<f32>, GlobalMut<f32>, GlobalMut<f32>),
    (m, eps): (u32, f32),
    scratch: &SharedArray<u32, SCRATCH>,
) where
    X: TileDistribution<X = [i32; 2]>,
    G: TileDistribution<X = [i32; 1]>,
    R: TileDistribution<X = [i32; 1]>,
{
    let [rows, cols] = X::X_LENGTHS;
    let row0 = (block_idx() * rows as u32) as i32;
    let xt = make_tile_window::<X, _>(
        View2::<_, f32, VEC>::new(x, m, cols as u32, cols as u32),
        [row0, 0],
    )
    .load::<f32>();
    let sums = reduce_x_in_warp::<X, R, f32, 1>(&xt.map(|v| v * v), |a, b| a + b);
    let means = sums.map(|s| s / cols as f32);
    make_tile_window::<R, _>(View1::<_, f32, 1>::new(mean_square, m), [row0]).store(&means);
    let g =
        make_tile_window::<G, _>(View1::<_, f32, VEC>::new(gamma, cols as u32), [0]).load::<f32>();
    let scale = broadcast_x::<X, R, f32, 1>(&means.map(|s| math::rsqrt(s + eps)));
    let out = xt
        .zip_map(&scale, |v, s| v * s)
        .zip_map(&broadcast_x::<X, G, f32, 0>(&g), |v, g| v * g);
    make_tile_window::<X, _>(
        View2::<_, f32, VEC>::new(y, m, cols as u32, cols as u32),
        [row0, 0],
    )
    .store(&out);
    let sums = block_reduce_x::<X, f32, 0, SCRATCH>(&xt, |a, b| a + b, scratch);
    let cv = View2::<_, f32, VEC>::new(column_sums, m, cols as u32, cols as u32);
    make_tile_window::<X, _>(cv, [row0, 0]).store(&sums);
}

/// One configuration: `Generic2dBlockShape`'s `[Repeat, WarpPerBlock, ThreadPerWarp, Vector]`
/// along M (`[1, wm, 1, 1]`) and N (`[1, 1, tn, vn]`), the three encodings declared for warp
/// size `$w`, and the kernel.
macro_rules! lane_group_rmsnorm {
    ($kernel:ident / $launcher:ident, $x:ident, $g:ident, $r:ident, w $w:literal,
     wm $wm:literal, tn $tn:literal, vn $vn:literal) => {
        tile_distribution! {
            #[doc = concat!("CK's rmsnorm2d X tile, ", stringify!($wm), " rows of ", stringify!($tn), " lanes × ", stringify!($vn), " (warp size ", stringify!($w), ").")]
            pub struct $x {
                warp_size: $w, block_size: 64, r: [],
                h: [[1, $wm, 1, 1], [1, 1, $tn, $vn]],
                p_major: [[1, 2], [1, 2]], p_minor: [[1, 1], [2, 2]],
                y_major: [1, 1, 2, 2], y_minor: [0, 3, 0, 3],
            }
        }
        tile_distribution! {
            #[doc = concat!("Its gamma: replicated over the ", stringify!($wm), " row groups.")]
            pub struct $g {
                warp_size: $w, block_size: 64, r: [$wm, 1],
                h: [[1, 1, $tn, $vn]],
                p_major: [[0, 1], [0, 1]], p_minor: [[0, 1], [1, 2]],
                y_major: [1, 1], y_minor: [0, 3],
            }
        }
        tile_distribution! {
            #[doc = concat!("Its rows: one value per row, replicated over the row's ", stringify!($tn), " lanes.")]
            pub struct $r {
                warp_size: $w, block_size: 64, r: [1, $tn],
                h: [[1, $wm, 1, 1]],
                p_major: [[1, 0], [1, 0]], p_minor: [[1, 0], [2, 1]],
                y_major: [1, 1], y_minor: [0, 3],
            }
        }
        #[doc = concat!("RMSNorm, the rows' mean of squares and the column sums over `", stringify!($x), "` tiles.")]
        #[tile_kernel(block = 64, distributions($x, $g, $r))]
        pub fn $kernel(
            x: Global<f32>,
            gamma: Global<f32>,
            y: GlobalMut<f32>,
            mean_square: GlobalMut<f32>,
            column_sums: GlobalMut<f32>,
            m: u32,
            eps: f32,
        ) {
            let scratch = shared!(u32; SCRATCH);
            let outputs = (y, mean_square, column_sums);
            rmsnorm_rows::<$x, $g, $r, $vn>(x, gamma, outputs, (m, eps), &scratch);
        }
    };
}

lane_group_rmsnorm!(lane_group_rmsnorm_8x8_w64 / LaneGroupRmsnorm8x8W64, Ck8x8X64, Ck8x8Gamma64, Ck8x8Rows64, w 64, wm 8, tn 8, vn 8);
lane_group_rmsnorm!(lane_group_rmsnorm_8x8_w32 / LaneGroupRmsnorm8x8W32, Ck8x8X32, Ck8x8Gamma32, Ck8x8Rows32, w 32, wm 8, tn 8, vn 8);
lane_group_rmsnorm!(lane_group_rmsnorm_4x16v4_w64 / LaneGroupRmsnorm4x16v4W64, Ck4x16v4X64, Ck4x16v4Gamma64, Ck4x16v4Rows64, w 64, wm 4, tn 16, vn 4);
lane_group_rmsnorm!(lane_group_rmsnorm_4x16v4_w32 / LaneGroupRmsnorm4x16v4W32, Ck4x16v4X32, Ck4x16v4Gamma32, Ck4x16v4Rows32, w 32, wm 4, tn 16, vn 4);
lane_group_rmsnorm!(lane_group_rmsnorm_4x16v8_w64 / LaneGroupRmsnorm4x16v8W64, Ck4x16v8X64, Ck4x16v8Gamma64, Ck4x16v8Rows64, w 64, wm 4, tn 16, vn 8);
lane_group_rmsnorm!(lane_group_rmsnorm_4x16v8_w32 / LaneGroupRmsnorm4x16v8W32, Ck4x16v8X32, Ck4x16v8Gamma32, Ck4x16v8Rows32, w 32, wm 4, tn 16, vn 8);

/// Host side: the six kernels as one table, and the fp64 reference.
#[cfg(not(target_arch = "nvptx64"))]
pub mod host {
    use super::*;
    use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats};

    /// A configuration's launcher: `(x, gamma, y, mean_square, column_sums, m, eps)`.
    type Launch = fn(
        &Device,
        LaunchConfig,
        &DeviceBuffer<f32>,
        &DeviceBuffer<f32>,
        &mut DeviceBuffer<f32>,
        &mut DeviceBuffer<f32>,
        &mut DeviceBuffer<f32>,
        u32,
        f32,
    ) -> Result<LaunchStats, LaunchError>;

    /// What a configuration computes: `y`, each row's mean of squares, and for every row the
    /// column sums of its tile.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Outputs<T> {
        /// `x · rsqrt(mean + eps) · gamma`.
        pub y: Vec<T>,
        /// Each row's mean of squares.
        pub mean_square: Vec<T>,
        /// Row `i`: the sums down the columns of the tile that holds row `i`.
        pub column_sums: Vec<T>,
    }

    /// One compiled configuration.
    pub struct Config {
        /// `tm x tn v vn, warp W`.
        pub name: &'static str,
        /// Rows and columns of its tile.
        pub tile: (u32, u32),
        /// The warp size its encodings declare.
        pub warp_size: u32,
        launch: Launch,
    }

    /// CK's three configurations, each declared for 64- and 32-lane warps.
    #[rustfmt::skip]
    pub const CONFIGS: [Config; 6] = [
        Config::new("8x8 v8, warp 64",  (8, 64),  64, LaneGroupRmsnorm8x8W64::launch),
        Config::new("8x8 v8, warp 32",  (8, 64),  32, LaneGroupRmsnorm8x8W32::launch),
        Config::new("4x16 v4, warp 64", (4, 64),  64, LaneGroupRmsnorm4x16v4W64::launch),
        Config::new("4x16 v4, warp 32", (4, 64),  32, LaneGroupRmsnorm4x16v4W32::launch),
        Config::new("4x16 v8, warp 64", (4, 128), 64, LaneGroupRmsnorm4x16v8W64::launch),
        Config::new("4x16 v8, warp 32", (4, 128), 32, LaneGroupRmsnorm4x16v8W32::launch),
    ];

    impl Config {
        const fn new(name: &'static str, tile: (u32, u32), warp_size: u32, launch: Launch) -> Self {
            Config {
                name,
                tile,
                warp_size,
                launch,
            }
        }

        /// The outputs for `x` (`m` rows of the tile's columns, `m` a multiple of its rows) on
        /// `device`.
        pub fn run(
            &self,
            device: &Device,
            x: &[f32],
            gamma: &[f32],
            m: u32,
            eps: f32,
        ) -> Result<(Outputs<f32>, LaunchStats), LaunchError> {
            let (rows, cols) = self.tile;
            if !m.is_multiple_of(rows)
                || x.len() != (m * cols) as usize
                || gamma.len() != cols as usize
            {
                return Err(LaunchError::invalid(
                    ck_core::rules::SHAPE_MISMATCH,
                    format!(
                        "{}: x must be M × {cols} with M a multiple of {rows}, gamma {cols} long",
                        self.name
                    ),
                ));
            }
            let xd = DeviceBuffer::from_slice(device, x)?;
            let gd = DeviceBuffer::from_slice(device, gamma)?;
            let mut y = DeviceBuffer::from_slice(device, &vec![f32::NAN; x.len()])?;
            let mut ms = DeviceBuffer::from_slice(device, &vec![f32::NAN; m as usize])?;
            let mut cs = DeviceBuffer::from_slice(device, &vec![f32::NAN; x.len()])?;
            let cfg = LaunchConfig::new(m / rows, BLOCK);
            let stats = (self.launch)(device, cfg, &xd, &gd, &mut y, &mut ms, &mut cs, m, eps)?;
            let out = Outputs {
                y: y.to_vec()?,
                mean_square: ms.to_vec()?,
                column_sums: cs.to_vec()?,
            };
            Ok((out, stats))
        }
    }

    /// The outputs in f64 for tiles of `(rows, cols)`.
    pub fn reference(
        x: &[f32],
        gamma: &[f32],
        (rows, cols): (usize, usize),
        eps: f32,
    ) -> Outputs<f64> {
        let mut out = Outputs {
            y: Vec::with_capacity(x.len()),
            mean_square: Vec::new(),
            column_sums: Vec::with_capacity(x.len()),
        };
        for row in x.chunks(cols) {
            let m = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / cols as f64;
            let s = 1.0 / (m + eps as f64).sqrt();
            out.y.extend(
                row.iter()
                    .zip(gamma)
                    .map(|(&v, &g)| v as f64 * s * g as f64),
            );
            out.mean_square.push(m);
        }
        for tile in x.chunks(rows * cols) {
            let sums: Vec<f64> = (0..cols)
                .map(|j| (0..rows).map(|i| tile[i * cols + j] as f64).sum())
                .collect();
            for _ in 0..rows {
                out.column_sums.extend(&sums);
            }
        }
        out
    }
}
