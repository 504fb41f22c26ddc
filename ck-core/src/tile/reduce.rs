//! Block-wide reductions of distributed tensors along one X dim ([`block_reduce_x`]), over any
//! [`Reducible`] value: a 32-bit element, a tuple of them, or a [`Welford`] accumulator
//! ([`welford_x`] folds a thread's registers into one per row first).
//!
//! Which registers and which threads hold the same row is derived at compile time from the
//! *reduce encoding* of spec §4.4. For `Rows` (warp `w` holds row `w`, lane `l` holds columns
//! `4l + 128r + v`), reducing X1 folds each thread's 32 registers into one, then combines lanes
//! with `shfl_xor` over the 5 lane bits — no shared memory. Where warps split the row as well,
//! each warp's partial result goes through shared memory once.

use super::{unroll, DistributedTensor};
use crate::device::Element32;
use crate::distribution::TileDistribution;
use crate::{Dims, Index};
use core::marker::PhantomData;

/// A value [`block_reduce_x`] can combine across threads: it crosses lanes and shared memory as
/// `WORDS` 32-bit words. Implemented for every 32-bit [`Element32`], for pairs and triples of
/// reducible values (e.g. `(max, sum)` of an online softmax) and for [`Welford`].
pub trait Reducible: Copy {
    /// 32-bit words of one value.
    const WORDS: usize;
    /// Word `i` (`i < WORDS`).
    fn word(&self, i: usize) -> u32;
    /// The value whose words are `word(0), word(1), ..`.
    fn from_words(word: impl Fn(usize) -> u32) -> Self;
}

impl<T: Element32> Reducible for T {
    const WORDS: usize = 1;
    #[inline(always)]
    fn word(&self, _: usize) -> u32 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_words(word: impl Fn(usize) -> u32) -> Self {
        T::from_bits(word(0))
    }
}

impl<A: Reducible, B: Reducible> Reducible for (A, B) {
    const WORDS: usize = A::WORDS + B::WORDS;
    #[inline(always)]
    fn word(&self, i: usize) -> u32 {
        if i < A::WORDS {
            self.0.word(i)
        } else {
            self.1.word(i - A::WORDS)
        }
    }
    #[inline(always)]
    fn from_words(word: impl Fn(usize) -> u32) -> Self {
        (A::from_words(&word), B::from_words(|i| word(A::WORDS + i)))
    }
}

impl<A: Reducible, B: Reducible, C: Reducible> Reducible for (A, B, C) {
    const WORDS: usize = A::WORDS + B::WORDS + C::WORDS;
    #[inline(always)]
    fn word(&self, i: usize) -> u32 {
        if i < A::WORDS {
            self.0.word(i)
        } else if i < A::WORDS + B::WORDS {
            self.1.word(i - A::WORDS)
        } else {
            self.2.word(i - A::WORDS - B::WORDS)
        }
    }
    #[inline(always)]
    fn from_words(word: impl Fn(usize) -> u32) -> Self {
        let ab = A::WORDS + B::WORDS;
        (
            A::from_words(&word),
            B::from_words(|i| word(A::WORDS + i)),
            C::from_words(|i| word(ab + i)),
        )
    }
}

/// Welford's running mean and variance, merged by Chan's update (never subtracting two large
/// sums, so rows like `1e4 + N(0, 1)` keep their variance where `E[x²] − E[x]²` loses it all),
/// with the mean kept as `shift + mean`: `shift` is one of the values (the first merged),
/// `mean` the mean of the values minus it. An f32 mean of such a row alone is only good to
/// `ulp(1e4) / 2 ≈ 5e-4`, and `x − mean` would inherit that; `x − shift` is exact (two f32
/// values within a factor two subtract exactly) and `mean` is of the data's spread, so
/// `(x − shift) − mean` ([`Welford::deviation`]) keeps f32 precision of the spread. A merge
/// keeps the first accumulator's shift: `delta = (b.shift − a.shift) + (b.mean − a.mean)` is
/// the difference of the two means.
///
/// ```
/// use ck_core::tile::Welford;
/// let pair = |a, b| Welford::merge(Welford::of(a), Welford::of(b));
/// // Merged as a tree (as lanes are): every step here is exact in f32.
/// let acc = Welford::merge(pair(1e4 + 0.25, 1e4 - 0.5), pair(1e4 + 1.0, 1e4 - 0.75));
/// // Mean 1e4, spread (0.25, −0.5, 1, −0.75): the mean relative to the first value is −0.25
/// // exactly, and the variance (0.0625 + 0.25 + 1 + 0.5625) / 4 = 0.46875.
/// assert_eq!((acc.shift, acc.mean, acc.count), (1e4 + 0.25, -0.25, 4.0));
/// assert_eq!((acc.row_mean(), acc.variance()), (1e4, 0.46875));
/// assert_eq!(acc.deviation(1e4 - 0.5), -0.5);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Welford {
    /// A value of the set (the first merged), or 0 when empty.
    pub shift: f32,
    /// Mean of the values minus `shift`.
    pub mean: f32,
    /// Sum of their squared deviations from the mean.
    pub m2: f32,
    /// How many (a float: merged counts stay exact up to 2²⁴).
    pub count: f32,
}

impl Welford {
    /// No values.
    pub const EMPTY: Welford = Welford {
        shift: 0.0,
        mean: 0.0,
        m2: 0.0,
        count: 0.0,
    };

    /// The accumulator of one value.
    #[inline(always)]
    pub fn of(x: f32) -> Welford {
        Welford {
            shift: x,
            mean: 0.0,
            m2: 0.0,
            count: 1.0,
        }
    }

    /// The accumulator of both sets of values, in `a`'s shift.
    #[inline(always)]
    pub fn merge(a: Welford, b: Welford) -> Welford {
        if b.count == 0.0 {
            return a;
        }
        if a.count == 0.0 {
            return b;
        }
        let count = a.count + b.count;
        let delta = (b.shift - a.shift) + (b.mean - a.mean);
        let wb = b.count / count;
        Welford {
            shift: a.shift,
            mean: a.mean + delta * wb,
            m2: a.m2 + b.m2 + delta * delta * a.count * wb,
            count,
        }
    }

    /// `x` minus the mean, as `(x − shift) − mean`.
    #[inline(always)]
    pub fn deviation(self, x: f32) -> f32 {
        (x - self.shift) - self.mean
    }

    /// The mean as one f32 (rounded: subtract it with [`Welford::deviation`] instead).
    #[inline(always)]
    pub fn row_mean(self) -> f32 {
        self.shift + self.mean
    }

    /// The population variance, `m2 / count`.
    #[inline(always)]
    pub fn variance(self) -> f32 {
        self.m2 / self.count
    }
}

impl Reducible for Welford {
    const WORDS: usize = 4;
    #[inline(always)]
    fn word(&self, i: usize) -> u32 {
        [self.shift, self.mean, self.m2, self.count][i].to_bits()
    }
    #[inline(always)]
    fn from_words(word: impl Fn(usize) -> u32) -> Self {
        Welford {
            shift: f32::from_bits(word(0)),
            mean: f32::from_bits(word(1)),
            m2: f32::from_bits(word(2)),
            count: f32::from_bits(word(3)),
        }
    }
}

/// Per-register tables of a reduction over X dim `XR` of distribution `D`, computed at compile
/// time from the *reduce encoding* of spec §4.4 ([`Encoding::reduce`](crate::Encoding::reduce)):
/// its Y dims are the registers that remain (one per row), and the P digits of `XR` become its
/// R components — the thread digits a reduction must combine across.
pub struct Reduction<D, const XR: usize>(PhantomData<D>);

/// Lanes of a warp on NVIDIA GPUs, which `block_reduce_x` shuffles across.
const LANES: u32 = crate::device::WARP_SIZE;

/// Most registers a reduction table covers.
const TABLE: usize = crate::distribution::PARAMETRIC_BUFFER_CAPACITY;

impl<D: TileDistribution, const XR: usize> Reduction<D, XR> {
    /// `D`'s encoding reduced over `XR`.
    pub const REDUCED: crate::Encoding = match D::ENCODING.reduce(&[XR as Index]) {
        Ok(e) => e,
        Err(_) => panic!("error[reduce-x]: the reduced X dim does not exist"),
    };

    const TABLES: ([u16; TABLE], [u16; TABLE], usize) = {
        let e = D::ENCODING;
        let r = Self::REDUCED;
        let lens = e.y_lengths();
        let n = lens.product() as usize;
        assert!(
            n <= TABLE,
            "error[capacity-exceeded]: reductions support at most 256 registers per thread"
        );
        let mut canon = [0u16; TABLE];
        let mut rank = [0u16; TABLE];
        let mut y = Dims::splat(lens.len(), 0);
        let mut d = 0;
        while d < n {
            canon[d] = e.canonical_d(&y, XR) as u16;
            // The register's row in the reduced encoding: its Y digits outside XR, in order.
            let mut kept = Dims::EMPTY;
            let mut i = 0;
            while i < lens.len() {
                if e.y_major().get(i) != XR as Index + 1 {
                    kept = kept.push(y.get(i));
                }
                i += 1;
            }
            rank[d] = r.d_index(&kept) as u16;
            let mut k = lens.len();
            while k > 0 {
                k -= 1;
                let v = y.get(k) + 1;
                if v < lens.get(k) {
                    y.set(k, v);
                    break;
                }
                y.set(k, 0);
            }
            d += 1;
        }
        (canon, rank, r.thread_buffer_size() as usize)
    };
    /// Collecting register of each register.
    pub const CANON: [u16; TABLE] = Self::TABLES.0;
    /// Each register's row: its D index in the reduced encoding.
    pub const RANK: [u16; TABLE] = Self::TABLES.1;
    /// Registers of the reduced encoding (rows a thread holds).
    pub const SLOTS: usize = Self::TABLES.2;
    /// `(lane bits, warp bits)` to combine across: the P digits of the R components the reduce
    /// encoding added (their place values must be powers of two).
    pub const THREAD_BITS: (u32, u32) = {
        let (e, r) = (D::ENCODING, Self::REDUCED);
        let mut masks = [0u32; 2];
        let mut j = e.nr();
        while j < r.nr() {
            let len = r.r_lengths().get(j);
            let mut p = 0;
            while p < r.np() {
                let place = r.ps_over_rs_derivative(p, j);
                if place != 0 && len > 1 {
                    assert!(
                        place & (place - 1) == 0 && len & (len - 1) == 0,
                        "error[reduce-x]: reductions need power-of-two thread digits along the reduced X"
                    );
                    let which = if r.np() == 2 && p == 0 { 1 } else { 0 };
                    masks[which] |= ((len - 1) as u32) << place.trailing_zeros();
                }
                p += 1;
            }
            j += 1;
        }
        // With one P it is the lane (warps replicate the tile); with two, P0 is the warp.
        (masks[0], masks[1])
    };

    /// The distribution's lane groups fit in the hardware's warps (a group divides the warp):
    /// the lane shuffles [`block_reduce_x`] combines by would otherwise mix the wrong threads.
    /// Where a group is a whole warp, the distribution's warps are the hardware's.
    pub const WARPS_MATCH: () = assert!(
        LANES.is_multiple_of(D::LANES),
        "error[warp-size]: block_reduce_x combines threads through 32-lane warps (NVIDIA), but the distribution's lane dim spans more lanes; write it for warp_size: 32, or with a lane group of at most 32 lanes"
    );
}

/// The compile-time checks between a tile distribution `D` and the distribution `R` of its
/// rows (one value per combination of the other X dims) that [`reduce_x_in_warp`] and
/// [`broadcast_x`] make.
pub struct RowsOf<D, R, const XR: usize>(PhantomData<(D, R)>);

impl<D: TileDistribution, R: TileDistribution, const XR: usize> RowsOf<D, R, XR> {
    /// `R` is `D` reduced over `XR` (spec §4.4), so register `d` of a `D` tile belongs to
    /// register `Reduction::<D, XR>::RANK[d]` of an `R` tile.
    pub const REDUCED_AS: () = assert!(
        Reduction::<D, XR>::REDUCED.same_as(&R::ENCODING) && R::WARP_SIZE == D::WARP_SIZE,
        "error[reduce-type]: the row distribution is not the tile's distribution reduced over XR (spec §4.4): give it the tile's R components plus the reduced dim's P-claimed digits, the tile's H without XR, and its Y's without XR's"
    );
    /// No warp digit lies along `XR`: every row is inside one warp.
    pub const IN_WARP: () = assert!(
        Reduction::<D, XR>::THREAD_BITS.1 == 0,
        "error[reduce-across-warps]: warps split the reduced dim; reduce with block_reduce_x, which combines warps through shared memory"
    );
}

/// Reduces `t` over X dim `XR` across the whole block with `op` (e.g. a row sum of a 2-D tile
/// for `XR = 1`): every element of the result holds the combination of all the tile's elements
/// that share its other coordinates, bitwise the same in every thread when `op` is commutative
/// bit for bit (sum, max, pairs of them; [`Welford::merge`] is commutative only up to rounding).
/// `op` must be associative and commutative. Thread digits along `XR` are combined with `shfl_xor` within a warp
/// and through `scratch` across warps (`BLOCK_SIZE · SLOTS · T::WORDS` words, checked at compile
/// time; no shared memory is touched when `XR` has no warp digits). All threads must call it.
///
/// A row max and a row sum, or an online softmax's `(max, sum)` in one pass:
///
/// ```ignore
/// let max = block_reduce_x::<Rows, f32, 1, 256>(&t, f32::max, &scratch);
/// let stats = block_reduce_x::<Rows, (f32, f32), 1, 512>(&pairs, merge_max_sum, &scratch);
/// ```
#[inline(always)]
pub fn block_reduce_x<D: TileDistribution, T: Reducible, const XR: usize, const S: usize>(
    t: &DistributedTensor<D, T>,
    op: impl Fn(T, T) -> T + Copy,
    scratch: &crate::device::SharedArray<u32, S>,
) -> DistributedTensor<D, T> {
    use crate::device::{block_sync, thread_idx};
    const {
        let () = Reduction::<D, XR>::WARPS_MATCH;
        assert!(T::WORDS <= 8, "block_reduce_x: values of at most 8 words");
        assert!(
            Reduction::<D, XR>::THREAD_BITS.1 == 0
                || S >= D::BLOCK_SIZE as usize * Reduction::<D, XR>::SLOTS * T::WORDS,
            "error[reduce-scratch]: block_reduce_x's scratch needs BLOCK_SIZE · SLOTS · WORDS words when warps split the reduced dim"
        );
    }
    // The tables are indexed in place (not copied into locals: a copied 512-byte table can end
    // up in local memory when the surrounding code is large).
    let canon = |d: usize| Reduction::<D, XR>::CANON[d] as usize;
    let rank = |d: usize| Reduction::<D, XR>::RANK[d] as u32;
    let warp_bits = Reduction::<D, XR>::THREAD_BITS.1;
    let slots = Reduction::<D, XR>::SLOTS as u32;
    // Word-major, then slot-major scratch (word i of every thread's row r, then row r + 1,
    // then word i + 1): consecutive lanes touch consecutive words, so values of several words
    // and threads of several rows move without bank conflicts.
    let plane = D::BLOCK_SIZE * slots;
    let mut out = fold_in_warp::<D, T, XR>(t, op);
    // 3. Across warps (lane groups): through shared memory, combining the groups that differ
    // only in XR bits.
    if warp_bits != 0 {
        let tid = thread_idx();
        D::for_each_y(|_, d| {
            if canon(d) == d {
                let v = out.get(d);
                let at = rank(d) * D::BLOCK_SIZE + tid;
                unroll::<8>(|i| {
                    if i < T::WORDS {
                        scratch.store(i as u32 * plane + at, v.word(i));
                    }
                });
            }
        });
        block_sync();
        // The P0 index and the lane: the hardware warp and lane where a group is a warp.
        let (warp, lane) = (tid / D::LANES, tid % D::LANES);
        let warps = D::BLOCK_SIZE / D::LANES;
        // Every warp of a set combines the set's values in the same order (lowest warp first),
        // so all threads end with bitwise the same result — a kernel that subtracts a reduced
        // value (a shift, a max) must see one value per row, not one per warp.
        let first = warp & !warp_bits;
        D::for_each_y(|_, d| {
            if canon(d) == d {
                let mine = out.get(d);
                let mut acc = mine;
                for w in first..warps {
                    if (w & !warp_bits) == first {
                        let at = rank(d) * D::BLOCK_SIZE + w * D::LANES + lane;
                        let v = if w == warp {
                            mine
                        } else {
                            T::from_words(|i| scratch.load(i as u32 * plane + at))
                        };
                        acc = if w == first { v } else { op(acc, v) };
                    }
                }
                out.set(d, acc);
            }
        });
        block_sync();
    }
    // 4. Every register gets its row's result.
    D::for_each_y(|_, d| {
        let c = canon(d);
        if c != d {
            out.set(d, out.get(c));
        }
    });
    out
}

/// Each thread's [`Welford`] of its values along X dim `XR`, one per row, in the row's
/// collecting register (`Reduction::CANON`); the other registers hold [`Welford::EMPTY`], which
/// [`block_reduce_x`]'s fold then skips at compile time. The shift is the collecting
/// register's value, the mean and the squared deviations come from two passes over the
/// registers (four operations per value, a division only by the constant count) — cheaper
/// than merging the values one by one. Padding must be left out by the caller (a padded
/// register would count as a value).
///
/// ```ignore
/// let w = block_reduce_x::<D, Welford, 1, S>(&welford_x::<D, 1>(&x), Welford::merge, &scratch);
/// let y = x.zip_map(&w, |v, w| w.deviation(v) * math::rsqrt(w.variance() + eps));
/// ```
#[inline(always)]
pub fn welford_x<D: TileDistribution, const XR: usize>(
    x: &DistributedTensor<D, f32>,
) -> DistributedTensor<D, Welford> {
    let canon = |d: usize| Reduction::<D, XR>::CANON[d] as usize;
    let mut acc = DistributedTensor::<D, Welford>::splat(Welford::EMPTY);
    D::for_each_y(|_, d| {
        let c = canon(d);
        let mut a = acc.get(c);
        a.count += 1.0;
        a.mean += x.get(d) - x.get(c);
        acc.set(c, a);
    });
    D::for_each_y(|_, d| {
        if canon(d) == d {
            let mut a = acc.get(d);
            a.shift = x.get(d);
            a.mean /= a.count;
            acc.set(d, a);
        }
    });
    D::for_each_y(|_, d| {
        let c = canon(d);
        let mut a = acc.get(c);
        let e = a.deviation(x.get(d));
        a.m2 += e * e;
        acc.set(c, a);
    });
    acc
}

/// Steps 1 and 2 of a reduction over `XR`: every register folded into its row's collecting
/// register (`CANON`), then the collecting registers combined across the lane bits of `XR`
/// with a butterfly of `shfl_xor`s, word by word. Only the collecting registers hold results.
#[inline(always)]
fn fold_in_warp<D: TileDistribution, T: Reducible, const XR: usize>(
    t: &DistributedTensor<D, T>,
    op: impl Fn(T, T) -> T + Copy,
) -> DistributedTensor<D, T> {
    use crate::device::shfl_xor;
    let canon = |d: usize| Reduction::<D, XR>::CANON[d] as usize;
    let lane_bits = Reduction::<D, XR>::THREAD_BITS.0;
    let mut out = *t;
    D::for_each_y(|_, d| {
        let c = canon(d);
        if c != d {
            out.set(c, op(out.get(c), t.get(d)));
        }
    });
    unroll::<5>(|k| {
        let bit = (LANES / 2) >> k;
        if lane_bits & bit != 0 {
            D::for_each_y(|_, d| {
                if canon(d) == d {
                    let v = out.get(d);
                    let other = T::from_words(|i| shfl_xor(v.word(i), bit));
                    out.set(d, op(v, other));
                }
            });
        }
    });
    out
}

/// Reduces `t` over X dim `XR` where every row lies inside one warp (no warp digit along
/// `XR`): a tile of the reduced distribution `R` (one register per row the thread holds),
/// with no shared memory and no barrier — the row max and row sum of an attention score tile
/// in the wgmma accumulator layout, where the four lanes of a quad share each row. `R` must be
/// `D` reduced over `XR` (spec §4.4), checked at compile time, as is the absence of warp
/// digits (reductions across warps need [`block_reduce_x`]). Every thread must call it.
///
/// For the accumulator layout `h: { m: [w: 4, h: 2, g: 8], n: [j: 16, t: 4, e: 2] }`,
/// `p: [[m.w], [m.g, n.t]]`, `y: [n.j, m.h, n.e]`, reducing `n` leaves
/// `r: [t: 4]`, `h: { m: [w: 4, h: 2, g: 8] }`, `p: [[m.w], [m.g, r.t]]`, `y: [m.h]`: each thread
/// folds its 32 registers of a row into one, then two shuffles (lane bits 0 and 1) combine
/// the quad.
#[inline(always)]
pub fn reduce_x_in_warp<D, R, T, const XR: usize>(
    t: &DistributedTensor<D, T>,
    op: impl Fn(T, T) -> T + Copy,
) -> DistributedTensor<R, T>
where
    D: TileDistribution,
    R: TileDistribution,
    T: Reducible + Default,
{
    const {
        let () = Reduction::<D, XR>::WARPS_MATCH;
        let () = RowsOf::<D, R, XR>::REDUCED_AS;
        let () = RowsOf::<D, R, XR>::IN_WARP;
    }
    let folded = fold_in_warp::<D, T, XR>(t, op);
    let mut out = DistributedTensor::<R, T>::splat(T::default());
    D::for_each_y(|_, d| {
        if Reduction::<D, XR>::CANON[d] as usize == d {
            out.set(Reduction::<D, XR>::RANK[d] as usize, folded.get(d));
        }
    });
    out
}

/// The inverse direction of [`reduce_x_in_warp`]: a `D` tile whose every register holds its
/// row's value from `rows`, a tile of `D` reduced over `XR` (checked at compile time) — e.g.
/// the running max of an online softmax, subtracted from every score of its row.
#[inline(always)]
pub fn broadcast_x<D, R, T, const XR: usize>(
    rows: &DistributedTensor<R, T>,
) -> DistributedTensor<D, T>
where
    D: TileDistribution,
    R: TileDistribution,
    T: Copy + Default,
{
    const {
        let () = RowsOf::<D, R, XR>::REDUCED_AS;
    }
    let mut out = DistributedTensor::<D, T>::splat(T::default());
    D::for_each_y(|_, d| out.set(d, rows.get(Reduction::<D, XR>::RANK[d] as usize)));
    out
}
