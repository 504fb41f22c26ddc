//! dQ's partial sums, added to the f32 workspace by one thread of the producer's warpgroup, so
//! that the consumers never wait on the copy engine or on another block.
//!
//! Step by step, once both consumer warpgroups have staged their halves of the step's dQ
//! ([`DQ_STAGED`]), the thread adds both with the copy engine (`cp.reduce.async.bulk`) and
//! frees the staging tiles as soon as they are read ([`DQ_READ`]).
//!
//! In the deterministic mode it first waits until every lower key tile has added its own
//! partial sum to that query tile (the tile's counter reaches this block's key tile `n`), and
//! counts its addition there once it is done. The sums of a query tile are thus made in key
//! tile order, bit for bit the same on every run, and the next key tile waits only for the
//! addition's round trip to memory — not for this block's next step, as it would if the
//! consumers counted their own.

use super::consumer::{dq_chunk, Outputs};
use super::schedule::*;
use ck_core::device::*;

/// Adds every step's staged dQ (see the module documentation).
#[inline(always)]
pub fn add<const SMEM: usize, const STATS: usize>(
    out: &Outputs,
    smem: &Smem<SMEM, STATS>,
    lay: Layout,
    pb: &Problem,
    d: u32,
) {
    let (n, _) = pb.block();
    let chunk = dq_chunk(d);
    for (t, step) in (0u32..).zip(pb.steps()) {
        smem.bars.wait(DQ_STAGED, t % 2);
        let tile = step.bh * pb.sq.div_ceil(BM) + step.q0 / BM;
        if pb.deterministic {
            while out.counters.atomic_add(tile, 0) < n {}
            fence_acq_rel_gpu();
        }
        for wg in 0..2 {
            let at = (2 * tile + wg) * chunk;
            out.dq
                .bulk_add_from_shared(at, &smem.stats, lay.dq(wg, d), chunk);
        }
        bulk_commit_group();
        bulk_wait_group_read::<0>();
        smem.bars.arrive(DQ_READ);
        if pb.deterministic {
            bulk_wait_group::<0>();
            fence_proxy_async();
            fence_acq_rel_gpu();
            out.counters.atomic_add(tile, 1);
        }
    }
}
