//! Hopper `wgmma` shared-memory operands: the 128-byte swizzle and the matrix descriptor.
//!
//! A warpgroup MMA (`wgmma.mma_async`, sm_90a) reads A and B straight from shared memory,
//! described by a 64-bit *matrix descriptor*: a start address, two byte strides (the
//! *leading* and *stride* byte offsets, LBO and SBO) and a swizzle mode. The hardware walks
//! a fixed canonical layout of 16-byte chunks and XORs the address bits of the swizzle mode.
//! Here are the two layouts the GEMM uses (16-bit elements, `T` = 8 elements per chunk), as the
//! PTX ISA ("Shared Memory Matrix Layout") and CUTLASS (`GmmaDescriptor`) define them:
//!
//! | operand | major | element (mn, k) at, before the swizzle |
//! |---|---|---|
//! | A (K-major, 128 B) | K | `start + (mn % 8)·128 + (mn / 8)·SBO + 2k` (k < 16; LBO unused) |
//! | B (MN-major, 128 B) | MN | `start + 2(mn % 64) + (mn / 64)·LBO + (k % 8)·128 + (k / 8)·SBO` |
//! | A or B, no swizzle | K | `start + (mn % 8)·16 + (mn / 8)·SBO + 2(k % 8) + (k / 8)·LBO` |
//!
//! The 128-byte swizzle ([`swizzle_128b`]) then XORs the 16-byte chunk index (address bits
//! 4..7) with the 128-byte row index (bits 7..10): eight consecutive rows of 128 bytes —
//! one 1024-byte *atom* — hold the same eight chunks in eight different orders, so reading one
//! chunk column of all eight rows touches all 32 banks once. The XOR uses the absolute address,
//! so atoms must start 1024-byte aligned; then moving the start address by 32 bytes steps A
//! by 16 along K inside the atom.
//!
//! Worked example (the GEMM's A tile: 128 rows × 64 k of bf16, rows of 128 bytes, SBO = 1024):
//! element (m = 9, k = 20) is chunk 20·2 / 16 = 2 of row 9, byte 8 inside the chunk. Row 9 is
//! byte 9·128 = 1152; its row-in-atom is 9 % 8 = 1, so the chunk lands at 2 ^ 1 = 3:
//! byte 1152 + 3·16 + 8 = 1208. The k-slice k = 16..32 has start + 32, and from it the same
//! element is (9, 4): 32 + 1152 + 8 = 1192 = 1024 + 128 + 2·16 + 8, swizzled to chunk 2 ^ 1 = 3,
//! again 1208.
//!
//! ```
//! use ck_core::wgmma::{swizzle_128b, Major, SmemMatrix, SwizzleMode};
//! let a = SmemMatrix { start: 0, lbo: 16, sbo: 1024, swizzle: SwizzleMode::B128 };
//! let a_k16 = SmemMatrix { start: 32, ..a };
//! assert_eq!(a_k16.byte_address(Major::K, 9, 4), 1208);
//! assert_eq!(swizzle_128b(1152 + 2 * 16 + 8), 1208);
//! // From the unmoved start, (9, 4) is chunk 0 of row 9, swizzled to chunk 1.
//! assert_eq!(a.byte_address(Major::K, 9, 4), 1152 + 16 + 8);
//! // The descriptor round-trips.
//! assert_eq!(SmemMatrix::from_descriptor(a_k16.descriptor()), a_k16);
//! ```

/// The swizzle mode of a descriptor (bits 62..64); the 128-byte mode permutes addresses by
/// [`swizzle_128b`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwizzleMode {
    /// No swizzle: 8 × 16-byte core matrices.
    None,
    /// 128-byte swizzle: 1024-byte atoms of 8 rows × 128 bytes.
    B128,
}

/// Which dimension of the operand is contiguous in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Major {
    /// K contiguous (A row-major, or B column-major).
    K,
    /// M or N contiguous (B row-major: `imm-trans-b = 1`).
    MN,
}

/// One wgmma shared-memory operand of 16-bit elements: what its descriptor encodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmemMatrix {
    /// Shared-window byte address of element (0, 0) (16-byte aligned).
    pub start: u32,
    /// Leading byte offset (multiple of 16).
    pub lbo: u32,
    /// Stride byte offset (multiple of 16).
    pub sbo: u32,
    /// Swizzle mode.
    pub swizzle: SwizzleMode,
}

/// The 128-byte swizzle of a shared byte address: chunk bits 4..7 XOR row bits 7..10
/// ([`crate::swizzle::Swizzle::WGMMA_128B`]).
pub const fn swizzle_128b(addr: u32) -> u32 {
    crate::swizzle::Swizzle::WGMMA_128B.apply(addr)
}

impl SmemMatrix {
    /// A K-major operand in the 128-byte swizzle from shared byte `start`: rows of 128 bytes,
    /// atoms of 8 rows 1024 bytes apart (SBO; LBO is unused and set to 16). The A operand of
    /// every kernel here, and B given as `[N, K]`; a k-slice of an MMA is `start` + 32 bytes.
    pub const fn k_major_128b(start: u32) -> SmemMatrix {
        SmemMatrix {
            start,
            lbo: 16,
            sbo: 1024,
            swizzle: SwizzleMode::B128,
        }
    }

    /// An MN-major operand in the 128-byte swizzle from shared byte `start`: panels of 128
    /// bytes of MN (64 16-bit elements) by K rows, `panel_bytes` apart (LBO), atoms of 8 K rows
    /// 1024 bytes apart (SBO). B given as `[K, N]`; a k16-slice is `start` + 16 rows (2048 bytes).
    pub const fn mn_major_128b(start: u32, panel_bytes: u32) -> SmemMatrix {
        SmemMatrix {
            start,
            lbo: panel_bytes,
            sbo: 1024,
            swizzle: SwizzleMode::B128,
        }
    }

    /// The 64-bit descriptor: start >> 4 in bits 0..14, LBO >> 4 in 16..30, SBO >> 4 in
    /// 32..46, base offset 0 (atoms 1024-byte aligned), swizzle mode in 62..64.
    pub const fn descriptor(&self) -> u64 {
        let mode: u64 = match self.swizzle {
            SwizzleMode::None => 0,
            SwizzleMode::B128 => 1,
        };
        ((self.start as u64 >> 4) & 0x3fff)
            | (((self.lbo as u64 >> 4) & 0x3fff) << 16)
            | (((self.sbo as u64 >> 4) & 0x3fff) << 32)
            | (mode << 62)
    }

    /// The descriptor of the same operand `bytes` further on in shared memory (a multiple of
    /// 16): one add, where [`SmemMatrix::descriptor`] masks and shifts every field. Exact
    /// because the start field holds `address >> 4` in its low 14 bits and every shared
    /// address is below 2¹⁸, so the sum never carries out of the field — the way a kernel
    /// steps a descriptor along K or to the next pipeline stage.
    pub const fn advance(descriptor: u64, bytes: u32) -> u64 {
        // A 32-bit add of the low word: the high word (SBO, swizzle) is left as it is.
        let low = (descriptor as u32).wrapping_add(bytes >> 4);
        (descriptor & 0xffff_ffff_0000_0000) | low as u64
    }

    /// Decodes a descriptor made by [`SmemMatrix::descriptor`] (other swizzle modes read as
    /// none: the emulator rejects them before calling this).
    pub const fn from_descriptor(d: u64) -> SmemMatrix {
        SmemMatrix {
            start: ((d & 0x3fff) << 4) as u32,
            lbo: (((d >> 16) & 0x3fff) << 4) as u32,
            sbo: (((d >> 32) & 0x3fff) << 4) as u32,
            swizzle: if d >> 62 == 1 {
                SwizzleMode::B128
            } else {
                SwizzleMode::None
            },
        }
    }

    /// True if bits 62..64 hold a mode this module models (none or 128-byte).
    pub const fn mode_is_modelled(d: u64) -> bool {
        d >> 62 <= 1
    }

    /// Shared byte address of element (`mn`, `k`) of an operand of 16-bit elements (mn < 256),
    /// per the canonical layouts in the module documentation. One wgmma reads k < 16; the
    /// formulas hold for a whole 128-byte row (k < 64, K-major) and any k (MN-major), so a
    /// kernel's copies address a stage of 64 k through the same layout the MMAs read.
    pub const fn byte_address(&self, major: Major, mn: u32, k: u32) -> u32 {
        self.element_address(major, mn, k, 2)
    }

    /// [`SmemMatrix::byte_address`] for elements of `bytes` bytes (1 for the 8-bit floats,
    /// whose MMA reads k < 32 and a 128-byte row holds 128 k): the layouts place bytes, so
    /// K-major rows advance `bytes · k` and an MN-major row holds `128 / bytes` (swizzled) or
    /// `16 / bytes` (plain) elements.
    pub const fn element_address(&self, major: Major, mn: u32, k: u32, bytes: u32) -> u32 {
        match (self.swizzle, major) {
            (SwizzleMode::B128, Major::K) => {
                swizzle_128b(self.start + (mn % 8) * 128 + (mn / 8) * self.sbo + bytes * k)
            }
            (SwizzleMode::B128, Major::MN) => {
                let row = 128 / bytes;
                swizzle_128b(
                    self.start
                        + bytes * (mn % row)
                        + (mn / row) * self.lbo
                        + (k % 8) * 128
                        + (k / 8) * self.sbo,
                )
            }
            (SwizzleMode::None, Major::K) => {
                let kb = bytes * k;
                self.start + (mn % 8) * 16 + (mn / 8) * self.sbo + kb % 16 + (kb / 16) * self.lbo
            }
            (SwizzleMode::None, Major::MN) => {
                let row = 16 / bytes;
                self.start
                    + bytes * (mn % row)
                    + (mn / row) * self.sbo
                    + (k % 8) * 16
                    + (k / 8) * self.lbo
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GEMM's A tile as its stores write it: row-major 128 × 64, 128-byte rows, chunks
    /// permuted within each row by the row index (computed here without `swizzle_128b`).
    fn a_store(m: u32, k: u32) -> u32 {
        let chunk = (k / 8) ^ (m % 8);
        m * 128 + chunk * 16 + (k % 8) * 2
    }

    /// The GEMM's B tile: 64-column panels of 64 rows × 128 bytes, 8192 bytes apart.
    fn b_store(k: u32, n: u32) -> u32 {
        let chunk = ((n % 64) / 8) ^ (k % 8);
        (n / 64) * 8192 + k * 128 + chunk * 16 + (n % 8) * 2
    }

    #[test]
    fn k_major_descriptors_walk_the_stored_a_tile() {
        // Two warpgroups × four k-slices: every (m, k) of the tile is addressed exactly once.
        let mut seen = [false; 128 * 64];
        for wg in 0..2 {
            for slice in 0..4 {
                let a = SmemMatrix {
                    start: wg * 64 * 128 + slice * 32,
                    lbo: 16,
                    sbo: 1024,
                    swizzle: SwizzleMode::B128,
                };
                for mn in 0..64 {
                    for k in 0..16 {
                        let (m, kk) = (wg * 64 + mn, slice * 16 + k);
                        let at = a.byte_address(Major::K, mn, k);
                        assert_eq!(at, a_store(m, kk), "m {m} k {kk}");
                        assert!(!seen[(at / 2) as usize]);
                        seen[(at / 2) as usize] = true;
                    }
                }
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    /// The fp8 GEMM's tiles: 128-byte rows of 128 one-byte k, four k-slices of 32 (start + 32
    /// bytes each); every byte of a 64-row tile is read once, at its row's permuted chunk.
    #[test]
    fn k_major_descriptors_of_bytes_walk_a_stored_tile() {
        let mut seen = [false; 64 * 128];
        for slice in 0..4 {
            let a = SmemMatrix {
                start: slice * 32,
                lbo: 16,
                sbo: 1024,
                swizzle: SwizzleMode::B128,
            };
            for mn in 0..64 {
                for k in 0..32 {
                    let kk = slice * 32 + k;
                    let at = a.element_address(Major::K, mn, k, 1);
                    let stored = mn * 128 + ((kk / 16) ^ (mn % 8)) * 16 + kk % 16;
                    assert_eq!(at, stored, "mn {mn} k {kk}");
                    assert!(!seen[at as usize]);
                    seen[at as usize] = true;
                }
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn mn_major_descriptors_walk_the_stored_b_tile() {
        let mut seen = [false; 64 * 256];
        for slice in 0..4 {
            let b = SmemMatrix {
                start: slice * 16 * 128,
                lbo: 8192,
                sbo: 1024,
                swizzle: SwizzleMode::B128,
            };
            for n in 0..256 {
                for k in 0..16 {
                    let at = b.byte_address(Major::MN, n, k);
                    assert_eq!(at, b_store(slice * 16 + k, n), "n {n} k {k}");
                    assert!(!seen[(at / 2) as usize]);
                    seen[(at / 2) as usize] = true;
                }
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn one_layout_addresses_a_whole_stage() {
        // A stage of K = 64 from start 0: where the GEMM's copies put each element.
        let a = SmemMatrix {
            start: 0,
            lbo: 16,
            sbo: 1024,
            swizzle: SwizzleMode::B128,
        };
        let b = SmemMatrix { lbo: 8192, ..a };
        for k in 0..64 {
            for m in 0..128 {
                assert_eq!(a.byte_address(Major::K, m, k), a_store(m, k), "m {m} k {k}");
            }
            for n in 0..256 {
                assert_eq!(
                    b.byte_address(Major::MN, n, k),
                    b_store(k, n),
                    "n {n} k {k}"
                );
            }
        }
    }

    #[test]
    fn a_chunk_column_of_an_atom_covers_every_bank_once() {
        // Chunk c of rows 0..8: eight distinct 16-byte bank groups.
        for c in 0..8 {
            let mut groups = [false; 8];
            for row in 0..8 {
                let g = ((swizzle_128b(row * 128 + c * 16) % 128) / 16) as usize;
                assert!(!groups[g]);
                groups[g] = true;
            }
        }
    }

    #[test]
    fn advancing_a_descriptor_moves_only_its_start() {
        // Every 16-byte start and offset of the 256 KiB shared window whose sum stays in it.
        for start in (0..1u32 << 18).step_by(16 * 97) {
            for bytes in (0..(1u32 << 18) - start).step_by(16 * 89) {
                let m = SmemMatrix {
                    start,
                    lbo: 16,
                    sbo: 1024,
                    swizzle: SwizzleMode::B128,
                };
                let moved = SmemMatrix {
                    start: start + bytes,
                    ..m
                };
                assert_eq!(
                    SmemMatrix::advance(m.descriptor(), bytes),
                    moved.descriptor()
                );
            }
        }
    }

    #[test]
    fn descriptors_round_trip_and_match_the_probe_encoding() {
        // The toolchain probe's verified no-swizzle descriptor: LBO 128, SBO 256.
        let m = SmemMatrix {
            start: 2048,
            lbo: 128,
            sbo: 256,
            swizzle: SwizzleMode::None,
        };
        assert_eq!(m.descriptor(), (2048 >> 4) | (8 << 16) | (16 << 32));
        for start in (0..0x40000).step_by(16 * 97) {
            for swizzle in [SwizzleMode::None, SwizzleMode::B128] {
                let m = SmemMatrix {
                    start,
                    lbo: 8192,
                    sbo: 1024,
                    swizzle,
                };
                assert_eq!(SmemMatrix::from_descriptor(m.descriptor()), m);
                assert!(SmemMatrix::mode_is_modelled(m.descriptor()));
            }
        }
        assert!(!SmemMatrix::mode_is_modelled(2 << 62));
    }
}
