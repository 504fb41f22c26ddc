//! `lds_probe`: one warp fills a 128 × 32 bf16-sized tile in shared memory with the `k-write`
//! pattern (16 stores: 8 rows each), syncs, and reads rows 0..127 back with the `k-read` pattern
//! (4 loads of 32 rows), once with CK's XOR layout (spec TV8) and once with the plain layout.
//! The XOR kernel states its bank guarantees at compile time: `k-write` conflict-free, `k-read`
//! at most 2-way.

use ck_core::device::*;
use ck_core::lds::{LdsLayout, Pattern};
use ck_macros::tile_kernel;

/// Spec TV8's XOR layout: fp16/bf16, M = 128, K = 32, KPack = 8, MLdsLayer = 2.
pub const XOR: LdsLayout = LdsLayout::xor_or_panic(128, 32, 8, 2, None);
/// The same tile, plain.
pub const PLAIN: LdsLayout = LdsLayout::plain_or_panic(128, 32, 8, 2);

const _: () = XOR.assert_max_ways(Pattern::KWrite, 1);
const _: () = XOR.assert_max_ways(Pattern::KRead, 2);

/// Tile elements.
pub const ELEMS: usize = 128 * 32;

#[inline(always)]
fn probe(layout: &LdsLayout, smem: &SharedArray<u16, ELEMS>, out: GlobalMut<u16>) {
    let lane = thread_idx() as i32;
    // k-write: lane → (m = r·8 + lane / 4, k = (lane % 4)·8), value = the logical index m·32 + k.
    for r in 0..16 {
        let (m, k) = (r * 8 + lane / 4, (lane % 4) * 8);
        let v: [u16; 8] = core::array::from_fn(|j| (m * 32 + k + j as i32) as u16);
        smem.store_vec::<8>(layout.offset(m, k) as u32, v);
    }
    block_sync();
    // k-read: lane → (m = r·32 + lane, k = 0..8).
    for r in 0..4 {
        let m = r * 32 + lane;
        let v = smem.load_vec::<8>(layout.offset(m, 0) as u32);
        out.store_vec::<8>((m * 8) as u32, v);
    }
}

/// The probe over the XOR layout; `out` gets 128 × 8 elements.
#[tile_kernel(block = 32)]
pub fn lds_probe_xor(out: GlobalMut<u16>) {
    let smem = shared!(u16; ELEMS);
    probe(&XOR, &smem, out);
}

/// The probe over the plain layout.
#[tile_kernel(block = 32)]
pub fn lds_probe_plain(out: GlobalMut<u16>) {
    let smem = shared!(u16; ELEMS);
    probe(&PLAIN, &smem, out);
}

/// What the probe writes: row m's first 8 logical indices, for every m.
#[cfg(not(target_arch = "nvptx64"))]
pub fn reference() -> Vec<u16> {
    (0..128)
        .flat_map(|m| (0..8).map(move |j| (m * 32 + j) as u16))
        .collect()
}
