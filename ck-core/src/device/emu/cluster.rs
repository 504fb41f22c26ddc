//! Thread-block clusters (sm_90) in the emulator: a kernel declared with
//! `#[tile_kernel(cluster = N)]` runs in groups of `N` consecutive blocks that are scheduled
//! together, may arrive on each other's mbarriers and receive each other's multicast TMA copies,
//! and meet at [`cluster_sync`].
//!
//! The race detector orders the threads of a cluster as one: an arrival on a peer's mbarrier
//! releases the arriving thread's accesses to whoever waits for that phase, a multicast copy's
//! writes into a peer are ordered after what its issuer had acquired, and `cluster_sync` is a
//! rendezvous of every thread of the cluster. Touching a block whose threads have all returned
//! is `barrier-misuse` (on the GPU its shared memory is gone): a `cluster_sync` before the
//! kernel returns keeps the cluster's blocks alive while others use them.

use std::prelude::rust_2021::*;

use super::pipeline::{arrive_at, barrier_offset, fail};
use super::state::BlockState;
use super::{ctx, Event, SharedArray, Tma};
use crate::device::{Element, Mbarrier};
use crate::report::Fault;
use std::panic::Location;

/// This block's rank in its cluster (`0..cluster_size()`; 0 without clusters).
pub fn cluster_ctarank() -> u32 {
    ctx().state().rank
}

/// Blocks per cluster (1 for a kernel declared without `cluster`).
pub fn cluster_size() -> u32 {
    ctx().state().cluster
}

/// `barrier.cluster.arrive` + `barrier.cluster.wait`: waits until every thread of every block
/// of the cluster is here; then each is ordered after everything all of them did before. Also
/// what makes one block's mbarrier `init`s visible to the others.
#[track_caller]
pub fn cluster_sync() {
    ctx().suspend(Event::Cluster(Location::caller()));
}

/// Block `rank` of the current thread's cluster (`barrier-misuse` past the cluster).
fn peer(rank: u32, what: &str, site: super::state::Site) -> &'static BlockState {
    let c = ctx();
    match c.peer(rank) {
        Some(st) => st,
        None => fail(
            Fault::BarrierMisuse,
            None,
            format!(
                "{} {what} cluster rank {rank} (at {site}); the cluster has ranks 0..{}",
                c.state().name(c.gid()),
                c.state().cluster
            ),
        ),
    }
}

impl<const N: usize> SharedArray<Mbarrier, N> {
    /// `mbarrier.arrive.shared::cluster` on barrier `i` of the cluster's block `rank` (the
    /// same barrier in that block's shared memory; `rank` may be this block's own): one
    /// arrival, releasing this thread's earlier accesses to the threads that wait for the phase
    /// there — a consumer's reads of a stage before the producer that waits refills it.
    #[track_caller]
    pub fn arrive_cluster(&self, i: u32, rank: u32) {
        let site = Location::caller();
        let offset = barrier_offset(self, i, site);
        arrive_at(
            peer(rank, "arrives at an mbarrier of", site),
            offset,
            0,
            site,
        );
    }
}

impl<T: Element, const R: usize> Tma<T, R> {
    /// `cp.async.bulk.tensor…multicast::cluster`: [`Self::copy_to_shared`] into the same
    /// place of every block of the cluster whose rank is a bit of `ranks` (bit `r`: rank `r`),
    /// completing [`Self::box_bytes`] on barrier `bar` in each of them.
    #[track_caller]
    pub fn copy_to_shared_multicast<const N: usize, const B: usize>(
        &self,
        coords: [i32; R],
        (dst, dst_elem): (&SharedArray<T, N>, u32),
        (bars, bar): (&SharedArray<Mbarrier, B>, u32),
        ranks: u16,
    ) {
        let site = Location::caller();
        if ranks == 0 {
            let c = ctx();
            fail(
                Fault::BarrierMisuse,
                None,
                format!(
                    "{}: a multicast copy to no block (at {site}); set a bit of `ranks` for each destination",
                    c.state().name(c.gid())
                ),
            );
        }
        let blocks: Vec<&BlockState> = (0..16)
            .filter(|r| ranks >> r & 1 != 0)
            .map(|r| peer(r, "multicasts a TMA copy to", site))
            .collect();
        self.copy_to_blocks(coords, (dst, dst_elem), (bars, bar), &blocks, site);
    }
}
