//! One XOR swizzle for every permuted layout in ck-rs — CuTe's `Swizzle<B, M, S>`.
//!
//! `Swizzle { bits: B, base: M, shift: S }` XORs the `B` bits of an offset that start at bit
//! `M + S` into the `B` bits that start at bit `M`:
//!
//! ```text
//! apply(o) = o ^ (((o >> (M + S)) & (2^B − 1)) << M)
//! ```
//!
//! It is an involution (`apply(apply(o)) = o`) and a bijection on every aligned block of
//! `2^(M + S + B)` offsets, so a swizzled tile occupies exactly the offsets of the plain one. The
//! three permuted layouts of the library are instances:
//!
//! | layout | offsets | swizzle |
//! |---|---|---|
//! | Hopper's 128-byte wgmma swizzle ([`crate::wgmma::swizzle_128b`]) | bytes | `Swizzle<3, 4, 3>`: the 16-byte chunk (bits 4..7) ^= the 128-byte row (bits 7..10) |
//! | [`Transform::xor`](crate::Transform::xor) over `2^B` columns | `row·2^B + col` | `Swizzle<B, 0, B>`: `col ^ (row mod 2^B)` |
//! | [`LdsLayout::xor`](crate::lds::LdsLayout::xor) (spec §11) | `m_hi·K0L + (k0·L + m_lo)`, `K0L = (K / KPack)·MLdsLayer` | `Swizzle<log₂ K0L, 0, log₂ K0L>`, then scaled by KPack |
//!
//! Worked example (the wgmma swizzle): byte 1208 = `0b100_1011_1000`: bits 7..10 hold row 1
//! (`1208 >> 7 = 9`, `9 & 7 = 1`), bits 4..7 chunk `0b1011 & 7 = 3`; 3 ^ 1 = 2, so the byte moves
//! to 1208 − 16 = 1192 — and back: 1192's row is 1, its chunk 2, 2 ^ 1 = 3.
//!
//! ```
//! use ck_core::swizzle::Swizzle;
//! let wgmma = Swizzle::WGMMA_128B;
//! assert_eq!(wgmma.apply(1208), 1192);
//! assert_eq!(wgmma.apply(1192), 1208);
//! // The index-space XOR of a 4-column grid: row 5, column 2 → column 2 ^ (5 mod 4) = 3.
//! let cols = Swizzle::columns(4).unwrap();
//! assert_eq!(cols.apply(5 * 4 + 2), 5 * 4 + 3);
//! ```

use crate::error::{Error, Rule};
use crate::Index;

/// CuTe's `Swizzle<B, M, S>`: see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Swizzle {
    bits: u32,
    base: u32,
    shift: u32,
}

impl Swizzle {
    /// Hopper's 128-byte swizzle on byte addresses: `Swizzle<3, 4, 3>`.
    pub const WGMMA_128B: Swizzle = Swizzle {
        bits: 3,
        base: 4,
        shift: 3,
    };

    /// `Swizzle<bits, base, shift>`; `shift ≥ bits` (the source and target bits do not
    /// overlap, so the map is an involution) and every bit it touches below bit 31.
    pub const fn new(bits: u32, base: u32, shift: u32) -> Result<Swizzle, Error> {
        if shift < bits || bits + base + shift > 31 {
            return Err(
                Error::new(Rule::SwizzleBits, "swizzle").values(bits as Index, shift as Index)
            );
        }
        Ok(Swizzle { bits, base, shift })
    }

    /// The XOR of a column index with its row modulo the column count, on row-major offsets of
    /// `columns` (a power of two) columns: `Swizzle<log₂ columns, 0, log₂ columns>`.
    pub const fn columns(columns: Index) -> Result<Swizzle, Error> {
        if columns < 1 || columns & (columns - 1) != 0 {
            return Err(Error::new(Rule::XorNotPowerOfTwo, "xor columns").values(columns, 0));
        }
        let b = columns.trailing_zeros();
        Swizzle::new(b, 0, b)
    }

    /// [`Swizzle::columns`] for a column count the caller has checked is a power of two (a
    /// constructor's invariant).
    pub(crate) const fn of_columns(columns: Index) -> Swizzle {
        let b = columns.trailing_zeros();
        Swizzle {
            bits: b,
            base: 0,
            shift: b,
        }
    }

    /// The swizzled offset.
    pub const fn apply(self, o: u32) -> u32 {
        let mask = (1u32 << self.bits) - 1;
        o ^ (((o >> (self.base + self.shift)) & mask) << self.base)
    }

    /// Column `col` of row `row` after the swizzle, for a [`Swizzle::columns`] swizzle: `col ^
    /// (row mod columns)` (rows may be any non-negative index).
    pub const fn column(self, row: Index, col: Index) -> Index {
        let mask = (1 << self.bits) - 1;
        col ^ (row & mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_swizzle_is_an_involution_and_a_bijection_on_its_block() {
        for bits in 0..4 {
            for base in 0..4 {
                for shift in bits..5 {
                    let s = Swizzle::new(bits, base, shift).unwrap();
                    let block = 1u32 << (bits + base + shift);
                    let mut seen = vec![false; block as usize];
                    for o in 0..block {
                        let a = s.apply(o);
                        assert_eq!(s.apply(a), o);
                        assert!(a < block && !seen[a as usize]);
                        seen[a as usize] = true;
                    }
                }
            }
        }
    }

    #[test]
    fn the_128_byte_swizzle_permutes_chunks_by_row() {
        // Independently: row r = addr / 128 within the 1024-byte atom, chunk c = addr / 16 % 8.
        for addr in 0..4096u32 {
            let (r, c) = (addr / 128 % 8, addr / 16 % 8);
            let want = addr - c * 16 + (c ^ r) * 16;
            assert_eq!(Swizzle::WGMMA_128B.apply(addr), want, "{addr}");
        }
    }

    #[test]
    fn the_column_swizzle_is_the_offset_swizzle() {
        for log in 0..6 {
            let n = 1 << log;
            let s = Swizzle::columns(n).unwrap();
            for row in 0..3 * n {
                for col in 0..n {
                    let o = (row * n + col) as u32;
                    assert_eq!(s.apply(o), (row * n + (col ^ (row % n))) as u32);
                    assert_eq!(s.column(row, col), col ^ (row % n));
                }
            }
        }
        assert!(Swizzle::columns(6).is_err() && Swizzle::columns(0).is_err());
        assert_eq!(
            Swizzle::new(3, 4, 2).unwrap_err().rule.name(),
            "swizzle-bits"
        );
        assert!(Swizzle::new(8, 12, 12).is_err());
    }
}
