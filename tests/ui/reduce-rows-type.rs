use ck_core::tile::RowsOf;
use ck_macros::tile_distribution;

tile_distribution! {
    /// 64 × 32 in the wgmma accumulator layout of one warpgroup: a row lies in one quad.
    struct Acc {
        warp_size: 32, block_size: 128,
        h: { m: [w: 4, h: 2, g: 8], n: [j: 4, t: 4, e: 2] },
        p: [[m.w], [m.g, n.t]],
        y: [n.j, m.h, n.e],
    }
}

tile_distribution! {
    /// Its rows without the replication over the quad's lanes: 32 threads where 128 hold rows.
    struct NotItsRows {
        warp_size: 32, block_size: 128,
        h: { m: [w: 4, h: 2, g: 8], k: [t: 4] },
        p: [[m.w], [m.g, k.t]],
        y: [m.h],
    }
}

// reduce_x_in_warp::<Acc, NotItsRows, _, 1> and broadcast_x evaluate this check.
const _: () = RowsOf::<Acc, NotItsRows, 1>::REDUCED_AS;

fn main() {}
