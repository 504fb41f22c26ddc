//! Emulated memory: bytes in relaxed atomic 32-bit words, so blocks running on several OS
//! threads can share global memory without undefined behaviour (a racy kernel gets racy values,
//! as on a GPU, never a torn Rust object).

use std::prelude::rust_2021::*;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A contiguous memory region (a global buffer or a block's shared memory).
pub struct EmuMemory {
    words: Box<[AtomicU32]>,
    bytes: usize,
    /// Distinct per buffer; the high bits of the buffer's emulated byte addresses.
    pub(crate) id: u64,
}

impl EmuMemory {
    /// `bytes` zeroed bytes.
    pub fn new(bytes: usize) -> EmuMemory {
        let words = (0..bytes.div_ceil(4)).map(|_| AtomicU32::new(0)).collect();
        EmuMemory {
            words,
            bytes,
            id: NEXT_ID.fetch_add(1, Relaxed),
        }
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Emulated address of byte `offset` (buffers never share a 2^40-byte window, so sector
    /// and bank computations never merge two buffers).
    pub fn address(&self, offset: usize) -> u64 {
        (self.id << 40) + offset as u64
    }

    /// Loads `size` (1, 2 or 4) bytes at `offset` (aligned to `size`), zero-extended.
    pub fn load(&self, offset: usize, size: u32) -> u32 {
        let w = self.words[offset / 4].load(Relaxed);
        let shift = (offset % 4) * 8;
        match size {
            4 => w,
            _ => (w >> shift) & ((1u32 << (size * 8)) - 1),
        }
    }

    /// Stores the low `size` bytes of `bits` at `offset` (aligned to `size`).
    pub fn store(&self, offset: usize, size: u32, bits: u32) {
        let word = &self.words[offset / 4];
        if size == 4 {
            word.store(bits, Relaxed);
            return;
        }
        let shift = (offset % 4) * 8;
        let mask = ((1u32 << (size * 8)) - 1) << shift;
        let _ = word.fetch_update(Relaxed, Relaxed, |w| {
            Some((w & !mask) | ((bits << shift) & mask))
        });
    }

    /// Atomically replaces the 4-byte word at `offset` by `f(old)`; returns `old`.
    pub fn update(&self, offset: usize, f: impl Fn(u32) -> u32) -> u32 {
        self.words[offset / 4]
            .fetch_update(Relaxed, Relaxed, |w| Some(f(w)))
            .unwrap_or(0)
    }

    /// Copies bytes in (host → device).
    pub fn write_bytes(&self, offset: usize, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            self.store(offset + i, 1, b as u32);
        }
    }

    /// Copies bytes out (device → host).
    pub fn read_bytes(&self, offset: usize, out: &mut [u8]) {
        for (i, b) in out.iter_mut().enumerate() {
            *b = self.load(offset + i, 1) as u8;
        }
    }
}
