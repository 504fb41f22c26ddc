use ck_core::tile::ShuffleCheck;
use ck_macros::tile_distribution;

tile_distribution! {
    struct Rows { warp_size: 32, h: { n: [lane: 32, vec: 4] }, p: [[n.lane]], y: [n.vec] }
}
tile_distribution! {
    struct Strided { warp_size: 32, h: { n: [vec: 4, lane: 32] }, p: [[n.lane]], y: [n.vec] }
}

// shuffle_tile only permutes Y dims; CK does nothing (silently) when R/H/P differ. Here the
// check behind shuffle_tile::<Rows, Strided, _> fails to compile.
const _: () = ShuffleCheck::<Rows, Strided>::OK;

fn main() {}
