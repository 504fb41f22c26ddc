//! The trait generated distributions implement, so generic code (windows, distributed tensors,
//! sweeps) works with any of them.
//!
//! `tile_distribution!` emits, for a literal encoding, straight-line code for every method (no
//! loop over P or Y, no division); for an encoding with const-generic lengths it emits calls to
//! the generic evaluators below, which compute the same values from [`Encoding`]'s closed forms.

use crate::dims::Dims;
use crate::encoding::{DigitSource, Encoding};
use crate::magic::{magic, magic_div};
use crate::Index;

/// A fixed-size index array (`[Index; N]`): the P, Y, X and R index types of a distribution.
pub trait IndexArray:
    Copy + core::fmt::Debug + PartialEq + AsRef<[Index]> + AsMut<[Index]>
{
    /// Number of entries.
    const LEN: usize;
    /// All zeros.
    fn zero() -> Self;
}

impl<const N: usize> IndexArray for [Index; N] {
    const LEN: usize = N;
    fn zero() -> Self {
        [0; N]
    }
}

/// The first `N` entries of `d` as an array (`N` must equal `d.len()`).
pub const fn array<const N: usize>(d: &Dims) -> [Index; N] {
    assert!(d.len() == N, "array length does not match");
    let mut out = [0; N];
    let mut i = 0;
    while i < N {
        out[i] = d.get(i);
        i += 1;
    }
    out
}

/// A tile distribution: an encoding plus the warp size it was checked against.
pub trait TileDistribution {
    /// `[warp, lane]` or `[lane]`.
    type P: IndexArray;
    /// The per-thread (register) index.
    type Y: IndexArray;
    /// The tile index.
    type X: IndexArray;
    /// The replication index.
    type R: IndexArray;
    /// The checked encoding.
    const ENCODING: Encoding;
    /// Tile lengths.
    const X_LENGTHS: Self::X;
    /// Y lengths (the per-thread box).
    const Y_LENGTHS: Self::Y;
    /// R lengths.
    const R_LENGTHS: Self::R;
    /// Registers per thread (Π Y lengths).
    const THREAD_BUFFER_SIZE: usize;
    /// Threads per warp.
    const WARP_SIZE: u32;
    /// Threads per block.
    const BLOCK_SIZE: u32;
    /// The partition index of a thread of a 1-D block.
    fn partition_index(thread_id: u32) -> Self::P;
    /// The tile index held by thread `p` at register index `y`.
    fn x_index(p: Self::P, y: Self::Y) -> Self::X;
    /// The register slot of `y` (row-major over Y, last fastest).
    fn d_index(y: Self::Y) -> usize;
    /// The R digits of thread `p` (0 for R components no P owns).
    fn rs_index(p: Self::P) -> Self::R;
    /// Calls `f(y, d)` for every point of the Y box in D order.
    fn for_each_y<F: FnMut(Self::Y, usize)>(f: F);
    /// Calls `f(y, d)` for every point of the Y box in span order (X0 outermost; within an X,
    /// its Y-claimed components in H order) — CK's `sweep_tile` order.
    fn sweep<F: FnMut(Self::Y, usize)>(f: F);
}

/// The value of P digit `(divisor, length, top)` of `p` — a merge's magic-number division.
pub const fn p_digit(p: Index, divisor: Index, length: Index, top: bool) -> Index {
    let q = magic_div(p as u32, magic(divisor as u32)) as Index;
    if top {
        q
    } else {
        q - magic_div(q as u32, magic(length as u32)) as Index * length
    }
}

impl Encoding {
    /// The R digits of thread `p` from the closed form (the digit each owning P gives them).
    pub const fn rs_index_closed_form(&self, p: &Dims) -> Dims {
        let mut rs = Dims::splat(self.nr(), 0);
        let mut j = 0;
        while j < self.nr() {
            if let DigitSource::P {
                p: pi,
                divisor,
                length,
                top,
            } = self.digit_source(0, j as Index)
            {
                rs.set(j, p_digit(p.get(pi as usize), divisor, length, top));
            }
            j += 1;
        }
        rs
    }
}

/// Calls `f(y)` for every point of the box `lengths`, row-major (last fastest).
pub fn for_each_point(lengths: &Dims, mut f: impl FnMut(&Dims)) {
    let n = lengths.len();
    if lengths.product() <= 0 {
        return;
    }
    let mut idx = Dims::splat(n, 0);
    loop {
        f(&idx);
        let mut k = n;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            let v = idx.get(k) + 1;
            if v < lengths.get(k) {
                idx.set(k, v);
                break;
            }
            idx.set(k, 0);
        }
    }
}

/// Generic [`TileDistribution::for_each_y`]: `f(y, d)` in D order.
pub fn for_each_y(enc: &Encoding, mut f: impl FnMut(&Dims, usize)) {
    let mut d = 0;
    for_each_point(&enc.y_lengths(), |y| {
        f(y, d);
        d += 1;
    });
}

/// Generic [`TileDistribution::sweep`]: `f(y, d)` in span order.
pub fn sweep(enc: &Encoding, mut f: impl FnMut(&Dims, usize)) {
    for_each_point(&enc.span_box(), |s| {
        let y = enc.y_from_span_index(s);
        f(&y, enc.d_index(&y) as usize);
    });
}
