use ck_core::tile::Reduction;
use ck_macros::tile_distribution;

tile_distribution! {
    /// A wave64 distribution (AMD's warp size): its lanes are not an NVIDIA warp's.
    struct Wave64 {
        warp_size: 64, block_size: 64,
        h: { i: [lane: 64, vec: 4] },
        p: [[i.lane]],
        y: [i.vec],
    }
}

// block_reduce_x::<Wave64, _, 0, _> evaluates this check: shuffles over 64 "lanes" would mix
// two NVIDIA warps' registers.
const _: () = Reduction::<Wave64, 0>::WARPS_MATCH;

fn main() {}
