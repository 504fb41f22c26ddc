//! The width of the TMA GEMM's block tile: 256 columns (the most arithmetic per byte copied)
//! or 192 (for shapes whose 256-wide tiles leave the last wave of multiprocessors mostly
//! idle), with the accumulator layout of that width.

use crate::gemm::wgmma::CWgmma256;
use ck_core::device::WgmmaAccumulators;
use ck_core::distribution::TileDistribution;
use ck_core::tile::DistributedTensor;
use ck_macros::tile_distribution;

/// A block tile's width: its columns of C, and the accumulators of the two consumer
/// warpgroups' `m64nBNk16` MMAs (each warpgroup 64 rows by `BN`).
pub trait Width: 'static {
    /// Columns of the block tile: a multiple of 64 (whole B panels and C boxes), at most 256.
    const BN: u32;
    /// The tile's accumulators in the wgmma layout ([`CWgmma256`] for `j < BN / 8`).
    type Acc: TileDistribution<X = [i32; 2]>;
    /// The same registers as the MMA takes them (`BN / 2` of them).
    type Regs: WgmmaAccumulators;
    /// `acc`'s registers.
    fn regs(acc: &mut DistributedTensor<Self::Acc, f32>) -> &mut Self::Regs;
    /// Register `i` of `acc`.
    fn reg(acc: &DistributedTensor<Self::Acc, f32>, i: usize) -> f32;
    /// Sets register `i` of `acc`.
    fn set_reg(acc: &mut DistributedTensor<Self::Acc, f32>, i: usize, v: f32);
}

/// Tiles of 128 × 256: the most arithmetic per byte copied, the default.
pub struct N256;
/// Tiles of 128 × 192, for shapes whose 128 × 256 tiles leave the last wave mostly idle: at
/// 3072³, 288 tiles of 128 × 256 take three waves of 132 multiprocessors, the third under a
/// quarter full; 384 of 128 × 192 fill three waves to 97 % (`gemm::auto` decides).
pub struct N192;

tile_distribution! {
    /// C's 128 × 192 tile in the wgmma accumulator layout ([`CWgmma256`] with j < 24).
    pub struct CWgmma192 {
        warp_size: 32, block_size: 256,
        h: { m: [wg: 2, w: 4, h: 2, g: 8], n: [j: 24, t: 4, e: 2] },
        p: [[m.wg, m.w], [m.g, n.t]],
        y: [n.j, m.h, n.e],
    }
}

macro_rules! width {
    ($w:ty, $bn:literal, $acc:ty, $regs:literal) => {
        impl Width for $w {
            const BN: u32 = $bn;
            type Acc = $acc;
            type Regs = [f32; $regs];
            #[inline(always)]
            fn regs(acc: &mut DistributedTensor<$acc, f32>) -> &mut [f32; $regs] {
                &mut acc.data
            }
            #[inline(always)]
            fn reg(acc: &DistributedTensor<$acc, f32>, i: usize) -> f32 {
                acc.data[i]
            }
            #[inline(always)]
            fn set_reg(acc: &mut DistributedTensor<$acc, f32>, i: usize, v: f32) {
                acc.data[i] = v;
            }
        }
    };
}
width!(N256, 256, CWgmma256, 128);
width!(N192, 192, CWgmma192, 96);
