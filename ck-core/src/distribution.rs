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

/// Register capacity of a distribution whose lengths are const-generic (its `Buffer` type
/// cannot be sized exactly on stable Rust); its `THREAD_BUFFER_SIZE` must not exceed this.
pub const PARAMETRIC_BUFFER_CAPACITY: usize = 256;

/// A fixed-size register buffer (`[T; N]`).
pub trait BufferArray<T>: Copy + AsRef<[T]> + AsMut<[T]> {
    /// Every element `v`.
    fn splat(v: T) -> Self;
}

impl<T: Copy, const N: usize> BufferArray<T> for [T; N] {
    #[inline(always)]
    fn splat(v: T) -> Self {
        [v; N]
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
    /// A thread's registers: `THREAD_BUFFER_SIZE` elements of `T`.
    type Buffer<T: Copy>: BufferArray<T>;
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
    /// Threads of one lane group, the threads that act as a warp: what the lane dim spans —
    /// the warp, or with two P dims a divisor of it ([lane groups](crate::encoding#lane-groups)).
    const LANES: u32 = Self::ENCODING.lanes() as u32;
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

/// CK's `load_store_traits` (spec §10.2): which Y dim a window access vectorises along and how
/// many scalars one access moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorPlan {
    /// The Y dim whose consecutive elements one access moves (`VectorDimY`).
    pub vector_dim_y: usize,
    /// Scalars per access (`ScalarPerVector`).
    pub scalar_per_vector: Index,
    /// Accesses per thread (`Π Y lengths / ScalarPerVector`).
    pub num_access: Index,
    /// Place value of the vector dim in D (consecutive vector elements are this far apart in
    /// the register buffer).
    pub d_stride: Index,
}

impl Encoding {
    /// The vector plan of a window over a view that guarantees, along each X, vectors of
    /// `x_vector_lengths[x]` elements with stride `x_vector_strides[x]` (−1 = no guarantee):
    /// the guarantees propagate through the ps_ys_to_xs adaptor (only the last H component of
    /// an X inherits `gcd(guarantee, length)`); the Y with stride 1 and the largest length wins
    /// (ties: the lower Y).
    ///
    /// ```
    /// use ck_core::{Dims, Encoding};
    /// // Spec TV7: TV1's encoding over an fp16 16x512 view guaranteeing 8-wide rows.
    /// let e = Encoding::new(&[], &[&[2, 2, 4, 1], &[2, 2, 16, 8]], &[&[1, 2], &[1, 2]],
    ///                       &[&[1, 1], &[2, 2]], &[1, 1, 2, 2], &[0, 3, 0, 3]).unwrap();
    /// let p = e.vector_plan(&Dims::from_slice(&[-1, 8]), &Dims::from_slice(&[-1, 1]));
    /// assert_eq!((p.vector_dim_y, p.scalar_per_vector, p.num_access), (3, 8, 4));
    /// let p = e.vector_plan(&Dims::from_slice(&[-1, 4]), &Dims::from_slice(&[-1, 1]));
    /// assert_eq!(p.scalar_per_vector, 4); // gcd(4, 8)
    /// let p = e.vector_plan(&Dims::from_slice(&[-1, -1]), &Dims::from_slice(&[-1, -1]));
    /// assert_eq!((p.scalar_per_vector, p.num_access), (1, 32));
    /// ```
    pub const fn vector_plan(
        &self,
        x_vector_lengths: &Dims,
        x_vector_strides: &Dims,
    ) -> VectorPlan {
        let a = self.adaptor();
        let mut gl = [-1 as Index; crate::adaptor::MAX_HIDDEN];
        let mut gs = [-1 as Index; crate::adaptor::MAX_HIDDEN];
        let mut x = 0;
        while x < self.nx() {
            gl[x] = x_vector_lengths.get(x);
            gs[x] = x_vector_strides.get(x);
            x += 1;
        }
        let (vl, vs) = a.propagate_safe_vector(&gl, &gs);
        let top = a.top_ids();
        let mut vdim = 0;
        let mut spv = 1;
        let mut y = 0;
        while y < self.ny() {
            let id = top.get(self.np() + y) as usize;
            if vs[id] == 1 && vl[id] > spv {
                spv = vl[id];
                vdim = y;
            }
            y += 1;
        }
        VectorPlan {
            vector_dim_y: vdim,
            scalar_per_vector: spv,
            num_access: self.thread_buffer_size() / spv,
            d_stride: self.y_lengths().reverse_exclusive_scan().get(vdim),
        }
    }

    /// The D index of `y` with the Y digits of X dim `x` set to 0: the slot where a reduction
    /// over `x` collects one row.
    pub const fn canonical_d(&self, y: &Dims, x: usize) -> Index {
        let mut z = *y;
        let mut i = 0;
        while i < self.ny() {
            if self.y_major().get(i) == x as Index + 1 {
                z.set(i, 0);
            }
            i += 1;
        }
        self.d_index(&z)
    }
}
