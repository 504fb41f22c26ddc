//! `rope_qkv_*`: rotary position embedding on a fused QKV projection's output, and the layout
//! the attention kernel reads, in one pass.
//!
//! The projection writes each token's heads side by side: `qkv` `[T, (H + 2·Hkv)·D]`, tokens
//! `t = b·S + s`, then the `H` query heads, the `Hkv` key heads and the `Hkv` value heads of
//! `D` each. Seen as `[T·(H + 2·Hkv), D]` every row is one head of one token (a *head row*).
//! The kernel reads head rows, rotates the query's and the key's first `R` (`rotary_dim`)
//! elements, and writes every head row where attention wants it: `q` `[B, H, S, D]`, `k` and
//! `v` `[B, Hkv, S, D]` — so neither the rotation (five elementwise passes in torch) nor the
//! transposes cost a pass of their own.
//!
//! The rotation of pair `i` (`0 ≤ i < R/2`) at angle `θ = pos · f_i`, with `cos`, `sin` given as
//! tables `[rows, R/2]` (row `t mod rows`: `rows = S` shares one table over the batch, `rows =
//! T` gives every token its own position — packed sequences, or positions not starting at 0):
//!
//! ```text
//! half-split (Llama, NeoX):  (x[i], x[i + R/2]) → (x[i]·cos − x[i + R/2]·sin, x[i + R/2]·cos + x[i]·sin)
//! interleaved (GPT-J):       (x[2i], x[2i + 1]) → (x[2i]·cos − x[2i + 1]·sin, x[2i + 1]·cos + x[2i]·sin)
//! ```
//!
//! Worked example (D = R = 4, half-split, one pair angle `θ₀ = π/2`, `θ₁ = 0`): `x = [1, 2, 3,
//! 4]` → pair 0 is (`x[0]`, `x[2]`) = (1, 3) → (1·0 − 3·1, 3·0 + 1·1) = (−3, 1); pair 1 is (2, 4)
//! at angle 0 → unchanged: `[−3, 2, 1, 4]`.
//!
//! A block takes 64 head rows ([`HeadRows`]: a warp two at a time, four times over, 16 lanes ×
//! 8 consecutive elements each, so D ≤ 128). Each thread's partner elements lie `R/2` columns
//! away (half-split: one more vector of the row, from L1) or in its own vector (interleaved).

use ck_core::device::*;
use ck_core::tile::{make_tile_window, unroll, DistributedTensor, View2};
use ck_macros::{tile_distribution, tile_kernel};

#[cfg(not(target_arch = "nvptx64"))]
pub mod describe;
#[cfg(not(target_arch = "nvptx64"))]
pub mod host;

tile_distribution! {
    /// 64 head rows of up to 128 elements: warp `w` takes rows 2w and 2w + 1 and the same 16, 32
    /// and 48 rows further (four in flight per thread), lane `l` of a row elements
    /// 8·(l mod 16) .. + 8.
    pub struct HeadRows {
        warp_size: 32, block_size: 256,
        h: { row: [rep: 4, warp: 8, lane: 2], d: [lane: 16, vec: 8] },
        p: [[row.warp], [row.lane, d.lane]],
        y: [row.rep, d.vec],
    }
}

/// Head rows per block.
pub const ROWS: u32 = 64;
/// The largest head dim a block's rows hold.
pub const MAX_HEAD_DIM: u32 = 128;

/// One call: `batch` sequences of `seq` tokens, the heads, the head dim, the rotary dim (its
/// first elements rotated), the rows of the cos/sin tables (`seq`: one table for every
/// sequence; `batch · seq`: a row per token) and the style (half-split, or interleaved pairs).
/// The host checks it ([`host`]) before a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub batch: u32,
    pub seq: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub rotary_dim: u32,
    pub table_rows: u32,
    pub interleaved: bool,
}

/// The destinations: Q, K and V in `[B, heads, S, D]`.
#[derive(Clone, Copy)]
pub struct Outputs<T: Element> {
    pub q: GlobalMut<T>,
    pub k: GlobalMut<T>,
    pub v: GlobalMut<T>,
}

/// The backward's sources: the gradients of Q, K and V, in `[B, heads, S, D]`.
#[derive(Clone, Copy)]
pub struct Grads<T: Element> {
    pub dq: Global<T>,
    pub dk: Global<T>,
    pub dv: Global<T>,
}

/// The rotation: the rotary dim, the style, the cos/sin tables `[rows, dim / 2]`, and its
/// direction (`inverse`: by minus each angle, the rotation's transpose, a backward pass's).
#[derive(Clone, Copy)]
pub struct Rotary {
    pub dim: u32,
    pub interleaved: bool,
    pub cos: Global<f32>,
    pub sin: Global<f32>,
    pub inverse: bool,
}

impl Rotary {
    /// `sin θ`, or `sin(−θ)` for the inverse rotation.
    #[inline(always)]
    fn signed(&self, s: f32) -> f32 {
        if self.inverse {
            -s
        } else {
            s
        }
    }

    /// Elements `d0 .. d0 + 8` of a row (`own`, `d0 < dim`, a multiple of 8) rotated at the
    /// angles of table row `row`; `partner(pd)` reads elements `pd .. pd + 8` of the same row
    /// (the half-split style's partners lie `dim / 2` away).
    #[inline(always)]
    pub fn rotate8(
        &self,
        own: [f32; 8],
        d0: u32,
        row: u32,
        partner: impl FnOnce(u32) -> [f32; 8],
    ) -> [f32; 8] {
        let half = self.dim / 2;
        let table = row * half;
        if self.interleaved {
            // The pairs (2i, 2i + 1) lie in this thread's vector: angles i = d0/2 .. + 4.
            let (c, s) = (
                self.cos.load_vec::<4>(table + d0 / 2),
                self.sin
                    .load_vec::<4>(table + d0 / 2)
                    .map(|s| self.signed(s)),
            );
            core::array::from_fn(|e| {
                let (i, v, w) = (e / 2, own[e], own[e ^ 1]);
                if e % 2 == 0 {
                    v * c[i] - w * s[i]
                } else {
                    v * c[i] + w * s[i]
                }
            })
        } else {
            // The partners lie R/2 further (first half) or back (second half): one vector of
            // the same row, read again from L1.
            let first = d0 < half;
            let (i0, pd) = if first {
                (d0, d0 + half)
            } else {
                (d0 - half, d0 - half)
            };
            let partner = partner(pd);
            let (c, s) = (
                load8::<f32, 4>(self.cos, table + i0),
                load8::<f32, 4>(self.sin, table + i0).map(|s| self.signed(s)),
            );
            core::array::from_fn(|e| {
                if first {
                    own[e] * c[e] - partner[e] * s[e]
                } else {
                    own[e] * c[e] + partner[e] * s[e]
                }
            })
        }
    }
}

/// RoPE as a QKV projection's GEMM writes its output (`C` `[T, (H + 2·Hkv)·D]`, token `t`'s
/// row `t`): columns below `rotated` (`(H + Hkv)·D`, the query and key heads) are rotated, head
/// by head, at table row `t mod table_rows`; the value heads pass. The TMA GEMM's `ROTARY`
/// epilogue (`gemm_tma_bf16_nk_rope`, [`crate::gemm::linear::launch_rope`]) applies it to the
/// accumulators in registers, so Q and K leave the GEMM rotated and no pass of their own
/// follows. Its tiles are 256 columns wide, whole heads (`D` 64 or 128); the half-split
/// style's partners lie `dim / 2` columns away — in the same thread's registers, a whole
/// 32-column slice away where `dim / 2` is a multiple of 32 (the host checks it): slices `Q`
/// and `Q + dim / 64` are rotated together, at the same angles ([`Projection::rotate`]).
#[derive(Clone, Copy)]
pub struct Projection {
    pub rotary: Rotary,
    pub head_dim: u32,
    pub rotated: u32,
    pub table_rows: u32,
}

impl Projection {
    /// One pair `(x₁, x₂)` rotated by the angle whose cosine and sine are `c`, `s`: `(x₁·c −
    /// x₂·s, x₂·c + x₁·s)` (the module's rule for both styles).
    #[inline(always)]
    pub fn rotate((x1, x2): (f32, f32), (c, s): (f32, f32)) -> (f32, f32) {
        (x1 * c - x2 * s, x2 * c + x1 * s)
    }

    /// Nothing rotated (the epilogues without [`crate::gemm::epilogue::ROTARY`]).
    #[inline(always)]
    pub fn none() -> Projection {
        Projection {
            rotary: Rotary {
                dim: 0,
                interleaved: false,
                cos: Global::empty(),
                sin: Global::empty(),
                inverse: false,
            },
            head_dim: 0,
            rotated: 0,
            table_rows: 1,
        }
    }
}

/// Eight consecutive elements from `at` (16-byte aligned), in vectors of `V`.
#[inline(always)]
pub(crate) fn load8<T: Element, const V: usize>(g: Global<T>, at: u32) -> [T; 8] {
    let mut out = [T::default(); 8];
    for c in 0..8 / V {
        let part = g.load_vec::<V>(at + (c * V) as u32);
        out[c * V..(c + 1) * V].copy_from_slice(&part);
    }
    out
}

/// Stores eight consecutive elements at `at` (16-byte aligned), in vectors of `V`.
#[inline(always)]
pub(crate) fn store8<T: Element, const V: usize>(g: GlobalMut<T>, at: u32, v: [T; 8]) {
    for c in 0..8 / V {
        let mut part = [T::default(); V];
        part.copy_from_slice(&v[c * V..(c + 1) * V]);
        g.store_vec::<V>(at + (c * V) as u32, part);
    }
}

/// The kernel body on elements `T` whose rows allow vectors of `V`.
#[inline(always)]
fn rope_qkv<T: Real, const V: usize>(
    (qkv, cos, sin): (Global<T>, Global<f32>, Global<f32>),
    out: Outputs<T>,
    pb: Shape,
) {
    let heads_all = pb.heads + 2 * pb.kv_heads;
    let rows = pb.batch * pb.seq * heads_all;
    let r0 = (block_idx() * ROWS) as i32;
    let view = View2::<_, T, V>::new(qkv, rows, pb.head_dim, pb.head_dim);
    let x = make_tile_window::<HeadRows, _>(view, [r0, 0]).load::<T>();
    let p = HeadRows::partition_index(thread_idx());
    unroll::<4>(|rep| {
        let [row, d0] = HeadRows::x_index(p, [rep as i32, 0]);
        let (r, d0) = (r0 as u32 + row as u32, d0 as u32);
        if r >= rows || d0 >= pb.head_dim {
            return;
        }
        let (t, j) = (r / heads_all, r % heads_all);
        let own: [f32; 8] =
            core::array::from_fn(|e| x.get(HeadRows::d_index([rep as i32, e as i32])).to_f32());
        let y = if j >= pb.heads + pb.kv_heads || d0 >= pb.rotary_dim {
            own
        } else {
            let rotary = Rotary {
                dim: pb.rotary_dim,
                interleaved: pb.interleaved,
                cos,
                sin,
                inverse: false,
            };
            rotary.rotate8(own, d0, t % pb.table_rows, |pd| {
                load8::<T, V>(qkv, r * pb.head_dim + pd).map(|x| x.to_f32())
            })
        };
        // Head row (t, j) → its place in [B, heads, S, D].
        let (b, s) = (t / pb.seq, t % pb.seq);
        let at = |head: u32, count: u32| ((b * count + head) * pb.seq + s) * pb.head_dim + d0;
        let y = y.map(T::from_f32);
        // One store per destination, not a pointer chosen at run time (which the compiler
        // keeps in a local-memory table).
        if j < pb.heads {
            store8::<T, V>(out.q, at(j, pb.heads), y);
        } else if j < pb.heads + pb.kv_heads {
            store8::<T, V>(out.k, at(j - pb.heads, pb.kv_heads), y);
        } else {
            store8::<T, V>(out.v, at(j - pb.heads - pb.kv_heads, pb.kv_heads), y);
        }
    });
}

/// The backward of [`rope_qkv`]: each head row of `dqkv` (token `t`, head `j`) is the gradient
/// at its place in `dq`, `dk` or `dv` (`[B, heads, S, D]`), the query's and key's rotated back
/// by minus the angle (the rotation's transpose), written in `qkv`'s layout in one pass. The
/// same block of 64 head rows as the forward, reading where the forward wrote and writing
/// where it read.
#[inline(always)]
fn rope_qkv_bwd<T: Real, const V: usize>(
    (grads, cos, sin): (Grads<T>, Global<f32>, Global<f32>),
    dqkv: GlobalMut<T>,
    pb: Shape,
) {
    let heads_all = pb.heads + 2 * pb.kv_heads;
    let rows = pb.batch * pb.seq * heads_all;
    let r0 = (block_idx() * ROWS) as i32;
    let p = HeadRows::partition_index(thread_idx());
    let mut y = DistributedTensor::<HeadRows, T>::splat(T::default());
    unroll::<4>(|rep| {
        let [row, d0] = HeadRows::x_index(p, [rep as i32, 0]);
        let (r, d0) = (r0 as u32 + row as u32, d0 as u32);
        if r >= rows || d0 >= pb.head_dim {
            return;
        }
        let (t, j) = (r / heads_all, r % heads_all);
        let (b, s) = (t / pb.seq, t % pb.seq);
        let at = |head: u32, count: u32| ((b * count + head) * pb.seq + s) * pb.head_dim;
        // One load per source, not a pointer chosen at run time (see the forward).
        let (source, row_at) = if j < pb.heads {
            (grads.dq, at(j, pb.heads))
        } else if j < pb.heads + pb.kv_heads {
            (grads.dk, at(j - pb.heads, pb.kv_heads))
        } else {
            (grads.dv, at(j - pb.heads - pb.kv_heads, pb.kv_heads))
        };
        let read = |from: u32| load8::<T, V>(source, row_at + from).map(|x| x.to_f32());
        let own = read(d0);
        let out = if j >= pb.heads + pb.kv_heads || d0 >= pb.rotary_dim {
            own
        } else {
            let rotary = Rotary {
                dim: pb.rotary_dim,
                interleaved: pb.interleaved,
                cos,
                sin,
                inverse: true,
            };
            rotary.rotate8(own, d0, t % pb.table_rows, read)
        };
        for (e, v) in out.into_iter().enumerate() {
            y.set(HeadRows::d_index([rep as i32, e as i32]), T::from_f32(v));
        }
    });
    let view = View2::<_, T, V>::new(dqkv, rows, pb.head_dim, pb.head_dim);
    make_tile_window::<HeadRows, _>(view, [r0, 0]).store(&y);
}

impl Shape {
    /// The shape from the kernels' last eight arguments.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    const fn of_args(
        batch: u32,
        seq: u32,
        heads: u32,
        kv_heads: u32,
        head_dim: u32,
        rotary_dim: u32,
        table_rows: u32,
        interleaved: u32,
    ) -> Shape {
        Shape {
            batch,
            seq,
            heads,
            kv_heads,
            head_dim,
            rotary_dim,
            table_rows,
            interleaved: interleaved != 0,
        }
    }
}

/// Declares [`rope_qkv`] (`$fwd`) and [`rope_qkv_bwd`] (`$bwd`) on elements `$t` (rows of
/// vectors of `$v`).
macro_rules! rope_kernels {
    ($fwd:ident, $bwd:ident, $t:ty, $v:literal, $what:literal) => {
        #[doc = concat!("RoPE and the attention layout on ", $what, " QKV projection.")]
        #[tile_kernel(block = 256, distributions(HeadRows))]
        #[allow(clippy::too_many_arguments)]
        pub fn $fwd(
            qkv: Global<$t>,
            cos: Global<f32>,
            sin: Global<f32>,
            q: GlobalMut<$t>,
            k: GlobalMut<$t>,
            v: GlobalMut<$t>,
            batch: u32,
            seq: u32,
            heads: u32,
            kv_heads: u32,
            head_dim: u32,
            rotary_dim: u32,
            table_rows: u32,
            interleaved: u32,
        ) {
            let pb = Shape::of_args(
                batch, seq, heads, kv_heads, head_dim, rotary_dim, table_rows, interleaved,
            );
            rope_qkv::<$t, $v>((qkv, cos, sin), Outputs { q, k, v }, pb);
        }

        #[doc = concat!("The backward of `", stringify!($fwd), "`: dQ, dK, dV back to the projection's layout, rotated back.")]
        #[tile_kernel(block = 256, distributions(HeadRows))]
        #[allow(clippy::too_many_arguments)]
        pub fn $bwd(
            dq: Global<$t>,
            dk: Global<$t>,
            dv: Global<$t>,
            cos: Global<f32>,
            sin: Global<f32>,
            dqkv: GlobalMut<$t>,
            batch: u32,
            seq: u32,
            heads: u32,
            kv_heads: u32,
            head_dim: u32,
            rotary_dim: u32,
            table_rows: u32,
            interleaved: u32,
        ) {
            let pb = Shape::of_args(
                batch, seq, heads, kv_heads, head_dim, rotary_dim, table_rows, interleaved,
            );
            rope_qkv_bwd::<$t, $v>((Grads { dq, dk, dv }, cos, sin), dqkv, pb);
        }
    };
}
rope_kernels!(rope_qkv_bf16, rope_qkv_bwd_bf16, Bf16, 8, "a bf16");
rope_kernels!(rope_qkv_f32, rope_qkv_bwd_f32, f32, 4, "an f32");
