//! Hopper (sm_90a) primitives in the emulator: `cp.async` and the warpgroup MMA.
//!
//! A `cp.async` reads its source when issued and is race-checked then as a store of its 16
//! bytes (the GPU may write them any time after issue); the bytes land in shared memory at the
//! `cp_async_wait` that retires the copy's group. Until then any access to them, by any
//! thread, is a `shared-race` naming the copy — the emulator's diagnosis of a missing wait.
//! A `wgmma` reads its operands and updates the accumulators when issued (each thread reads,
//! race-checked, exactly the A rows and B columns of its own accumulators; A from registers is
//! gathered from the thread's quad with shuffles), so reusing a buffer
//! without the barrier that separates it from another warpgroup's MMA is a `shared-race` as
//! well; the MMA's commit, wait and fence have nothing to wait for. Not modelled: a warpgroup
//! whose threads do not all execute the same `wgmma` (undefined on the GPU).

use std::prelude::rust_2021::*;

use super::state::{Kind, Operand, PendingChunk, PendingCopy, Site};
use super::{abort, ctx, Global, SharedArray};
use crate::device::{shfl_idx, E4m3, E5m2, Element, Fp8Kind, WgmmaA, WgmmaAccumulators};
use crate::report::Fault;
use crate::wgmma::{Major, SmemMatrix};
use std::panic::Location;

impl<T: Element, const N: usize> SharedArray<T, N> {
    /// Shared byte address of element `elem` (for wgmma descriptors): in the emulator, the
    /// byte offset in the block's shared memory, whose base is 1024-byte aligned.
    pub fn shared_address(&self, elem: u32) -> u32 {
        self.byte_offset() + elem * T::BYTES
    }
}

/// `cp.async.cg.shared.global` of 16 bytes from element `src_elem` of `src` to element
/// `dst_elem` of `dst`; with `valid` false, or a source that is not inside `src` (the
/// buffer-view rule, as on the GPU), it reads nothing and writes 16 zero bytes. The bytes
/// land at the [`cp_async_wait`] that retires this copy's group; touching them earlier (any
/// thread) is a `shared-race`.
#[track_caller]
pub fn cp_async_16<T: Element, const N: usize>(
    dst: &SharedArray<T, N>,
    dst_elem: u32,
    src: &Global<T>,
    src_elem: u32,
    valid: bool,
) {
    let valid = valid && src_elem as u64 + (16 / T::BYTES) as u64 <= src.len() as u64;
    // SAFETY: a valid copy's source was checked just above (the emulator checks anyway).
    unsafe { cp_async_16_unchecked(dst, dst_elem, src, src_elem, valid) }
}

/// The GPU's [`cp_async_16`] without the source bounds check; the emulator checks it anyway:
/// a valid copy from outside `src` is an `out-of-bounds` fault (not a zero fill).
///
/// # Safety
/// When `valid`, elements `src_elem..src_elem + 16 / size_of::<T>()` lie inside `src`.
#[track_caller]
pub unsafe fn cp_async_16_unchecked<T: Element, const N: usize>(
    dst: &SharedArray<T, N>,
    dst_elem: u32,
    src: &Global<T>,
    src_elem: u32,
    valid: bool,
) {
    let words = match T::BYTES {
        1 => source_words::<T, 16>(src, src_elem, valid),
        2 => source_words::<T, 8>(src, src_elem, valid),
        _ => source_words::<T, 4>(src, src_elem, valid),
    };
    let (c, site) = (ctx(), Location::caller());
    let st = c.state();
    let elems = 16 / T::BYTES;
    if dst_elem as u64 + elems as u64 > N as u64 {
        let what = ("shared", Kind::Store);
        st.out_of_bounds(
            c.tid,
            site,
            what,
            (dst_elem as u64, elems, T::NAME),
            N as u64,
        );
        abort();
    }
    let offset = (dst.byte_offset() + dst_elem * T::BYTES) as usize;
    if !offset.is_multiple_of(16) {
        st.fault(
            Fault::Misaligned,
            vec![c.tid],
            Some(dst_elem as u64),
            format!(
                "thread {}: cp_async_16 into shared byte {offset} (at {site}), which is not 16-byte aligned",
                c.tid
            ),
        );
        abort();
    }
    // The copy may write any time after it is issued: it races with unordered accesses now.
    st.check_race(c.tid, site, Kind::Store, offset, 16, false);
    if st.error.borrow().is_some() {
        abort();
    }
    st.note_generic_write(c.tid, site, offset, 16);
    st.profile(
        c.tid,
        site,
        Kind::Store,
        false,
        st.shared.address(offset),
        16,
    );
    st.async_copies.borrow_mut()[c.tid as usize]
        .open
        .push(PendingCopy { offset, words });
    st.async_pending.borrow_mut().insert(
        offset / 16,
        PendingChunk {
            writer: c.gid(),
            site,
            via: None,
        },
    );
}

/// The 16 source bytes of a copy as little-endian words (zeros where `valid` is false).
#[track_caller]
fn source_words<T: Element, const V: usize>(src: &Global<T>, elem: u32, valid: bool) -> [u32; 4] {
    let mut words = [0u32; 4];
    if valid {
        for (k, v) in src.load_vec::<V>(elem).iter().enumerate() {
            let bit = k * T::BYTES as usize * 8;
            words[bit / 32] |= v.to_bits() << (bit % 32);
        }
    }
    words
}

/// `cp.async.commit_group`: this thread's copies since its last commit form one group.
pub fn cp_async_commit() {
    let c = ctx();
    let mut copies = c.state().async_copies.borrow_mut();
    let mine = &mut copies[c.tid as usize];
    let group = std::mem::take(&mut mine.open);
    mine.committed.push_back(group);
}

/// `cp.async.wait_group PENDING`: lands this thread's oldest committed groups until at most
/// `PENDING` remain in flight.
pub fn cp_async_wait<const PENDING: u32>() {
    let c = ctx();
    let st = c.state();
    let mut copies = st.async_copies.borrow_mut();
    let mine = &mut copies[c.tid as usize];
    while mine.committed.len() > PENDING as usize {
        for copy in mine.committed.pop_front().unwrap_or_default() {
            for (i, w) in copy.words.iter().enumerate() {
                st.shared.store(copy.offset + 4 * i, 4, *w);
            }
            st.async_pending.borrow_mut().remove(&(copy.offset / 16));
        }
    }
}

/// `fence.proxy.async.shared::cta`: this thread's earlier shared-memory writes become visible
/// to the async proxy (the copy engine's TMA stores). The sanitizer reports a TMA store of bytes
/// whose writer has not executed one since writing them.
pub fn fence_proxy_async() {
    let c = ctx();
    c.state().proxy_fences.borrow_mut()[c.tid as usize] += 1;
}

/// `griddepcontrol.wait`: on the GPU, where the kernel was launched to overlap the previous
/// one ([`LaunchConfig::overlapping`](crate::host::LaunchConfig::overlapping)), waits until
/// that kernel has finished and its writes are visible. The emulator runs launches one after
/// the other, so the previous kernel has always finished.
pub fn grid_dependency_wait() {}

/// `griddepcontrol.launch_dependents`: on the GPU, lets the next kernel of the stream (launched
/// to overlap this one) start its blocks once every block of this one has called it or exited.
/// The emulator runs launches one after the other.
pub fn launch_dependents() {}

/// `wgmma.fence.sync.aligned` (the emulator's MMAs complete when issued).
pub fn wgmma_fence() {}

/// Pins a register A operand before [`wgmma_fence`] (the emulator has no registers to pin).
pub fn wgmma_fence_operands<const N: usize>(_regs: &mut [u32; N]) {}

/// `wgmma.commit_group.sync.aligned`.
pub fn wgmma_commit() {}

macro_rules! accumulators {
    ($regs:literal, $n:literal) => {
        impl WgmmaAccumulators for [f32; $regs] {
            const N: u32 = $n;

            #[track_caller]
            fn mma_bf16(&mut self, a: WgmmaA, b: u64, b_major: Major, accumulate: bool) {
                let operands = (a, b, b_major, Types::Bf16);
                mma(self, $n, operands, accumulate, Location::caller());
            }

            #[track_caller]
            fn mma_fp8(&mut self, a: u64, b: u64, kinds: (Fp8Kind, Fp8Kind), accumulate: bool) {
                let operands = (WgmmaA::Smem(a), b, Major::K, Types::Fp8(kinds.0, kinds.1));
                mma(self, $n, operands, accumulate, Location::caller());
            }

            /// The emulator's MMAs complete when issued.
            fn wait<const PENDING: u32>(&mut self) {}
        }
    };
}

accumulators!(16, 32);
accumulators!(32, 64);
accumulators!(64, 128);
accumulators!(96, 192);
accumulators!(128, 256);

/// The operand types of an MMA.
#[derive(Clone, Copy)]
enum Types {
    /// `m64nNk16.f32.bf16.bf16`.
    Bf16,
    /// `m64nNk32.f32.{A}.{B}`, 8-bit floats (K-major only).
    Fp8(Fp8Kind, Fp8Kind),
}

/// The value of an 8-bit float.
fn fp8_value(kind: Fp8Kind, bits: u32) -> f64 {
    match kind {
        Fp8Kind::E4m3 => E4m3(bits as u8).to_f32() as f64,
        Fp8Kind::E5m2 => E5m2(bits as u8).to_f32() as f64,
    }
}

/// `wgmma.mma_async m64nNkK` (see `device::wgmma_bf16`, `device::wgmma_fp8`) for this
/// thread's registers `acc` (N / 2 of them): each is the exact sum of its K products and its
/// old value, rounded once to f32 (the GPU's fp8 MMAs accumulate with fewer bits: compare
/// with a tolerance). A from registers (bf16 only) gathers the thread's two rows from its quad
/// (the four lanes that hold them) with shuffles, so the whole warp must issue the MMA.
fn mma(
    acc: &mut [f32],
    n: u32,
    (a, b, b_major, types): (WgmmaA, u64, Major, Types),
    accumulate: bool,
    site: Site,
) {
    let c = ctx();
    let st = c.state();
    // A warpgroup is four whole warps (`tid / 128`); warps past the last whole one (a block of
    // 288 threads: two warpgroups and a warp) may run, but not issue MMAs.
    if (c.tid / 128 + 1) * 128 > c.block_dim {
        st.fault(
            Fault::WarpDivergence,
            vec![c.tid],
            None,
            format!(
                "wgmma at {site} needs a whole warpgroup of 128 threads; thread {} is in the block's last {} threads, which are not one",
                c.tid,
                c.block_dim % 128
            ),
        );
        abort();
    }
    let descriptors = match a {
        WgmmaA::Smem(a) | WgmmaA::SmemMn(a) => [Some(a), Some(b)],
        WgmmaA::Regs(_) => [None, Some(b)],
    };
    for d in descriptors.into_iter().flatten() {
        if !SmemMatrix::mode_is_modelled(d) {
            st.fault(
                Fault::Unmodelled,
                vec![c.tid],
                None,
                format!("wgmma at {site}: descriptor {d:#018x} uses a 32- or 64-byte swizzle (bits 62..64), which the emulator does not model; lay the operand out with SwizzleMode::None or SwizzleMode::B128"),
            );
            abort();
        }
    }
    let (kk, elem_bytes) = match types {
        Types::Bf16 => (16, 2),
        Types::Fp8(..) => (32, 1),
    };
    // The instruction reads all of A (64 rows) and B (N columns) for the warpgroup: each of
    // its threads is race-checked for every byte of both, a run of bytes at a time (per
    // element of its own fragment, the check was most of an emulated MMA's time).
    let smem_a = match a {
        WgmmaA::Smem(d) => Some(st.operand((d, Major::K), (64, kk as u32, elem_bytes))),
        WgmmaA::SmemMn(d) => Some(st.operand((d, Major::MN), (64, kk as u32, elem_bytes))),
        WgmmaA::Regs(_) => None,
    };
    let smem_b = st.operand((b, b_major), (n, kk as u32, elem_bytes));
    let shared_bytes = st.shared.bytes() as u32;
    for op in smem_a.iter().chain([&smem_b]) {
        for &(start, len) in &op.runs {
            if start + len > shared_bytes {
                let addr = start.max(shared_bytes);
                st.fault(
                    Fault::OutOfBounds,
                    vec![c.tid],
                    Some(addr as u64),
                    format!(
                        "thread {}: wgmma at {site} reads shared byte {addr}, past the {shared_bytes} bytes of shared memory",
                        c.tid
                    ),
                );
                abort();
            }
            st.check_race(c.tid, site, Kind::Load, start as usize, len, false);
            if st.error.borrow().is_some() {
                abort();
            }
        }
    }
    // Row (A) or column (B) `i`'s K values; `side` 0 is A, 1 is B.
    let read = |op: &Operand, i: u32, side: usize, values: &mut [f64]| {
        let addrs = &op.addresses[i as usize * kk..][..kk];
        for (value, &addr) in values.iter_mut().zip(addrs) {
            let bits = st.shared.load(addr as usize, elem_bytes);
            *value = match types {
                Types::Bf16 => f32::from_bits(bits << 16) as f64,
                Types::Fp8(a, b) => fp8_value(if side == 0 { a } else { b }, bits),
            };
        }
    };
    let t = c.tid % 128;
    let (w, r, col0) = (t / 32, t % 32 / 4, 2 * (t % 4));
    let mut rows = [[0f64; 32]; 2];
    if let Some(op) = &smem_a {
        for (h, row) in rows.iter_mut().enumerate() {
            read(op, 16 * w + 8 * h as u32 + r, 0, &mut row[..kk]);
        }
    } else if let WgmmaA::Regs(words) = a {
        // Word 2q + h of quad lane q' holds row r + 8h, columns 8q + 2q' + {0, 1}.
        let quad = c.tid % 32 / 4 * 4;
        for (i, word) in words.iter().enumerate() {
            let (q, h) = (i / 2, i % 2);
            for lane in 0..4 {
                let pair = shfl_idx(*word, quad + lane);
                for e in 0..2 {
                    let bits = (pair >> (16 * e)) << 16;
                    rows[h][8 * q + 2 * lane as usize + e] = f32::from_bits(bits) as f64;
                }
            }
        }
    }
    for j in 0..n / 8 {
        for e in 0..2u32 {
            let col = 8 * j + col0 + e;
            let mut column = [0f64; 32];
            read(&smem_b, col, 1, &mut column[..kk]);
            for (h, row) in rows.iter().enumerate() {
                let d = (4 * j + 2 * h as u32 + e) as usize;
                let old = if accumulate { acc[d] as f64 } else { 0.0 };
                let dot: f64 = row[..kk]
                    .iter()
                    .zip(&column[..kk])
                    .map(|(x, y)| x * y)
                    .sum();
                acc[d] = (dot + old) as f32;
            }
        }
    }
}
