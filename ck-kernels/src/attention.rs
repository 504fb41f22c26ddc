//! `attention_d64` and `attention_d128`: fused multi-head attention forward (FlashAttention's
//! algorithm) on Hopper's warpgroup MMA, `O = softmax(scale · Q·Kᵀ + mask) · V` with the row
//! log-sum-exp, bf16 Q, K, V and O with f32 accumulation, layout `[batch, heads, seq, head_dim]`
//! (contiguous), grouped-query heads (`heads` a multiple of `kv_heads`), causal masking aligned
//! to the bottom-right corner when `Sq ≠ Sk` (query row `i` sees keys `j ≤ i + Sk − Sq`).
//!
//! A 256-thread block (two warpgroups) owns 128 query rows of one head, 64 per warpgroup, and
//! walks that head's keys in tiles of 128:
//!
//! 1. `S = Q·Kᵀ` (64 × 128 per warpgroup) with `wgmma`, Q and the key tile both K-major in
//!    shared memory (head dim along 128-byte swizzled rows, in 64-column panels);
//! 2. the online softmax on `S` in registers, in the log₂ domain (`scale·log₂e` folded into one
//!    multiply): the tile's row max through [`reduce_x_in_warp`] (the four lanes of a quad share
//!    a row of the accumulator layout), `P = exp2(S − max)`, the rescale `exp2(old − new)` of
//!    the running sum and of `O`, the row sum of `P` the same way;
//! 3. `O += P·V` with `wgmma` taking P from registers: the score tile's accumulator layout *is*
//!    the A-operand layout ([`WgmmaA::Regs`]), so P is rounded to bf16 pairs in place.
//!
//! The next key and value tiles are copied with `cp.async` (16-byte chunks, zero-filled past
//! `Sk`) into the other of two stages while a tile is being used; one barrier per key tile
//! publishes them. Scores of keys past `Sk`, and above the causal diagonal, are set to −∞ before
//! the max — only in the tiles that reach them. A row that sees no key at all (`Sk = 0`, or a
//! causal row above the corner when `Sq > Sk`) keeps a running max of −∞; it is exponentiated
//! against 0 instead, so it gives `O = 0` and `LSE = −∞`, never NaN.

use ck_core::device::*;
use ck_core::tile::{
    broadcast_x, make_tile_window, reduce_x_in_warp, unroll, DistributedTensor, View1, View2,
};
use ck_core::wgmma::{swizzle_128b, SmemMatrix, SwizzleMode};
use ck_core::TileDistribution;
use ck_macros::{tile_distribution, tile_kernel};

/// Query rows per block (two warpgroups of 64).
pub const BM: u32 = 128;
/// Keys per tile.
pub const BN: u32 = 128;
/// Bytes of one 64-column panel of a 128-row tile (128 rows × 128 bytes).
const PANEL_BYTES: u32 = 128 * 128;
/// `log₂ e`: scores are scaled into the log₂ domain once, so every exponential is one `exp2`.
pub const LOG2_E: f32 = core::f32::consts::LOG2_E;

/// A 128 × 64 tile of Q, K or V (head dim 64) as 16-byte copies: the GEMM's A stage (each
/// warp copies 4 rows of 128 bytes, 4 times).
pub use crate::gemm_sm90::ACopy as Copy64;

tile_distribution! {
    /// A 128 × 128 tile (head dim 128) as 16-byte copies: each warp copies 2 rows of 256 bytes,
    /// 8 times.
    pub struct Copy128 {
        warp_size: 32, block_size: 256,
        h: { s: [rep: 8, warp: 8, lane: 2], d: [lane: 16, vec: 8] },
        p: [[s.warp], [s.lane, d.lane]],
        y: [s.rep, d.vec],
    }
}

/// The 128 × 128 score tile in the wgmma accumulator layout — the GEMM's 128 × 128 C tile:
/// warpgroup `wg` owns rows 64·wg..64·wg + 64; in it warp `w` and lane (g, t) hold rows
/// 16w + {g, g + 8} and columns 8j + 2t + {0, 1} — register 4j + 2h + e. Also `O`'s layout for
/// head dim 128.
pub use crate::gemm_sm90::CWgmma128 as Scores;

tile_distribution! {
    /// `O`'s 128 × 64 tile (head dim 64) in the accumulator layout ([`Scores`] with j < 8).
    pub struct Out64 {
        warp_size: 32, block_size: 256,
        h: { m: [wg: 2, w: 4, h: 2, g: 8], n: [j: 8, t: 4, e: 2] },
        p: [[m.wg, m.w], [m.g, n.t]],
        y: [n.j, m.h, n.e],
    }
}

tile_distribution! {
    /// One value per query row: [`Scores`] (or [`Out64`]) reduced over its columns. The lane
    /// digit `t` that split a row becomes the replication `r.t`: the quad's four lanes hold the
    /// same two rows (registers h = 0, 1).
    pub struct RowStats {
        warp_size: 32, block_size: 256,
        r: [t: 4],
        h: { m: [wg: 2, w: 4, h: 2, g: 8] },
        p: [[m.wg, m.w], [m.g, r.t]],
        y: [m.h],
    }
}

/// What depends on the head dim.
pub trait HeadDim {
    /// The head dim (a multiple of 64: tiles are stored in 64-column panels).
    const D: u32;
    /// A `128 × D` tile as 16-byte copies.
    type Copy: TileDistribution<Y = [i32; 2], X = [i32; 2], P = [i32; 2]>;
    /// `O`'s accumulators: one `m64nDk16` MMA's.
    type Acc: WgmmaAccumulators;
    /// `O`'s tile in the accumulator layout.
    type Out: TileDistribution<X = [i32; 2], Buffer<f32> = Self::Acc>;
}

/// Head dim 64 (`attention_d64`).
pub struct D64;
/// Head dim 128 (`attention_d128`).
pub struct D128;

impl HeadDim for D64 {
    const D: u32 = 64;
    type Copy = Copy64;
    type Acc = [f32; 32];
    type Out = Out64;
}

impl HeadDim for D128 {
    const D: u32 = 128;
    type Copy = Copy128;
    type Acc = [f32; 64];
    type Out = Scores;
}

/// Bytes of a 128-row tile of head dim `d`.
const fn tile_bytes(d: u32) -> u32 {
    128 * d * 2
}

/// Shared elements of the kernel for head dim `d`: Q, two stages of (K, V), and up to 1 KiB to
/// start them on a 1024-byte boundary (the swizzle XORs absolute address bits).
const fn smem_elems(d: u32) -> usize {
    ((5 * tile_bytes(d) + 1024) / 2) as usize
}

/// The problem as the kernel sees it.
#[derive(Clone, Copy)]
struct Problem {
    /// Query and key lengths.
    sq: u32,
    sk: u32,
    /// Query heads, and query heads per key/value head.
    heads: u32,
    group: u32,
    /// `scale · log₂ e`.
    scale_log2: f32,
    causal: bool,
}

/// One head's `[seq, D]` rows of Q, K or V, rows of 8-element (16-byte) vectors.
type HeadRows = View2<Global<Bf16>, Bf16, 8>;

/// Issues the copies of rows `row0..row0 + 128` of `src` into the tile at element `at` of
/// `smem` (64-column panels of 128 swizzled rows of 128 bytes), zero-filling rows past its end.
#[inline(always)]
fn copy_tile<H: HeadDim, const SMEM: usize>(
    smem: &SharedArray<Bf16, SMEM>,
    at: u32,
    src: &HeadRows,
    row0: u32,
) {
    let p = H::Copy::partition_index(thread_idx());
    // 128 · D / 8 chunks over 256 threads.
    unroll::<8>(|rep| {
        if (rep as u32) < 128 * H::D / 8 / 256 {
            let [r, c] = H::Copy::x_index(p, [rep as i32, 0]).map(|x| x as u32);
            let to = at + (c / 64 * PANEL_BYTES + swizzle_128b(r * 128 + c % 64 * 2)) / 2;
            src.copy_16_async(smem, to, [row0 + r, c]);
        }
    });
}

/// A K-major operand of 16 k (head-dim) columns, `kk`-th of the tile at shared byte `tile`,
/// starting at row `row`.
#[inline(always)]
fn k_major(tile: u32, row: u32, kk: u32) -> u64 {
    SmemMatrix {
        start: tile + kk / 4 * PANEL_BYTES + row * 128 + kk % 4 * 32,
        lbo: 16,
        sbo: 1024,
        swizzle: SwizzleMode::B128,
    }
    .descriptor()
}

/// Keys `16·kk..16·kk + 16` of the value tile at shared byte `tile` as an N-major B operand
/// (N = the head dim, across the 64-column panels).
#[inline(always)]
fn values(tile: u32, kk: u32) -> u64 {
    SmemMatrix {
        start: tile + kk * 16 * 128,
        lbo: PANEL_BYTES,
        sbo: 1024,
        swizzle: SwizzleMode::B128,
    }
    .descriptor()
}

/// Sets the scores of keys past `sk`, and of keys above the causal diagonal, to −∞ (the tile
/// starts at query row `q0` and key `key0`).
#[inline(always)]
fn mask(s: &mut DistributedTensor<Scores, f32>, (q0, key0): (u32, u32), pb: &Problem) {
    let diag = pb.sk as i64 - pb.sq as i64;
    let p = Scores::partition_index(thread_idx());
    Scores::for_each_y(|y, d| {
        let [r, c] = Scores::x_index(p, y);
        let (row, key) = (q0 + r as u32, key0 + c as u32);
        let visible = key < pb.sk && (!pb.causal || key as i64 <= row as i64 + diag);
        if !visible {
            s.set(d, f32::NEG_INFINITY);
        }
    });
}

/// The kernel body for head dim `H`, with the shared memory of its kernel.
#[inline(always)]
fn attention<H: HeadDim, const SMEM: usize>(
    (q, k, v): (Global<Bf16>, Global<Bf16>, Global<Bf16>),
    (o, lse): (GlobalMut<Bf16>, GlobalMut<f32>),
    pb: Problem,
    smem: SharedArray<Bf16, SMEM>,
) {
    let tile = tile_bytes(H::D);
    let first = (1024 - smem.shared_address(0) % 1024) % 1024 / 2;
    let q_tiles = pb.sq.div_ceil(BM);
    let bh = block_idx() / q_tiles;
    // Causal blocks do less work the earlier their rows: start the longest ones first.
    let qt = block_idx() % q_tiles;
    let qt = if pb.causal { q_tiles - 1 - qt } else { qt };
    let q0 = qt * BM;
    let (batch, head) = (bh / pb.heads, bh % pb.heads);
    let kv_heads = pb.heads / pb.group;
    let head_rows = |x: Global<Bf16>, head: u32, seq: u32| {
        HeadRows::new(x.slice(head * seq * H::D, seq * H::D), seq, H::D, H::D)
    };
    let q = head_rows(q, bh, pb.sq);
    let kv_head = batch * kv_heads + head / pb.group;
    let (k, v) = (head_rows(k, kv_head, pb.sk), head_rows(v, kv_head, pb.sk));
    // Keys any row of the tile sees: all, or up to the last row's diagonal.
    let last_row = (q0 + BM).min(pb.sq) as i64 - 1;
    let key_end = if pb.causal {
        (last_row + pb.sk as i64 - pb.sq as i64 + 1).clamp(0, pb.sk as i64) as u32
    } else {
        pb.sk
    };
    let key_tiles = key_end.div_ceil(BN);
    // Element offsets of Q and of stage s's K and V.
    let q_at = first;
    let k_at = |s: u32| first + (tile + 2 * s * tile) / 2;
    let v_at = |s: u32| k_at(s) + tile / 2;
    copy_tile::<H, SMEM>(&smem, q_at, &q, q0);
    if key_tiles > 0 {
        copy_tile::<H, SMEM>(&smem, k_at(0), &k, 0);
        copy_tile::<H, SMEM>(&smem, v_at(0), &v, 0);
    }
    cp_async_commit();

    let wg = warp_id() / 4;
    let mut acc = DistributedTensor::<H::Out, f32>::splat(0.0);
    let mut row_max = DistributedTensor::<RowStats, f32>::splat(f32::NEG_INFINITY);
    let mut row_sum = DistributedTensor::<RowStats, f32>::splat(0.0);
    for j in 0..key_tiles {
        // This thread's copies of tile j have landed; the barrier publishes everyone's (to the
        // MMAs' async proxy, hence the fence) and says every warpgroup is done with tile j − 1,
        // whose stage the next copies overwrite.
        cp_async_wait::<0>();
        fence_proxy_async();
        block_sync();
        if j + 1 < key_tiles {
            let (s, row0) = ((j + 1) % 2, (j + 1) * BN);
            copy_tile::<H, SMEM>(&smem, k_at(s), &k, row0);
            copy_tile::<H, SMEM>(&smem, v_at(s), &v, row0);
        }
        cp_async_commit();

        let (q_tile, k_tile, v_tile) = (
            smem.shared_address(q_at),
            smem.shared_address(k_at(j % 2)),
            smem.shared_address(v_at(j % 2)),
        );
        let mut s = DistributedTensor::<Scores, f32>::splat(0.0);
        wgmma_fence();
        unroll::<8>(|kk| {
            let kk = kk as u32;
            if kk < H::D / 16 {
                let (a, b) = (k_major(q_tile, wg * 64, kk), k_major(k_tile, 0, kk));
                wgmma_bf16_b_kmajor(&mut s.data, a, b, kk > 0);
            }
        });
        wgmma_commit();
        wgmma_wait::<0>(&mut s.data);

        s.update(|x| *x *= pb.scale_log2);
        let key0 = j * BN;
        let crosses_diagonal =
            pb.causal && (key0 + BN) as i64 - 1 > q0 as i64 + pb.sk as i64 - pb.sq as i64;
        if key0 + BN > pb.sk || crosses_diagonal {
            mask(&mut s, (q0, key0), &pb);
        }
        // Online softmax: the new running max, the factor that moves the old sum and O onto it.
        let tile_max = reduce_x_in_warp::<Scores, RowStats, f32, 1>(&s, f32::max);
        let new_max = row_max.zip_map(&tile_max, f32::max);
        // A row that has seen no key keeps −∞; exponentiate against 0 so it stays 0, not NaN.
        let base = new_max.map(|m| if m == f32::NEG_INFINITY { 0.0 } else { m });
        let rescale = row_max.zip_map(&base, |old, b| math::exp2(old - b));
        let p = s.zip_map(&broadcast_x::<Scores, RowStats, f32, 1>(&base), |x, b| {
            math::exp2(x - b)
        });
        let tile_sum = reduce_x_in_warp::<Scores, RowStats, f32, 1>(&p, |a, b| a + b);
        row_sum = row_sum
            .zip_map(&rescale, |l, r| l * r)
            .zip_map(&tile_sum, |l, t| l + t);
        row_max = new_max;
        acc = acc.zip_map(
            &broadcast_x::<H::Out, RowStats, f32, 1>(&rescale),
            |o, r| o * r,
        );

        wgmma_fence();
        unroll::<8>(|kk| {
            // The A fragment of keys 16·kk.. is accumulator registers 8·kk..8·kk + 8.
            let at = |i: usize| 8 * kk + i;
            let a = [0, 2, 4, 6].map(|i| Bf16::pack2(p.get(at(i)), p.get(at(i + 1))));
            wgmma_bf16_a_regs(&mut acc.data, a, values(v_tile, kk as u32), true);
        });
        wgmma_commit();
        wgmma_wait::<0>(&mut acc.data);
    }

    let inv = row_sum.map(|l| if l > 0.0 { 1.0 / l } else { 0.0 });
    let out = acc.zip_map(&broadcast_x::<H::Out, RowStats, f32, 1>(&inv), |o, i| {
        Bf16::from_f32(o * i)
    });
    // Views end at this head's last row, so the padding rows of the tile are not written.
    let head_end = (bh + 1) * pb.sq;
    let origin = (bh * pb.sq + q0) as i32;
    let ov = View2::<_, Bf16, 2>::new(o, head_end, H::D, H::D);
    make_tile_window::<H::Out, _>(ov, [origin, 0]).store(&out);
    // LSE = ln Σ exp(scale·s) = (max + log₂ sum) · ln 2; −∞ for a row that saw no key.
    let row_lse = row_max.zip_map(&row_sum, |m, l| {
        if l > 0.0 {
            (m + math::log2(l)) * core::f32::consts::LN_2
        } else {
            f32::NEG_INFINITY
        }
    });
    // The quad's four lanes hold the same rows: one of them writes.
    if lane_id().is_multiple_of(4) {
        let lv = View1::<_, f32, 1>::new(lse, head_end);
        make_tile_window::<RowStats, _>(lv, [origin]).store(&row_lse);
    }
}

macro_rules! attention_kernel {
    ($name:ident, $h:ty, $d:literal, $out:ident) => {
        #[doc = concat!("Attention forward for head dim ", stringify!($d), ": grid `⌈Sq / 128⌉ · batch · heads` blocks of 256 threads (see the module documentation).")]
        #[tile_kernel(block = 256, min_blocks_per_sm = 1, distributions($out, Scores, RowStats))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            q: Global<Bf16>,
            k: Global<Bf16>,
            v: Global<Bf16>,
            o: GlobalMut<Bf16>,
            lse: GlobalMut<f32>,
            sq: u32,
            sk: u32,
            heads: u32,
            group: u32,
            scale_log2: f32,
            causal: bool,
        ) {
            let smem = shared!(Bf16; smem_elems($d));
            let pb = Problem { sq, sk, heads, group, scale_log2, causal };
            attention::<$h, { smem_elems($d) }>((q, k, v), (o, lse), pb, smem);
        }
    };
}

attention_kernel!(attention_d64, D64, 64, Out64);
attention_kernel!(attention_d128, D128, 128, Scores);

#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
