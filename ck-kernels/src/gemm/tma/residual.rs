//! Where the epilogue's D comes from, and where C is staged: D loaded by each thread in the
//! accumulator layout and C staged in its own box buffers ([`DLoads`], every kernel but one),
//! or D copied through the operands' ring by the producer and C staged where D arrived
//! ([`DRing`], `gemm_tma_bf16_residual`).
//!
//! **Why the ring.** Loaded by the threads, D arrives as 4-byte pieces, two rows per quad, 32
//! columns at a time after the tile's last MMA; each slice waits out its loads' latency while
//! the tensor cores idle: `C = A·B + D` ran at 0.51–0.54 × cuBLASLt at 8192×8192×1024 and
//! 0.87–0.90 at 8192³, where the plain product runs at 0.97–1.03. A tile's D is 64 KiB; the
//! plain kernels' C staging holds 32 KiB, so copying D there brought half of it in behind the
//! MMAs and the other half only in the epilogue (0.90 at K = 1024, the epilogue 13–22 % over
//! the plain kernel's). A fourth of the shared memory for D costs a stage of the ring, and a
//! ring of three stages starves the MMAs (0.63 at K = 1024, 0.87 at 8192³: measured). In the
//! ring itself D needs no memory of its own: after a tile's K stages the producer copies the
//! tile's D as more stages, D's 128 × 64 panels into the B halves of ring slots (two to a slot
//! of 128 × 256 tiles, 32 KiB; one to a slot of 128 × 192 tiles, 24 KiB), which arrive while
//! the consumers run the tile's last MMAs.
//!
//! **The protocol**, per tile, on the ring's barriers (`P` panels per slot, `BN / 64 / P` D
//! stages: two for 128 × 256 tiles, three for 128 × 192 ones):
//!
//! ```text
//! producer:  K stages u .. u+k, then D stages u+k, …: wait "empty", expect P · 16 KiB on
//!            "full", copy D's panels Pi .. Pi + P into the slot's B half
//! consumers: K stages as before; epilogue, box b of the warp's 16 rows (b < BN / 64):
//!            at a D stage's first box: wait its "full"
//!            ldmatrix D → registers; C = alpha·acc + beta·D → stmatrix into the same bytes;
//!            the copy engine stores the box from there
//!            after a D stage's last box: lane 0 waits until the engine has read the stage's
//!            boxes, then arrives on its "empty" (eight warps release a stage, as for K
//!            stages)
//! ```
//!
//! The next tile's first two K stages arrive during the epilogue, in the slots its last two K
//! stages freed; the ring keeps four stages during the MMAs. A box wholly outside D (past N or
//! M) is copied as zeros and its C store writes nothing, so ragged edges need no branch.

use super::store::{pairs_at, CWgmma32, DSource, TileAt, TmaOutput, C_BOX};
use super::{aligned_start, b_stage_bytes, empty, full, stage, Width, BARRIERS, BM, STAGES};
use crate::gemm::epilogue::{CElement, Epilogue};
use ck_core::device::*;
use ck_core::tile::{DistributedTensor, TmaBoxView};

/// D read from global memory ([`Epilogue::d`]) by each thread, in the accumulator layout; C
/// staged in its own box buffers ([`super::C_BUFFERS`] per warp).
#[derive(Clone, Copy)]
pub struct DLoads;

impl<O: TmaOutput> DSource<O> for DLoads {
    type Dest = O::Dest;
    const D_STAGES: u32 = 0;

    #[inline(always)]
    fn produce(&self, _bars: &SharedArray<Mbarrier, BARRIERS>, _tile: (u32, u32, u32), _t: u32) {}

    #[inline(always)]
    fn slice<const Q: u32>(
        &self,
        epilogue: &Epilogue<O>,
        ((product, bm, bn), _): TileAt,
        (m, n): (u32, u32),
    ) -> DistributedTensor<CWgmma32, f32> {
        let d = epilogue.d.slice(product * m * n, m * n);
        <O as CElement>::load_f32::<CWgmma32, 2>(d, (m, n, n), [bm as i32, (bn + 32 * Q) as i32])
    }

    #[inline(always)]
    fn store<const NC: usize, const Q: u32>(
        &self,
        x: &DistributedTensor<CWgmma32, f32>,
        c: O::Dest,
        staged: (SharedArray<O, NC>, u32),
        (tile, _): TileAt,
        mn: (u32, u32),
    ) {
        O::store_slice::<NC, Q>(x, c, staged, tile, mn);
    }
}

/// bf16 D `[batch, m, n]` copied by the producer through the ring of a kernel with tiles `W`
/// wide (see the module documentation): D's map (boxes of 128 rows × 64 columns, the 128-byte
/// swizzle), B's ring (of `N` bf16 elements, where D lands) and the ring's barriers.
pub struct DRing<const N: usize, W> {
    pub map: Tma<Bf16, 3>,
    pub ring: SharedArray<Bf16, N>,
    pub bars: SharedArray<Mbarrier, BARRIERS>,
    pub width: core::marker::PhantomData<W>,
}

impl<const N: usize, W> Clone for DRing<N, W> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<const N: usize, W> Copy for DRing<N, W> {}

/// Rows and columns of one copy of D: a 64-column panel of the tile, 16 KiB; two per stage.
pub const D_BOX: [u32; 2] = [BM, 64];

impl<const N: usize, W: Width> DRing<N, W> {
    /// D's panels per ring slot: as many as fit its B half.
    const PANELS: u32 = b_stage_bytes(W::BN) / (D_BOX[0] * D_BOX[1] * Bf16::BYTES);

    /// The element where the box of this warp's 16 rows of D's panel `p` lies in the ring, for
    /// the tile whose first D stage is ring use `d_use`; and that panel's stage.
    #[inline(always)]
    fn box_at(&self, d_use: u32, p: u32) -> (u32, (u32, u32)) {
        let (s, parity) = stage(d_use + p / Self::PANELS);
        let rows = warp_id() * C_BOX[0] * C_BOX[1];
        (self.panel_at(s, p % Self::PANELS) + rows, (s, parity))
    }

    /// The element where the `p`-th panel of a D stage in ring slot `s` starts.
    #[inline(always)]
    fn panel_at(&self, s: u32, p: u32) -> u32 {
        let slot = b_stage_bytes(W::BN) / Bf16::BYTES;
        aligned_start(&self.ring) + s * slot + p * D_BOX[0] * D_BOX[1]
    }
}

impl<const N: usize, W: Width> DSource<Bf16> for DRing<N, W> {
    type Dest = TmaMut<Bf16, 3>;
    const D_STAGES: u32 = W::BN / D_BOX[1] / Self::PANELS;

    #[inline(always)]
    fn produce(
        &self,
        bars: &SharedArray<Mbarrier, BARRIERS>,
        (product, bm, bn): (u32, u32, u32),
        t: u32,
    ) {
        for i in 0..Self::D_STAGES {
            let (s, parity) = stage(t + i);
            if t + i >= STAGES {
                bars.wait(empty(s), parity ^ 1);
            }
            bars.arrive_expect_tx(full(s), Self::PANELS * self.map.box_bytes());
            for p in 0..Self::PANELS {
                let panel = Self::PANELS * i + p;
                let coords = [(bn + D_BOX[1] * panel) as i32, bm as i32, product as i32];
                let at = self.panel_at(s, p);
                self.map
                    .copy_to_shared(coords, &self.ring, at, bars, full(s));
            }
        }
    }

    /// The warp waits for the stage (at its first slice), then reads the slice's pairs with
    /// `ldmatrix` from where [`DSource::store`] will write C's.
    #[inline(always)]
    fn slice<const Q: u32>(
        &self,
        _epilogue: &Epilogue<Bf16>,
        (_, d_use): TileAt,
        _mn: (u32, u32),
    ) -> DistributedTensor<CWgmma32, f32> {
        let (at, (s, parity)) = self.box_at(d_use, Q / 2);
        if Q.is_multiple_of(2 * Self::PANELS) {
            self.bars.wait(full(s), parity);
        }
        let view = TmaBoxView::new(self.ring, at, (C_BOX[0], C_BOX[1]), C_BOX[0]);
        let mut d = DistributedTensor::<CWgmma32, f32>::splat(0.0);
        for j in [0, 2] {
            // Registers (j, h = 0), (j, 1), (j + 1, 0), (j + 1, 1): see `store::stage_pairs`.
            let words = ldmatrix_x4(&self.ring, pairs_at(&view, Q % 2, j as u32));
            for (i, word) in words.into_iter().enumerate() {
                let (lo, hi) = Bf16::unpack2(word);
                let at = 4 * j + 2 * i;
                d.data[at] = lo;
                d.data[at + 1] = hi;
            }
        }
        d
    }

    /// C's box from D's bytes; after the stage's last box, lane 0 waits until the copy engine
    /// has read the stage's boxes and releases the stage.
    #[inline(always)]
    fn store<const NC: usize, const Q: u32>(
        &self,
        x: &DistributedTensor<CWgmma32, f32>,
        c: TmaMut<Bf16, 3>,
        _staged: (SharedArray<Bf16, NC>, u32),
        (tile, d_use): TileAt,
        mn: (u32, u32),
    ) {
        let (at, (s, _)) = self.box_at(d_use, Q / 2);
        Bf16::store_slice::<N, Q>(x, c, (self.ring, at), tile, mn);
        if Q % (2 * Self::PANELS) == 2 * Self::PANELS - 1 && lane_id() == 0 {
            bulk_wait_group_read::<0>();
            self.bars.arrive(empty(s));
        }
    }
}
