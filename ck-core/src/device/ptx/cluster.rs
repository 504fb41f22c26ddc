//! Thread-block clusters on the GPU (sm_90): the cluster's special registers and barrier, a
//! peer block's mbarriers, and multicast TMA copies. The emulator's versions
//! (`device::emu::cluster`) document the semantics and the sanitizer's rules.

use super::{Element, SharedArray, Tma};
use crate::device::Mbarrier;
use core::arch::{asm, nvptx};

/// This block's rank in its cluster (`%cluster_ctarank`; 0 without clusters).
#[inline(always)]
pub fn cluster_ctarank() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {0}, %cluster_ctarank;", out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// Blocks per cluster (`%cluster_nctarank`; 1 without clusters).
#[inline(always)]
pub fn cluster_size() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {0}, %cluster_nctarank;", out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// `barrier.cluster.arrive` (release) + `barrier.cluster.wait` (acquire): every thread of every
/// block of the cluster, converged per warp.
#[inline(always)]
pub fn cluster_sync() {
    // SAFETY: a barrier; orders memory, touches none.
    unsafe {
        asm!(
            "barrier.cluster.arrive.aligned; barrier.cluster.wait.aligned;",
            options(nostack)
        )
    };
}

impl<const N: usize> SharedArray<Mbarrier, N> {
    /// `mapa` + `mbarrier.arrive.shared::cluster`: one arrival on barrier `i` in the shared
    /// memory of the cluster's block `rank`, with the PTX default semantics (release at CTA
    /// scope), as CUTLASS's `ClusterBarrier::arrive`. A block's threads cannot read another
    /// block's shared memory here (only the copy engine writes it, counted by the barriers), so
    /// there is nothing to publish at cluster scope; `.release.cluster` costs a
    /// `MEMBAR.ALL.GPU` before every arrival in SASS.
    #[inline(always)]
    pub fn arrive_cluster(&self, i: u32, rank: u32) {
        let a = self.barrier(i);
        // SAFETY: updates the barrier's bytes in block `rank`'s shared memory (the same offset
        // as in this block's, inside the array); a rank outside the cluster faults the launch.
        unsafe {
            asm!(
                "{{ .reg .b32 r; mapa.shared::cluster.u32 r, {0}, {1}; mbarrier.arrive.shared::cluster.b64 _, [r]; }}",
                in(reg32) a,
                in(reg32) rank,
                options(nostack)
            )
        };
    }
}

impl<T: Element, const R: usize> Tma<T, R> {
    /// `cp.async.bulk.tensor.Rd.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster`:
    /// [`Tma::copy_to_shared`] into the same place of every block of the cluster whose rank is
    /// a bit of `ranks`, completing the box's bytes on barrier `bar` in each.
    #[inline(always)]
    pub fn copy_to_shared_multicast<const N: usize, const B: usize>(
        &self,
        coords: [i32; R],
        (dst, dst_elem): (&SharedArray<T, N>, u32),
        (bars, bar): (&SharedArray<Mbarrier, B>, u32),
        ranks: u16,
    ) {
        if dst_elem as u64 * T::BYTES as u64 + self.box_bytes() as u64 > N as u64 * T::BYTES as u64
        {
            // SAFETY: aborts the kernel.
            unsafe { nvptx::trap() }
        }
        let (d, b, m) = (
            dst.base_addr() + dst_elem * T::BYTES,
            bars.barrier(bar),
            self.map(),
        );
        let c = |k: usize| if k < R { coords[k] } else { 0 };
        // SAFETY: as for `copy_to_shared`, in each destination block: the same `box_bytes`
        // bytes from `d`, inside `dst` (checked above).
        unsafe {
            match R {
                1 => {
                    asm!("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [{0}], [{1}, {{{2}}}], [{3}], {4};", in(reg32) d, in(reg64) m, in(reg32) c(0), in(reg32) b, in(reg16) ranks, options(nostack))
                }
                2 => {
                    asm!("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [{0}], [{1}, {{{2}, {3}}}], [{4}], {5};", in(reg32) d, in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) b, in(reg16) ranks, options(nostack))
                }
                3 => {
                    asm!("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [{0}], [{1}, {{{2}, {3}, {4}}}], [{5}], {6};", in(reg32) d, in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) c(2), in(reg32) b, in(reg16) ranks, options(nostack))
                }
                4 => {
                    asm!("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [{0}], [{1}, {{{2}, {3}, {4}, {5}}}], [{6}], {7};", in(reg32) d, in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) c(2), in(reg32) c(3), in(reg32) b, in(reg16) ranks, options(nostack))
                }
                _ => {
                    asm!("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [{0}], [{1}, {{{2}, {3}, {4}, {5}, {6}}}], [{7}], {8};", in(reg32) d, in(reg64) m, in(reg32) c(0), in(reg32) c(1), in(reg32) c(2), in(reg32) c(3), in(reg32) c(4), in(reg32) b, in(reg16) ranks, options(nostack))
                }
            }
        }
    }
}
