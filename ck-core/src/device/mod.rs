//! Device primitives: one API for kernels, one implementation per backend — the SIMT emulator
//! on the host (`std` feature), PTX on `nvptx64`.
//!
//! | what | API |
//! |---|---|
//! | ids | [`thread_idx`], [`block_idx`], [`block_dim`], [`grid_dim`], [`lane_id`], [`warp_id`] |
//! | barriers and fences | [`block_sync`], [`warp_sync`], [`fence_acq_rel_gpu`] (between blocks, with an atomic), [`last_arrival`] (the last of several blocks finishes their result), [`grid_dependency_wait`] and [`launch_dependents`] (a kernel launched to overlap the previous one: `LaunchConfig::overlapping`) |
//! | warp exchange | [`shfl_xor`], [`shfl_down`], [`shfl_up`], [`shfl_idx`], [`ballot`], [`warp_reduce`] |
//! | memory | [`Global`], [`GlobalMut`] (kernel arguments), [`SharedArray`] (from `shared!`) with `load`, `store`, `load_vec`, `store_vec`, `atomic_add`, `atomic_max` |
//! | Hopper (sm_90a) | [`cp_async_16`], [`cp_async_16_unchecked`], [`cp_async_commit`], [`cp_async_wait`], [`fence_proxy_async`], [`wgmma_fence`], [`wgmma_fence_operands`], [`wgmma_bf16`], [`wgmma_bf16_b_kmajor`], [`wgmma_bf16_a_mn`], [`wgmma_bf16_a_regs`], [`wgmma_fp8`], [`wgmma_commit`], [`wgmma_wait`], `SharedArray::shared_address` |
//! | asynchronous pipelines (sm_90) | [`Mbarrier`] (`shared!(Mbarrier; N)`: `init`, `arrive`, `arrive_expect_tx`, `wait`, `arrive_cluster`), [`fence_barrier_init`], [`Tma`] (`copy_to_shared`, `copy_to_shared_multicast`, `prefetch`), [`TmaMut`] (`store_from_shared`), `GlobalMut<f32>::bulk_add_from_shared`, [`bulk_commit_group`], [`bulk_wait_group`], [`bulk_wait_group_read`], [`named_barrier_sync`], [`named_barrier_arrive`], [`setmaxnreg_inc`], [`setmaxnreg_dec`] |
//! | clusters (sm_90, `#[tile_kernel(cluster = N)]`) | [`cluster_ctarank`], [`cluster_size`], [`cluster_sync`]; a peer's mbarriers (`arrive_cluster`) and multicast TMA copies (`copy_to_shared_multicast`) |
//! | buffer views | [`buffer_view::BufferView`]: CK's `get`/`set`/`update` with validity and invalid-value fill |
//!
//! Shared memory is declared inside a `#[tile_kernel]` function with `shared!(T; N)`: the macro
//! gives every declaration a fixed offset in the block's shared memory and sums them into the
//! kernel's shared-memory size (on the GPU one dynamic `.shared` region, sized at launch).

pub mod buffer_view;
mod element;
mod fp8;
pub mod math;

pub use element::{Atomic, AtomicKind, Bf16, Element, Element32, Real};
pub use fp8::{E4m3, E5m2, Fp8, Fp8Kind};

use crate::wgmma::Major;

// The backend: the emulator on the host (`std`), PTX on the GPU. Both implement the same names;
// kernels see them here, once. (A host build without `std` has no backend: the algebra only.)
#[cfg(all(feature = "std", not(target_arch = "nvptx64")))]
pub(crate) mod emu;
#[cfg(all(feature = "std", not(target_arch = "nvptx64")))]
use emu as backend;
#[cfg(target_arch = "nvptx64")]
mod ptx;
#[cfg(target_arch = "nvptx64")]
use ptx as backend;
mod shared_array;

#[cfg(any(feature = "std", target_arch = "nvptx64"))]
pub use backend::{
    ballot, block_dim, block_idx, block_sync, bulk_commit_group, bulk_wait_group,
    bulk_wait_group_read, cluster_ctarank, cluster_size, cluster_sync, cp_async_16,
    cp_async_16_unchecked, cp_async_commit, cp_async_wait, fence_acq_rel_gpu, fence_barrier_init,
    fence_proxy_async, grid_dependency_wait, grid_dim, lane_id, launch_dependents, ldmatrix_x4,
    ldmatrix_x4_trans, mma_m16n8k16_bf16, named_barrier_arrive, named_barrier_sync, opaque,
    setmaxnreg_dec, setmaxnreg_inc, shfl_down, shfl_idx, shfl_up, shfl_xor, stmatrix_x4,
    stmatrix_x4_trans, thread_idx, warp_id, warp_sync, wgmma_commit, wgmma_fence,
    wgmma_fence_operands, Global, GlobalMut, Tma, TmaMut,
};
#[cfg(any(feature = "std", target_arch = "nvptx64"))]
pub(crate) use backend::{tma_box_view_unfit, view_outside_memory};
#[cfg(all(feature = "std", not(target_arch = "nvptx64")))]
pub(crate) use emu::copy_16_async_on_partial_vectors;
pub use shared_array::SharedArray;

/// An mbarrier: 8 bytes of shared memory that count arrivals and asynchronous-copy bytes in
/// phases (PTX `mbarrier`). Declare them with `shared!(Mbarrier; N)`; the array's methods
/// `init(i, arrivals)`, `arrive(i)`, `arrive_expect_tx(i, bytes)` and `wait(i, parity)` act on
/// barrier `i`. Phase `k` completes when its `arrivals` arrivals and every byte announced by
/// `arrive_expect_tx` (and delivered by [`Tma`] copies) are in; `wait(i, k % 2)` returns once
/// it has, and orders everything the arriving threads did before arriving (the copies' bytes
/// included) before what the waiting thread does next.
///
/// The producer/consumer ring of a pipeline is two barriers per stage: "full" (the producer
/// announces a copy's bytes, the copy completes it) and "empty" (each consumer arrives when it
/// is done with the stage). Use `n` of stage `s` waits for phase `n` of full\[s\] (parity
/// `n % 2`) and, before refilling, phase `n − 1` of empty\[s\].
///
/// A parity names one of the last two phases only: `wait(i, n % 2)` is correct while phase
/// `n − 1` has completed or is the one in progress. A thread that skips ahead — a consumer
/// that leaves a whole tile's stages to another warpgroup, more stages than the ring has —
/// may find phase `n − 2` in progress and take its completion for phase `n`'s. Such threads
/// must first learn that the uses before theirs have been waited for (CUTLASS's ping-pong
/// GEMM passes the main loop from one warpgroup to the other through a named barrier).
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mbarrier(u64);

/// One thread's f32 accumulators of a warpgroup MMA `m64nNk16`: `N / 2` registers. Implemented
/// for `[f32; 16]` (N = 32), `[f32; 32]` (N = 64), `[f32; 64]` (N = 128), `[f32; 96]` (N = 192) and `[f32; 128]`
/// (N = 256); see
/// [`wgmma_bf16`].
pub trait WgmmaAccumulators {
    /// The MMA's N.
    const N: u32;
    /// One `m64nNk16` bf16 MMA on these registers: A as `a` says, B through descriptor `b`
    /// stored `b_major`.
    #[track_caller]
    fn mma_bf16(&mut self, a: WgmmaA, b: u64, b_major: Major, accumulate: bool);
    /// One `m64nNk32` 8-bit float MMA on these registers: A and B K-major in shared memory,
    /// of the formats `kinds` (A's, B's).
    #[track_caller]
    fn mma_fp8(&mut self, a: u64, b: u64, kinds: (Fp8Kind, Fp8Kind), accumulate: bool);
    /// [`wgmma_wait`] on these registers.
    fn wait<const PENDING: u32>(&mut self);
}

/// Where a warpgroup MMA reads its 64 × 16 A operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgmmaA {
    /// From shared memory, K-major, through this descriptor.
    Smem(u64),
    /// From shared memory, M-major (`imm-trans-a = 1`; 16-bit types), through this descriptor.
    SmemMn(u64),
    /// From registers: thread `t` of the warpgroup (`w = t / 32`, `g = t % 32 / 4`,
    /// `c = 2·(t % 4)`) holds in word `2q + h` (h, q ∈ {0, 1}) the two bf16 elements
    /// (16w + g + 8h, 8q + c + {0, 1}), the lower column in the low half — exactly the layout of
    /// accumulator registers `4j + 2h + {0, 1}`, `j = 2·kstep + q`, of an MMA whose columns are
    /// this one's K (so an `S = Q·Kᵀ` tile packs into the A operand of `O += P·V` in place).
    Regs([u32; 4]),
}

/// `wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16` (sm_90a), N = `acc`'s [`N`]
/// (`WgmmaAccumulators::N`), A (64 × 16) K-major and B (16 × N) N-major (`imm-trans-b = 1`),
/// both in shared memory as the descriptors `a` and `b` describe them
/// ([`crate::wgmma::SmemMatrix::descriptor`]): `acc += A · B`, or `acc = A · B` without
/// `accumulate`, asynchronously until [`wgmma_wait`].
///
/// Thread `t` of the warpgroup (threads `128·g .. 128·g + 128` of the block) holds, with
/// `w = t / 32`, `r = t % 32 / 4`, `c = 2·(t % 4)`, register `4j + 2h + e` = element
/// (16w + 8h + r, 8j + c + e) of the 64 × N tile (PTX ISA, wgmma D fragments).
///
/// [`N`]: WgmmaAccumulators::N
#[track_caller]
#[inline(always)]
pub fn wgmma_bf16(acc: &mut impl WgmmaAccumulators, a: u64, b: u64, accumulate: bool) {
    acc.mma_bf16(WgmmaA::Smem(a), b, Major::MN, accumulate);
}

/// [`wgmma_bf16`] with B K-major (`imm-trans-b = 0`): B's element (k, n) is the matrix
/// descriptor's element (n, k) — e.g. `S = Q · Kᵀ` with K stored row-major, head dim along
/// rows of 128 bytes.
#[track_caller]
#[inline(always)]
pub fn wgmma_bf16_b_kmajor(acc: &mut impl WgmmaAccumulators, a: u64, b: u64, accumulate: bool) {
    acc.mma_bf16(WgmmaA::Smem(a), b, Major::K, accumulate);
}

/// [`wgmma_bf16`] with A M-major (`imm-trans-a = 1`): A's element (m, k) is the descriptor's
/// element (m, k) of an MN-major matrix — e.g. `dW = dYᵀ · X` with dY stored row-major, its
/// rows the product's K, read as it lies.
#[track_caller]
#[inline(always)]
pub fn wgmma_bf16_a_mn(acc: &mut impl WgmmaAccumulators, a: u64, b: u64, accumulate: bool) {
    acc.mma_bf16(WgmmaA::SmemMn(a), b, Major::MN, accumulate);
}

/// [`wgmma_bf16`] with A from registers (layout: [`WgmmaA::Regs`]) and B N-major in shared
/// memory — the second MMA of attention, `O += P · V`, with P never leaving registers.
#[track_caller]
#[inline(always)]
pub fn wgmma_bf16_a_regs(acc: &mut impl WgmmaAccumulators, a: [u32; 4], b: u64, accumulate: bool) {
    acc.mma_bf16(WgmmaA::Regs(a), b, Major::MN, accumulate);
}

/// `wgmma.mma_async.sync.aligned.m64nNk32.f32.{A}.{B}` (sm_90a; `A`, `B` ∈ {e4m3, e5m2}), N =
/// `acc`'s [`N`](WgmmaAccumulators::N): A (64 × 32) and B (32 × N) both K-major (the only
/// layout the ISA has for 8-bit types; B's element (k, n) is the descriptor's matrix at row n,
/// byte k) in shared memory as the descriptors say (`SmemMatrix` with 1-byte elements: a
/// 128-byte row holds 128 k). `acc += A · B` in f32, or `acc = A · B` without `accumulate`,
/// asynchronously until [`wgmma_wait`]. The accumulators' layout is the bf16 MMA's.
#[track_caller]
#[inline(always)]
pub fn wgmma_fp8<A: Fp8, B: Fp8>(
    acc: &mut impl WgmmaAccumulators,
    a: u64,
    b: u64,
    accumulate: bool,
) {
    acc.mma_fp8(a, b, (A::KIND, B::KIND), accumulate);
}

/// `wgmma.wait_group.sync.aligned PENDING`: waits until at most `PENDING` of the warpgroup's
/// MMA groups are in flight; `acc` (the registers they write) is readable after it.
#[inline(always)]
pub fn wgmma_wait<const PENDING: u32>(acc: &mut impl WgmmaAccumulators) {
    acc.wait::<PENDING>();
}

/// Threads per warp on NVIDIA GPUs (and in the emulator).
pub const WARP_SIZE: u32 = 32;

/// Reduces `v` over the 32 lanes of the warp with `op` (a butterfly of `shfl_xor`s); every lane
/// gets the result.
#[track_caller]
#[inline(always)]
pub fn warp_reduce<T: Element32>(v: T, op: impl Fn(T, T) -> T) -> T {
    let mut v = v;
    let mut mask = WARP_SIZE / 2;
    while mask > 0 {
        v = op(v, shfl_xor(v, mask));
        mask /= 2;
    }
    v
}

/// Whether this block is the last of `arrivals` blocks to arrive at `tickets[ticket]`: the
/// hand-over of blocks that each store a part of one result (stream-K's tiles, a column sum's
/// chunks) to the one that finishes it, with no second launch and no spinning.
///
/// Every thread of the calling group fences its own stores ([`fence_acq_rel_gpu`]) before it
/// calls; `sync` is the group's barrier ([`block_sync`], or a [`named_barrier_sync`] of the
/// threads that stored). Between two `sync`s thread 0 fences, adds one to the ticket and
/// fences again, and tells the others through `said`. The block whose increment completes the
/// count sets the ticket back to zero — the next launch finds it as the first did — and its
/// threads fence before they return true, so they see every part the others stored.
///
/// Three blocks with `arrivals = 3`, arriving in the order 2, 0, 1: block 2 reads 0 and gets
/// false, block 0 reads 1 and gets false, block 1 reads 2 (count 3): it resets the ticket to
/// 0 and gets true. Whichever order they come in, exactly one block gets true, after every
/// other block's stores.
#[track_caller]
#[inline(always)]
pub fn last_arrival(
    (tickets, ticket): (GlobalMut<u32>, u32),
    arrivals: u32,
    said: &SharedArray<u32, 1>,
    sync: impl Fn(),
) -> bool {
    sync();
    if thread_idx() == 0 {
        fence_acq_rel_gpu();
        let count = tickets.atomic_add(ticket, 1) + 1;
        if count == arrivals {
            tickets.store(ticket, 0);
        }
        fence_acq_rel_gpu();
        said.store(0, count);
    }
    sync();
    let last = said.load(0) == arrivals;
    if last {
        fence_acq_rel_gpu();
    }
    last
}

/// `shared!(T; N)` declares a block-shared array of `N` elements of `T` inside a
/// `#[tile_kernel]` function (the attribute rewrites it into a [`SharedArray`] at a fixed
/// offset). Anywhere else it is a compile error.
#[macro_export]
macro_rules! shared {
    ($($t:tt)*) => {
        ::core::compile_error!("error[shared-outside-kernel]: shared!(T; N) can only be used inside a #[tile_kernel] function")
    };
}
