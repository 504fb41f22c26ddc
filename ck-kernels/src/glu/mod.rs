//! The gated linear unit's elementwise half, for training: a projection writes the gate's and
//! the up projection's products side by side, `gu = [g, u]` `[..., 2·F]`, and
//!
//! ```text
//! forward:   y = act(g) · u                                   [..., F]
//! backward:  dg = dy · u · act'(g),   du = dy · act(g)        dgu = [dg, du]  [..., 2·F]
//! act = silu (SwiGLU) or gelu, tanh form (GeGLU)
//! ```
//!
//! `gemm::linear::launch_gated` fuses the forward into the GEMM, which never writes `gu`; a
//! training step keeps `gu` for the backward instead (as torch does), so it runs the plain
//! projection and then [`swiglu`](SwigluBf16) / [`geglu`](GegluBf16), and in the backward
//! `swiglu_backward` / `geglu_backward` before the projection's own GEMMs.
//!
//! Worked example (SwiGLU, F = 1): `gu = [1, 2]`: `silu(1) = 1 / (1 + e⁻¹) = 0.7311`, so
//! `y = 1.4621`; for `dy = 1`: `silu'(1) = σ(1)·(1 + 1·(1 − σ(1))) = 0.9277`, so
//! `dgu = [2 · 0.9277, 0.7311] = [1.8553, 0.7311]`.
//!
//! A block takes a tile of 32 rows (the backward: 16) × 256 (bf16) or 128 (f32) columns of
//! `F`; each thread four (two) rows of one 16-byte vector, for `g`, `u` (and `dy`) alike. f32 arithmetic, any shape: a row
//! length that is not a multiple of the vector is read element by element.
//!
//! | file | what |
//! |---|---|
//! | this | the kernels |
//! | [`host`] | launches, the fp64 reference, the four descriptions the registry lists ([`OPS`]) |

use crate::gemm::epilogue::Activation;
use ck_core::device::*;
use ck_core::tile::{make_tile_window, DistributedTensor, View2};
use ck_core::TileDistribution;
use ck_macros::{tile_distribution, tile_kernel};

#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub use host::OPS;

tile_distribution! {
    /// 2-byte elements: 32 rows × 256 columns, warp `w` rows `w, w + 8, ..`, lane `l` columns
    /// `8l .. 8l + 8`.
    pub struct GluTile2 {
        warp_size: 32, block_size: 256,
        h: { row: [rep: 4, warp: 8], col: [lane: 32, vec: 8] },
        p: [[row.warp], [col.lane]],
        y: [row.rep, col.vec],
    }
}

tile_distribution! {
    /// 4-byte elements: 32 rows × 128 columns.
    pub struct GluTile4 {
        warp_size: 32, block_size: 256,
        h: { row: [rep: 4, warp: 8], col: [lane: 32, vec: 4] },
        p: [[row.warp], [col.lane]],
        y: [row.rep, col.vec],
    }
}

tile_distribution! {
    /// [`GluTile2`] with half its rows, for the backward: at four rows a thread its three
    /// inputs took 159–168 registers, one block per SM, too few loads in flight to stream three
    /// inputs and two outputs at the memory's rate.
    pub struct GluBwdTile2 {
        warp_size: 32, block_size: 256,
        h: { row: [rep: 2, warp: 8], col: [lane: 32, vec: 8] },
        p: [[row.warp], [col.lane]],
        y: [row.rep, col.vec],
    }
}

tile_distribution! {
    /// [`GluTile4`] with half its rows, for the backward (as [`GluBwdTile2`]).
    pub struct GluBwdTile4 {
        warp_size: 32, block_size: 256,
        h: { row: [rep: 2, warp: 8], col: [lane: 32, vec: 4] },
        p: [[row.warp], [col.lane]],
        y: [row.rep, col.vec],
    }
}

/// Threads per block.
pub const BLOCK: u32 = 256;

/// The tile of block `block_idx()`: column tiles of `F` fastest.
#[inline(always)]
fn origin<D: TileDistribution<X = [i32; 2]>>(f: u32) -> [i32; 2] {
    let [rows, cols] = D::X_LENGTHS;
    let col_tiles = f.div_ceil(cols as u32);
    let (r, c) = (block_idx() / col_tiles, block_idx() % col_tiles);
    [(r * rows as u32) as i32, (c * cols as u32) as i32]
}

/// The tile at `at` of `g` (columns `0 .. f` of `gu`) and of `u` (columns `f .. 2f`): the views
/// end at `f` and at `2f`, so a tile past the row's end reads zeros, never the other half.
#[inline(always)]
fn load_halves<D, T, const V: usize>(
    gu: Global<T>,
    (m, f): (u32, u32),
    [r, c]: [i32; 2],
) -> (DistributedTensor<D, T>, DistributedTensor<D, T>)
where
    D: TileDistribution<X = [i32; 2]>,
    T: Real,
{
    let (gate, up) = (
        View2::<_, T, V>::new(gu, m, f, 2 * f),
        View2::<_, T, V>::new(gu, m, 2 * f, 2 * f),
    );
    (
        make_tile_window::<D, _>(gate, [r, c]).load::<T>(),
        make_tile_window::<D, _>(up, [r, f as i32 + c]).load::<T>(),
    )
}

/// `y = act(g) · u` on one tile.
#[inline(always)]
fn glu_tile<D, T, const V: usize, const ACT: u32>(gu: Global<T>, y: GlobalMut<T>, mf: (u32, u32))
where
    D: TileDistribution<X = [i32; 2]>,
    T: Real,
{
    let at = origin::<D>(mf.1);
    let (g, u) = load_halves::<D, T, V>(gu, mf, at);
    let out = g.zip_map(&u, |g, u| Activation::apply(ACT, g.to_f32()) * u.to_f32());
    let view = View2::<_, T, V>::new(y, mf.0, mf.1, mf.1);
    make_tile_window::<D, _>(view, at).store(&out.round_to::<T>());
}

/// `dgu = [dy · u · act'(g), dy · act(g)]` on one tile.
#[inline(always)]
fn glu_bwd_tile<D, T, const V: usize, const ACT: u32>(
    (dy, gu): (Global<T>, Global<T>),
    dgu: GlobalMut<T>,
    mf: (u32, u32),
) where
    D: TileDistribution<X = [i32; 2]>,
    T: Real,
{
    let at = origin::<D>(mf.1);
    let d = make_tile_window::<D, _>(View2::<_, T, V>::new(dy, mf.0, mf.1, mf.1), at).load::<T>();
    let (g, u) = load_halves::<D, T, V>(gu, mf, at);
    let du = d.zip_map(&g, |d, g| d.to_f32() * Activation::apply(ACT, g.to_f32()));
    let dg = d
        .zip_map(&u, |d, u| d.to_f32() * u.to_f32())
        .zip_map(&g, |dyu, g| dyu * Activation::slope(ACT, g.to_f32()));
    let (m, f) = mf;
    let (gate, up) = (
        View2::<_, T, V>::new(dgu, m, f, 2 * f),
        View2::<_, T, V>::new(dgu, m, 2 * f, 2 * f),
    );
    make_tile_window::<D, _>(gate, at).store(&dg.round_to::<T>());
    make_tile_window::<D, _>(up, [at[0], f as i32 + at[1]]).store(&du.round_to::<T>());
}

/// Declares the forward and backward kernels of one activation and element type.
macro_rules! glu_kernels {
    ($act:ident, $fwd:ident, $bwd:ident, $dist:ident, $bwd_dist:ident, $t:ty, $v:literal) => {
        #[doc = concat!("`y = ", stringify!($act), "(g) · u` on `", stringify!($t), "` (module doc).")]
        #[tile_kernel(block = 256, distributions($dist))]
        pub fn $fwd(gu: Global<$t>, y: GlobalMut<$t>, m: u32, f: u32) {
            glu_tile::<$dist, $t, $v, { Activation::$act.code() }>(gu, y, (m, f));
        }

        #[doc = concat!("The backward of `", stringify!($fwd), "`: `dgu` from `dy` and `gu`.")]
        #[tile_kernel(block = 256, distributions($bwd_dist))]
        pub fn $bwd(dy: Global<$t>, gu: Global<$t>, dgu: GlobalMut<$t>, m: u32, f: u32) {
            glu_bwd_tile::<$bwd_dist, $t, $v, { Activation::$act.code() }>((dy, gu), dgu, (m, f));
        }
    };
}

glu_kernels!(
    Silu,
    swiglu_bf16,
    swiglu_bwd_bf16,
    GluTile2,
    GluBwdTile2,
    Bf16,
    8
);
glu_kernels!(
    Silu,
    swiglu_f32,
    swiglu_bwd_f32,
    GluTile4,
    GluBwdTile4,
    f32,
    4
);
glu_kernels!(
    Gelu,
    geglu_bf16,
    geglu_bwd_bf16,
    GluTile2,
    GluBwdTile2,
    Bf16,
    8
);
glu_kernels!(
    Gelu,
    geglu_f32,
    geglu_bwd_f32,
    GluTile4,
    GluBwdTile4,
    f32,
    4
);
