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
//! 4]` → pair 0 is (x[0], x[2]) = (1, 3) → (1·0 − 3·1, 3·0 + 1·1) = (−3, 1); pair 1 is (2, 4)
//! at angle 0 → unchanged: `[−3, 2, 1, 4]`.
//!
//! A block takes 16 head rows ([`HeadRows`]: a warp two of them, 16 lanes × 8 consecutive
//! elements each, so D ≤ 128). Each thread's partner elements lie `R/2` columns away
//! (half-split: a second window at `[row, ±R/2]`, from L1) or in its own vector (interleaved).

use ck_core::device::*;
use ck_core::tile::{make_tile_window, DistributedTensor, View2};
use ck_macros::{tile_distribution, tile_kernel};

#[cfg(not(target_arch = "nvptx64"))]
pub mod host;

tile_distribution! {
    /// 16 head rows of up to 128 elements: warp `w` takes rows 2w and 2w + 1, lane `l` of a row
    /// elements 8·(l mod 16) .. + 8.
    pub struct HeadRows {
        warp_size: 32, block_size: 256,
        h: { row: [warp: 8, lane: 2], d: [lane: 16, vec: 8] },
        p: [[row.warp], [row.lane, d.lane]],
        y: [d.vec],
    }
}

/// Head rows per block.
pub const ROWS: u32 = 16;
/// The largest head dim a block's rows hold.
pub const MAX_HEAD_DIM: u32 = 128;

/// The problem: `tokens` of `seq` per sequence, heads, the head dim, the rotary dim, the rows of
/// the cos/sin tables and the style.
#[derive(Clone, Copy)]
pub struct Problem {
    pub tokens: u32,
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

/// The kernel body on elements `T` whose rows allow vectors of `V`.
#[inline(always)]
fn rope_qkv<T: Real, const V: usize>(
    (qkv, cos, sin): (Global<T>, Global<f32>, Global<f32>),
    out: Outputs<T>,
    pb: Problem,
) {
    let heads_all = pb.heads + 2 * pb.kv_heads;
    let rows = pb.tokens * heads_all;
    let r0 = (block_idx() * ROWS) as i32;
    let view = View2::<_, T, V>::new(qkv, rows, pb.head_dim, pb.head_dim);
    let mut window = make_tile_window::<HeadRows, _>(view, [r0, 0]);
    let x = window.load::<T>();
    let half = (pb.rotary_dim / 2) as i32;
    // Half-split partners: column d + R/2 for the first half, d − R/2 for the second (the
    // window moved by ±R/2; what it reads outside the view is zero, and never used).
    let (ahead, behind) = if pb.interleaved {
        (x, x)
    } else {
        window.move_by([0, half]);
        let ahead = window.load::<T>();
        window.move_by([0, -2 * half]);
        (ahead, window.load::<T>())
    };
    let p = HeadRows::partition_index(thread_idx());
    let [row, d0] = HeadRows::x_index(p, [0]);
    let r = r0 as u32 + row as u32;
    if r >= rows || d0 as u32 >= pb.head_dim {
        return;
    }
    let (t, j) = (r / heads_all, r % heads_all);
    let rotate = j < pb.heads + pb.kv_heads && (d0 as u32) < pb.rotary_dim;
    let mut y = DistributedTensor::<HeadRows, f32>::splat(0.0);
    let table = (t % pb.table_rows) * half as u32;
    HeadRows::for_each_y(|yi, di| {
        let d = d0 + yi[0];
        let v = x.get(di).to_f32();
        let out = if !rotate || d >= 2 * half {
            v
        } else if pb.interleaved {
            // The pair (2i, 2i + 1) lies in this thread's vector.
            let i = (d / 2) as u32;
            let (c, s) = (cos.load(table + i), sin.load(table + i));
            let partner = x.get(di ^ 1).to_f32();
            if d % 2 == 0 {
                v * c - partner * s
            } else {
                v * c + partner * s
            }
        } else if d < half {
            let i = d as u32;
            let (c, s) = (cos.load(table + i), sin.load(table + i));
            v * c - ahead.get(di).to_f32() * s
        } else {
            let i = (d - half) as u32;
            let (c, s) = (cos.load(table + i), sin.load(table + i));
            v * c + behind.get(di).to_f32() * s
        };
        y.set(di, out);
    });
    // Head row (t, j) → its place in [B, heads, S, D].
    let (b, s) = (t / pb.seq, t % pb.seq);
    let (dst, head, count) = if j < pb.heads {
        (out.q, j, pb.heads)
    } else if j < pb.heads + pb.kv_heads {
        (out.k, j - pb.heads, pb.kv_heads)
    } else {
        (out.v, j - pb.heads - pb.kv_heads, pb.kv_heads)
    };
    let at = ((b * count + head) * pb.seq + s) * pb.head_dim + d0 as u32;
    let vals: [T; 8] = core::array::from_fn(|i| T::from_f32(y.get(i)));
    if V == 8 {
        dst.store_vec::<8>(at, vals);
    } else {
        dst.store_vec::<4>(at, [vals[0], vals[1], vals[2], vals[3]]);
        dst.store_vec::<4>(at + 4, [vals[4], vals[5], vals[6], vals[7]]);
    }
}

/// Declares [`rope_qkv`] on elements `$t` (rows of vectors of `$v`).
macro_rules! rope_kernel {
    ($(#[$doc:meta])* $name:ident, $t:ty, $v:literal) => {
        $(#[$doc])*
        #[tile_kernel(block = 256, distributions(HeadRows))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            qkv: Global<$t>,
            cos: Global<f32>,
            sin: Global<f32>,
            q: GlobalMut<$t>,
            k: GlobalMut<$t>,
            v: GlobalMut<$t>,
            tokens: u32,
            seq: u32,
            heads: u32,
            kv_heads: u32,
            head_dim: u32,
            rotary_dim: u32,
            table_rows: u32,
            interleaved: u32,
        ) {
            let pb = Problem {
                tokens,
                seq,
                heads,
                kv_heads,
                head_dim,
                rotary_dim,
                table_rows,
                interleaved: interleaved != 0,
            };
            rope_qkv::<$t, $v>((qkv, cos, sin), Outputs { q, k, v }, pb);
        }
    };
}
rope_kernel!(
    /// RoPE and the attention layout on a bf16 QKV projection.
    rope_qkv_bf16, Bf16, 8
);
rope_kernel!(
    /// RoPE and the attention layout on an f32 QKV projection.
    rope_qkv_f32, f32, 4
);
