use ck_core::tile::RowsOf;
use ck_macros::tile_distribution;

tile_distribution! {
    /// 4 rows × 256 over 4 warps: two warps share each row.
    struct Tile {
        warp_size: 32, block_size: 128,
        h: { m: [rep: 2, warp: 2], n: [warp: 2, lane: 32, vec: 4] },
        p: [[m.warp, n.warp], [n.lane]],
        y: [m.rep, n.vec],
    }
}

tile_distribution! {
    /// Its rows (the tile reduced over n): right type, but warps split the reduced dim.
    struct Rows {
        warp_size: 32, block_size: 128,
        r: [w: 2, l: 32],
        h: { m: [rep: 2, warp: 2] },
        p: [[m.warp, r.w], [r.l]],
        y: [m.rep],
    }
}

// reduce_x_in_warp::<Tile, Rows, _, 1> evaluates this check: it has no shared memory to
// combine the two warps of a row.
const _: () = RowsOf::<Tile, Rows, 1>::IN_WARP;

fn main() {}
