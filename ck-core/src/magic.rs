//! Magic-number division (CK's `magic_division32_bit_range`), the lowering of merges.
//!
//! For a divisor `d` in `1..2^31`: `shift = ceil(log2 d)` and
//! `mult = (((2^shift − d) << 32) / d + 1) mod 2^32`; then
//! `q(n) = ((umulhi(n, mult) + n) mod 2^32) >> shift` equals `n / d` for every `0 ≤ n < 2^31`.
//!
//! ```
//! use ck_core::magic::{magic, magic_div};
//! assert_eq!(magic(7), (0x24924925, 3));
//! assert_eq!(magic_div(100, magic(7)), 14);
//! ```

/// `(multiplier, shift)` for divisor `d` (`1 ≤ d < 2^31`).
pub const fn magic(d: u32) -> (u32, u32) {
    assert!(
        d >= 1 && d < (1 << 31),
        "magic division needs 1 <= d < 2^31"
    );
    let mut shift = 0u32;
    while (1u64 << shift) < d as u64 {
        shift += 1;
    }
    let d64 = d as u64;
    let mult = ((((1u64 << shift) - d64) << 32) / d64 + 1) as u32;
    (mult, shift)
}

/// `n / d` through the magic pair of `d`; exact for `0 ≤ n < 2^31`.
pub const fn magic_div(n: u32, (mult, shift): (u32, u32)) -> u32 {
    let hi = ((n as u64 * mult as u64) >> 32) as u32;
    hi.wrapping_add(n) >> shift
}
