//! The backward's two row passes around the blocks:
//!
//! * `attention_bwd_rows`, before: per query row `Δ = Σ_d dO ∘ O` (what the probabilities'
//!   gradient subtracts, `dS = P ∘ (dP − Δ)`) and `LSE · log₂ e` — `+∞` for a row that saw no key
//!   (LSE −∞) or lies in the padding past `sq`, so its probabilities are `exp2(s − ∞) = 0` —
//!   both `[batch · heads, sq_pad]`; it also clears dQ's f32 sums and the deterministic
//!   mode's counters, so the workspace needs no set-up;
//! * `attention_bwd_dq_d64` / `_d128`, after: dQ = bf16(scale · sums), the sums read in the
//!   consumers' register order.

use super::schedule::{nz, BM};
use super::BwdHeadDim;
use crate::attention::LOG2_E;
use crate::attention::{D128, D64};
use ck_core::device::*;
use ck_core::tile::{make_tile_window, reduce_x_in_warp, unroll, DistributedTensor, View1, View2};
use ck_macros::{tile_distribution, tile_kernel};

/// Rows per block of the rows pass.
pub const ROWS: u32 = 32;

tile_distribution! {
    /// 32 rows × 64 columns: a warp has four rows, eight lanes a row, eight consecutive columns
    /// (16 bytes of bf16) per lane.
    pub struct RowPanel {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 8, row: 4, one: 1], n: [lane: 8, vec: 8] },
        p: [[m.warp], [m.row, n.lane]],
        y: [m.one, n.vec],
    }
}

tile_distribution! {
    /// One value per row of a [`RowPanel`] (it reduced over its columns): the row's eight lanes
    /// hold it.
    pub struct PanelRows {
        warp_size: 32, block_size: 256,
        r: [lane: 8],
        h: { m: [warp: 8, row: 4, one: 1] },
        p: [[m.warp], [m.row, r.lane]],
        y: [m.one],
    }
}

/// Block `bh · chunks + c` takes rows `32·c..` of head `bh` (`chunks = sq_pad / 32`): Δ and
/// `LSE · log₂ e` of each row into the row workspace
/// `[2, heads, sq_pad]` (`LSE · log₂ e`, then Δ), zeros for its dQ sums
/// and (even chunks) its query tile's counter. `o`, `dout` bf16 `[batch, heads, sq, head_dim]`,
/// or with `seq_first` `[batch, sq, heads, head_dim]` (`heads` here is a batch's: `per_batch`);
/// `lse` `[heads, sq]` (`heads` counting every batch's).
#[tile_kernel(block = 256, distributions(RowPanel, PanelRows))]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_rows(
    o: Global<Bf16>,
    dout: Global<Bf16>,
    lse: Global<f32>,
    rows: GlobalMut<f32>,
    dq: GlobalMut<f32>,
    counters: GlobalMut<u32>,
    sq: u32,
    head_dim: u32,
    heads: u32,
    per_batch: u32,
    seq_first: bool,
) {
    let sq_pad = sq.div_ceil(BM) * BM;
    let half = heads * sq_pad;
    let (lse2, delta) = (rows.slice(0, half), rows.slice(half, half));
    let chunks = sq_pad / ROWS;
    let (bh, c) = (block_idx() / chunks, block_idx() % chunks);
    let row0 = c * ROWS;
    // Head `bh`'s rows: one after another, or a batch's heads interleaved row by row.
    let (b, h) = (bh / nz(per_batch), bh % nz(per_batch));
    let (start, stride) = match seq_first {
        true => ((b * sq * per_batch + h) * head_dim, per_batch * head_dim),
        false => (bh * sq * head_dim, head_dim),
    };
    let len = (sq.max(1) - 1) * stride + head_dim;
    let head =
        |x: Global<Bf16>| View2::<_, Bf16, 8>::new(x.slice(start, len), sq, head_dim, stride);
    // dQ's sums, as rows of `head_dim` (their order inside a tile does not matter here).
    let padded_rows = heads * sq_pad;
    let sums = || View2::<_, f32, 4>::new(dq, padded_rows, head_dim, head_dim);
    let mut acc = DistributedTensor::<RowPanel, f32>::zeros();
    for p in 0..head_dim / 64 {
        let at = [row0 as i32, 64 * p as i32];
        let o = make_tile_window::<RowPanel, _>(head(o), at).load::<Bf16>();
        let g = make_tile_window::<RowPanel, _>(head(dout), at).load::<Bf16>();
        let product = o.zip_map(&g, |a, b| a.to_f32() * b.to_f32());
        acc = acc.zip_map(&product, |s, x| s + x);
        let padded = [(bh * sq_pad + row0) as i32, 64 * p as i32];
        make_tile_window::<RowPanel, _>(sums(), padded)
            .store(&DistributedTensor::<RowPanel, f32>::zeros());
    }
    let d = reduce_x_in_warp::<RowPanel, PanelRows, f32, 1>(&acc, |a, b| a + b);
    // The forward's LSE of this head's rows (rows past `sq` belong to the next head: replaced).
    let l = make_tile_window::<PanelRows, _>(
        View1::<_, f32, 1>::new(lse, bh * sq + sq),
        [(bh * sq + row0) as i32],
    )
    .load::<f32>();
    let part = PanelRows::partition_index(thread_idx());
    let mut l2 = l;
    PanelRows::for_each_y(|y, i| {
        let [r] = PanelRows::x_index(part, y);
        let v = l.get(i);
        let seen = row0 + (r as u32) < sq && v > f32::NEG_INFINITY;
        l2.set(i, if seen { v * LOG2_E } else { f32::INFINITY });
    });
    let padded = |x: GlobalMut<f32>| {
        let v = View1::<_, f32, 1>::new(x.slice(bh * sq_pad, sq_pad), sq_pad);
        make_tile_window::<PanelRows, _>(v, [row0 as i32])
    };
    padded(lse2).store(&l2);
    padded(delta).store(&d);
    if c % 2 == 0 && thread_idx() == 0 {
        counters.store(bh * (sq_pad / BM) + c / 2, 0);
    }
}

/// dQ = bf16(scale · sums) for head dim `H`: block `bh · ⌈sq / 64⌉ + m` converts query tile `m`
/// of head `bh`, reading each warpgroup's half where [`dq_chunk`](super::dq_chunk) says (the
/// consumers' register order) into the same [`BwdHeadDim::Dq`] registers, and writing them
/// through a window (rows past `sq` dropped).
#[inline(always)]
fn dq_tile<H: BwdHeadDim>(sums: Global<f32>, dq: GlobalMut<Bf16>, sq: u32, scale: f32) {
    let tiles = sq.div_ceil(BM);
    let (bh, m) = (block_idx() / tiles, block_idx() % tiles);
    let (wg, t) = (thread_idx() / 128, thread_idx() % 128);
    let chunk = super::dq_chunk(H::D);
    let at = (2 * block_idx() + wg) * chunk + 4 * t;
    let mut x = DistributedTensor::<H::Dq, f32>::zeros();
    unroll::<8>(|g| {
        let g = g as u32;
        if g < H::D / 16 {
            let v = sums.load_vec::<4>(at + 512 * g);
            for (i, v) in (0..4).zip(v) {
                x.set((4 * g + i) as usize, v * scale);
            }
        }
    });
    let len = sq * H::D;
    let head = View2::<_, Bf16, 2>::new(dq.slice(bh * len, len), sq, H::D, H::D);
    make_tile_window::<H::Dq, _>(head, [(m * BM) as i32, 0]).store(&x.round_to::<Bf16>());
}

macro_rules! dq_kernel {
    ($name:ident, $h:ty, $d:literal) => {
        #[doc = concat!("dQ = bf16(scale · sums) for head dim ", stringify!($d), ": one block of 256 threads per 64-row query tile (see `dq_tile`).")]
        #[tile_kernel(block = 256)]
        pub fn $name(sums: Global<f32>, dq: GlobalMut<Bf16>, sq: u32, scale: f32) {
            dq_tile::<$h>(sums, dq, sq, scale);
        }
    };
}

dq_kernel!(attention_bwd_dq_d64, D64, 64);
dq_kernel!(attention_bwd_dq_d128, D128, 128);
