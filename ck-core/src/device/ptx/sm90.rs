//! Hopper (sm_90a) primitives on the GPU: `cp.async` copies into shared memory and the
//! warpgroup MMA. The emulator's versions (`device::emu::sm90`) document the semantics.

use super::{Global, SharedArray};
use crate::device::{Element, Fp8Kind, WgmmaA, WgmmaAccumulators};
use crate::wgmma::Major;
use core::arch::asm;

impl<T: Element, const N: usize> SharedArray<T, N> {
    /// 32-bit shared-window byte address of element `elem` (for wgmma descriptors).
    #[inline(always)]
    pub fn shared_address(&self, elem: u32) -> u32 {
        self.byte_addr(elem)
    }
}

/// `cp.async.cg.shared.global` of 16 bytes from element `src_elem` of `src` to element
/// `dst_elem` of `dst`; with `valid` false, or a source that is not inside `src`, it reads
/// nothing and writes 16 zero bytes.
#[inline(always)]
pub fn cp_async_16<T: Element, const N: usize>(
    dst: &SharedArray<T, N>,
    dst_elem: u32,
    src: &Global<T>,
    src_elem: u32,
    valid: bool,
) {
    // A source past the end of `src` makes the copy invalid (the buffer-view rule).
    let valid = valid && src_elem as u64 + (16 / T::BYTES) as u64 <= src.len() as u64;
    // SAFETY: a valid copy's source was checked to lie inside `src` just above.
    unsafe { cp_async_16_unchecked(dst, dst_elem, src, src_elem, valid) }
}

/// [`cp_async_16`] without the source bounds check, for callers that have proved it (a
/// [`View2`](crate::tile::View2), whose footprint is checked once where it is made).
///
/// # Safety
/// When `valid`, elements `src_elem..src_elem + 16 / size_of::<T>()` lie inside `src`.
#[inline(always)]
pub unsafe fn cp_async_16_unchecked<T: Element, const N: usize>(
    dst: &SharedArray<T, N>,
    dst_elem: u32,
    src: &Global<T>,
    src_elem: u32,
    valid: bool,
) {
    let at = if valid { src_elem } else { 0 };
    // SAFETY: a valid copy reads 16 bytes inside `src` (the caller's promise), an invalid one
    // reads nothing (source size 0); the destination is shared memory, bounded by the hardware.
    unsafe {
        asm!(
            "cp.async.cg.shared.global [{0}], [{1}], 16, {2};",
            in(reg32) dst.byte_addr(dst_elem),
            in(reg64) src.ptr.add(at as usize),
            in(reg32) if valid { 16u32 } else { 0 },
            options(nostack)
        );
    }
}

/// `cp.async.commit_group`: the copies issued since the last commit form one group.
#[inline(always)]
pub fn cp_async_commit() {
    // SAFETY: groups this thread's copies; touches no memory.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) };
}

/// `cp.async.wait_group PENDING`: waits until at most `PENDING` of this thread's groups are in
/// flight.
#[inline(always)]
pub fn cp_async_wait<const PENDING: u32>() {
    // SAFETY: waits; touches no memory.
    unsafe { asm!("cp.async.wait_group {n};", n = const PENDING, options(nostack)) };
}

/// `fence.proxy.async.shared::cta`: this thread's shared-memory writes become visible to the
/// async proxy (wgmma operand reads) — before the barrier that publishes them.
#[inline(always)]
pub fn fence_proxy_async() {
    // SAFETY: a memory fence; touches no memory.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) };
}

/// `griddepcontrol.wait`: waits until the previous kernel of the stream has finished and its
/// writes are visible — where this kernel was launched to overlap it
/// ([`LaunchConfig::overlapping`](crate::host::LaunchConfig::overlapping)); returns at once
/// otherwise. Every read of what that kernel wrote comes after it.
#[inline(always)]
pub fn grid_dependency_wait() {
    // SAFETY: waits; without `nomem` it is also a compiler barrier: no load moves above it.
    unsafe { asm!("griddepcontrol.wait;", options(nostack)) };
}

/// `griddepcontrol.launch_dependents`: the next kernel of the stream, where it was launched to
/// overlap this one, may start its blocks once every block of this kernel has called this or
/// exited (they wait in [`grid_dependency_wait`] until this kernel has finished).
#[inline(always)]
pub fn launch_dependents() {
    // SAFETY: a scheduling hint; touches no memory.
    unsafe { asm!("griddepcontrol.launch_dependents;", options(nostack)) };
}

/// `wgmma.fence.sync.aligned`: orders earlier register and shared accesses before the next
/// `wgmma.mma_async`.
#[inline(always)]
pub fn wgmma_fence() {
    // SAFETY: a fence; touches no memory.
    unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) };
}

/// Pins `regs` where this call stands: their values are computed before it and read after it
/// (an empty `asm` that reads and writes each register, CUTLASS's `warpgroup_fence_operand`).
/// Call it on a register A operand just before [`wgmma_fence`], so that the operand is complete
/// when the fence is passed: ptxas then issues the group's MMAs back to back, instead of fencing
/// (and tracking) each one whose operand was still being written (advisory C7519).
#[inline(always)]
pub fn wgmma_fence_operands<const N: usize>(regs: &mut [u32; N]) {
    for r in regs.iter_mut() {
        // SAFETY: an empty instruction; it only keeps `r` in a register at this point.
        unsafe {
            asm!(
                "// fence operand {0}",
                inout(reg32) * r,
                options(nostack, nomem)
            )
        };
    }
}

/// `wgmma.commit_group.sync.aligned`: the MMAs issued since the last commit form one group.
#[inline(always)]
pub fn wgmma_commit() {
    // SAFETY: groups the warpgroup's MMAs; touches no memory.
    unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) };
}

/// Expands `$m!($args; 1 2 … N−1)`: the accumulator indices after 0 of an N-register array.
macro_rules! acc_indices {
    (16, $m:ident!($($args:tt)*)) => {
        $m!($($args)*; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (32, $m:ident!($($args:tt)*)) => {
        $m!($($args)*; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
            30 31)
    };
    (64, $m:ident!($($args:tt)*)) => {
        $m!($($args)*; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
            30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58
            59 60 61 62 63)
    };
    (96, $m:ident!($($args:tt)*)) => {
        $m!($($args)*; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
            30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58
            59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87
            88 89 90 91 92 93 94 95)
    };
    (128, $m:ident!($($args:tt)*)) => {
        $m!($($args)*; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
            30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58
            59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87
            88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112
            113 114 115 116 117 118 119 120 121 122 123 124 125 126 127)
    };
}

/// A and B from shared memory: `$types` the D, A and B types (`".f32.bf16.bf16"`), `$tail`
/// the operands after the scales — `", 0, 1"` (imm-trans-a 0, imm-trans-b 1) or `", 0, 0"` for
/// 16-bit types, nothing for 8-bit ones, which have no transpose operands (always K-major).
macro_rules! wgmma_ss {
    ($shape:literal, $types:literal, $tail:literal, $acc:ident, $a:expr, $b:expr, $scale_d:expr; $($i:literal)*) => {
        asm!(
            "{{",
            ".reg .pred p;",
            "setp.ne.b32 p, {sd}, 0;",
            concat!(
                "wgmma.mma_async.sync.aligned.", $shape, $types, " {{{0}",
                $(", {", stringify!($i), "}",)*
                "}}, {da}, {db}, p, 1, 1", $tail, ";"
            ),
            "}}",
            inout(reg32) $acc[0],
            $(inout(reg32) $acc[$i],)*
            da = in(reg64) $a,
            db = in(reg64) $b,
            sd = in(reg32) $scale_d,
            options(nostack)
        )
    };
}

/// A from four registers per thread, B from shared memory (`imm-trans-b = $trans_b`).
macro_rules! wgmma_rs {
    ($shape:literal, $trans_b:literal, $acc:ident, $a:expr, $b:expr, $scale_d:expr; $($i:literal)*) => {
        asm!(
            "{{",
            ".reg .pred p;",
            "setp.ne.b32 p, {sd}, 0;",
            concat!(
                "wgmma.mma_async.sync.aligned.", $shape, ".f32.bf16.bf16 {{{0}",
                $(", {", stringify!($i), "}",)*
                "}}, {{{a0}, {a1}, {a2}, {a3}}}, {db}, p, 1, 1, ", $trans_b, ";"
            ),
            "}}",
            inout(reg32) $acc[0],
            $(inout(reg32) $acc[$i],)*
            a0 = in(reg32) $a[0],
            a1 = in(reg32) $a[1],
            a2 = in(reg32) $a[2],
            a3 = in(reg32) $a[3],
            db = in(reg64) $b,
            sd = in(reg32) $scale_d,
            options(nostack)
        )
    };
}

macro_rules! wait_asm {
    ($acc:ident, $n:expr; $($i:literal)*) => {
        asm!(
            "wgmma.wait_group.sync.aligned {n};",
            // The accumulators are operands so no read of them moves above the wait.
            concat!("// {0}", $(" {", stringify!($i), "}",)*),
            inout(reg32) $acc[0],
            $(inout(reg32) $acc[$i],)*
            n = const $n,
            options(nostack)
        )
    };
}

macro_rules! accumulators {
    ($regs:tt, $n:literal, $shape:literal, $shape8:literal) => {
        impl WgmmaAccumulators for [f32; $regs] {
            const N: u32 = $n;

            #[inline(always)]
            fn mma_bf16(&mut self, a: WgmmaA, b: u64, b_major: Major, accumulate: bool) {
                let acc = self;
                let sd = accumulate as u32;
                // SAFETY: the instruction reads shared memory through the descriptors (addresses
                // in the CTA's window; wgmma faults rather than reading outside it) and writes
                // only the accumulator registers bound as operands.
                unsafe {
                    match (a, b_major) {
                        (WgmmaA::Smem(da), Major::MN) => {
                            acc_indices!(
                                $regs,
                                wgmma_ss!($shape, ".f32.bf16.bf16", ", 0, 1", acc, da, b, sd)
                            )
                        }
                        (WgmmaA::Smem(da), Major::K) => {
                            acc_indices!(
                                $regs,
                                wgmma_ss!($shape, ".f32.bf16.bf16", ", 0, 0", acc, da, b, sd)
                            )
                        }
                        (WgmmaA::SmemMn(da), Major::MN) => {
                            acc_indices!(
                                $regs,
                                wgmma_ss!($shape, ".f32.bf16.bf16", ", 1, 1", acc, da, b, sd)
                            )
                        }
                        (WgmmaA::SmemMn(da), Major::K) => {
                            acc_indices!(
                                $regs,
                                wgmma_ss!($shape, ".f32.bf16.bf16", ", 1, 0", acc, da, b, sd)
                            )
                        }
                        (WgmmaA::Regs(ra), Major::MN) => {
                            acc_indices!($regs, wgmma_rs!($shape, "1", acc, ra, b, sd))
                        }
                        (WgmmaA::Regs(ra), Major::K) => {
                            acc_indices!($regs, wgmma_rs!($shape, "0", acc, ra, b, sd))
                        }
                    }
                }
            }

            #[inline(always)]
            fn mma_fp8(&mut self, a: u64, b: u64, kinds: (Fp8Kind, Fp8Kind), accumulate: bool) {
                use Fp8Kind::{E4m3, E5m2};
                let acc = self;
                let sd = accumulate as u32;
                // SAFETY: as for `mma_bf16`: shared reads through the descriptors, writes only
                // to the bound accumulator registers.
                unsafe {
                    match kinds {
                        (E4m3, E4m3) => {
                            acc_indices!(
                                $regs,
                                wgmma_ss!($shape8, ".f32.e4m3.e4m3", "", acc, a, b, sd)
                            )
                        }
                        (E4m3, E5m2) => {
                            acc_indices!(
                                $regs,
                                wgmma_ss!($shape8, ".f32.e4m3.e5m2", "", acc, a, b, sd)
                            )
                        }
                        (E5m2, E4m3) => {
                            acc_indices!(
                                $regs,
                                wgmma_ss!($shape8, ".f32.e5m2.e4m3", "", acc, a, b, sd)
                            )
                        }
                        (E5m2, E5m2) => {
                            acc_indices!(
                                $regs,
                                wgmma_ss!($shape8, ".f32.e5m2.e5m2", "", acc, a, b, sd)
                            )
                        }
                    }
                }
            }

            #[inline(always)]
            fn wait<const PENDING: u32>(&mut self) {
                let acc = self;
                // SAFETY: waits for the warpgroup's MMAs; touches only the bound registers.
                unsafe { acc_indices!($regs, wait_asm!(acc, PENDING)) };
            }
        }
    };
}

accumulators!(16, 32, "m64n32k16", "m64n32k32");
accumulators!(32, 64, "m64n64k16", "m64n64k32");
accumulators!(64, 128, "m64n128k16", "m64n128k32");
accumulators!(96, 192, "m64n192k16", "m64n192k32");
accumulators!(128, 256, "m64n256k16", "m64n256k32");
