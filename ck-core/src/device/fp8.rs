//! The two 8-bit floating-point formats of Hopper's tensor cores (OCP FP8, as the PTX ISA and
//! PyTorch's `float8_e4m3fn` / `float8_e5m2` define them):
//!
//! | format | sign · exponent · mantissa | bias | largest finite | smallest subnormal | inf | NaN |
//! |---|---|---|---|---|---|---|
//! | [`E4m3`] | 1 · 4 · 3 | 7 | 448 = 1.75 · 2⁸ | 2⁻⁹ | none | `s.1111.111` |
//! | [`E5m2`] | 1 · 5 · 2 | 15 | 57344 = 1.75 · 2¹⁵ | 2⁻¹⁶ | `s.11111.00` | `s.11111.{01,10,11}` |
//!
//! A normal value (exponent field `e > 0`) is `±(1 + m / 2^M) · 2^(e − bias)`, a subnormal
//! (`e = 0`) `±(m / 2^M) · 2^(1 − bias)`. Worked example: E4m3 bits `0x5a` = `0.1011.010`:
//! `e = 11`, `m = 2`, so `(1 + 2/8) · 2^(11 − 7) = 1.25 · 16 = 20`; `0x03` = `0.0000.011` is
//! `3/8 · 2⁻⁶ = 3 · 2⁻⁹`.
//!
//! Rounding from f32 ([`Fp8::from_f32`]) is to nearest, ties to even, and *saturating*, like
//! the GPU's `cvt.rn.satfinite`: a finite value past the largest finite one becomes it (no
//! overflow to infinity or NaN); NaN stays NaN. Per-tensor scales bring a tensor into range
//! before the rounding (`x / scale`), and the GEMM multiplies them back in its epilogue.

use crate::device::{Element, Real};

/// The fields of one 8-bit format.
struct Format {
    exponent_bits: u32,
    mantissa_bits: u32,
    /// True if the all-ones exponent holds infinities and NaNs (E5m2); E4m3 keeps it for
    /// finite values except the all-ones mantissa.
    ieee_specials: bool,
}

impl Format {
    const fn bias(&self) -> i32 {
        (1 << (self.exponent_bits - 1)) - 1
    }

    /// The largest finite encoding (without sign).
    const fn max_finite(&self) -> u8 {
        let all = (1u32 << (self.exponent_bits + self.mantissa_bits)) - 1;
        if self.ieee_specials {
            // Exponent all ones is special: the largest finite has exponent 1…10, mantissa 1…1.
            (all - (1 << self.mantissa_bits)) as u8
        } else {
            // Only the all-ones pattern is NaN.
            (all - 1) as u8
        }
    }

    /// The canonical NaN (without sign).
    const fn nan(&self) -> u8 {
        ((1u32 << (self.exponent_bits + self.mantissa_bits)) - 1) as u8
    }

    /// `2^e` as an f64, exactly (|e| < 1000).
    fn pow2(e: i32) -> f64 {
        f64::from_bits(((1023 + e) as u64) << 52)
    }

    /// The exact value of `bits` (any of the 256 patterns).
    fn decode(&self, bits: u8) -> f32 {
        let (eb, mb) = (self.exponent_bits, self.mantissa_bits);
        let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let e = (bits as u32 >> mb) & ((1 << eb) - 1);
        let m = bits as u32 & ((1 << mb) - 1);
        let all_ones = (1 << eb) - 1;
        let magnitude = if self.ieee_specials && e == all_ones {
            if m == 0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        } else if !self.ieee_specials && e == all_ones && m == (1 << mb) - 1 {
            f64::NAN
        } else if e == 0 {
            m as f64 * Self::pow2(1 - self.bias() - mb as i32)
        } else {
            (((1 << mb) + m) as f64) * Self::pow2(e as i32 - self.bias() - mb as i32)
        };
        (sign * magnitude) as f32
    }

    /// `v` rounded to nearest (ties to even), saturating at the largest finite value.
    fn encode(&self, v: f32) -> u8 {
        let sign = if v.is_sign_negative() { 0x80 } else { 0 };
        if v.is_nan() {
            return sign | self.nan();
        }
        let mb = self.mantissa_bits as i32;
        let a = (v as f64).abs();
        if a == 0.0 {
            return sign;
        }
        let max = self.decode(self.max_finite()) as f64;
        if a >= max {
            return sign | self.max_finite();
        }
        // The spacing of the format's values around `a`: 2^(exponent − M), with the exponent
        // no smaller than the smallest normal's (below it the subnormals are evenly spaced).
        let exponent = ((a.to_bits() >> 52) as i32 - 1023).max(1 - self.bias());
        // `a / quantum` is exact (a power-of-two scaling) and below 2^(M + 1).
        let scaled = a * Self::pow2(mb - exponent);
        let whole = scaled as u64;
        let frac = scaled - whole as f64;
        let q = if frac > 0.5 || (frac == 0.5 && whole % 2 == 1) {
            whole + 1
        } else {
            whole
        };
        let rounded = q as f64 * Self::pow2(exponent - mb);
        if rounded > max {
            return sign | self.max_finite();
        }
        // Re-encode the rounded value (rounding may have carried into the next binade).
        let min_normal = Self::pow2(1 - self.bias());
        let bits = if rounded < min_normal {
            (rounded * Self::pow2(self.bias() - 1 + mb)) as u32
        } else {
            let e = (rounded.to_bits() >> 52) as i32 - 1023;
            let m = (rounded * Self::pow2(mb - e)) as u32 - (1 << mb);
            (((e + self.bias()) as u32) << mb) | m
        };
        sign | bits as u8
    }
}

const E4M3: Format = Format {
    exponent_bits: 4,
    mantissa_bits: 3,
    ieee_specials: false,
};
const E5M2: Format = Format {
    exponent_bits: 5,
    mantissa_bits: 2,
    ieee_specials: true,
};

/// Which 8-bit format a tensor-core operand is in (the MMA instruction's type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Kind {
    /// [`E4m3`].
    E4m3,
    /// [`E5m2`].
    E5m2,
}

/// An 8-bit float operand type of the fp8 warpgroup MMA ([`crate::device::wgmma_fp8`]).
pub trait Fp8: Real {
    /// The format.
    const KIND: Fp8Kind;
    /// The largest finite value (448 or 57344): what per-tensor scales map a tensor's
    /// largest magnitude to.
    const MAX: f32;
}

macro_rules! fp8_type {
    ($(#[$doc:meta])* $t:ident, $format:ident, $name:literal, $max:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Hash)]
        #[repr(transparent)]
        pub struct $t(pub u8);

        impl $t {
            /// `v` rounded to nearest even, saturating (see the module documentation).
            pub fn from_f32(v: f32) -> $t {
                $t($format.encode(v))
            }

            /// The exact value.
            pub fn to_f32(self) -> f32 {
                $format.decode(self.0)
            }
        }

        impl Element for $t {
            const BYTES: u32 = 1;
            const NAME: &'static str = $name;
            #[inline(always)]
            fn to_bits(self) -> u32 {
                self.0 as u32
            }
            #[inline(always)]
            fn from_bits(bits: u32) -> Self {
                $t(bits as u8)
            }
        }

        impl Real for $t {
            fn to_f32(self) -> f32 {
                $t::to_f32(self)
            }
            fn from_f32(v: f32) -> Self {
                $t::from_f32(v)
            }
        }

        impl Fp8 for $t {
            const KIND: Fp8Kind = Fp8Kind::$t;
            const MAX: f32 = $max;
        }
    };
}

fp8_type!(
    /// FP8 E4M3 (`float8_e4m3fn`): 4 exponent bits, 3 mantissa bits, no infinities.
    E4m3, E4M3, "e4m3", 448.0
);
fp8_type!(
    /// FP8 E5M2 (`float8_e5m2`): 5 exponent bits, 2 mantissa bits, IEEE infinities and NaNs.
    E5m2, E5M2, "e5m2", 57344.0
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// `2^e`, exactly (`powi` is not exact under miri, which perturbs it on purpose).
    fn pow2(e: i32) -> f64 {
        f64::from_bits(((1023 + e) as u64) << 52)
    }

    /// The value of E4m3 bits from the table in the OCP FP8 specification, written out by
    /// cases rather than through `Format`.
    fn e4m3_reference(bits: u8) -> f64 {
        let s = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let (e, m) = ((bits >> 3) & 0xf, bits & 7);
        match (e, m) {
            (15, 7) => f64::NAN,
            (0, m) => s * m as f64 / 8.0 / 64.0,
            (e, m) => s * (1.0 + m as f64 / 8.0) * pow2(e as i32 - 7),
        }
    }

    fn e5m2_reference(bits: u8) -> f64 {
        let s = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let (e, m) = ((bits >> 2) & 0x1f, bits & 3);
        match (e, m) {
            (31, 0) => s * f64::INFINITY,
            (31, _) => f64::NAN,
            (0, m) => s * m as f64 / 4.0 / 16384.0,
            (e, m) => s * (1.0 + m as f64 / 4.0) * pow2(e as i32 - 15),
        }
    }

    #[test]
    fn every_pattern_decodes_to_the_specified_value() {
        for b in 0..=255u8 {
            let (x, y) = (E4m3(b).to_f32() as f64, e4m3_reference(b));
            assert!(
                x == y || (x.is_nan() && y.is_nan()),
                "e4m3 {b:#04x}: {x} vs {y}"
            );
            let (x, y) = (E5m2(b).to_f32() as f64, e5m2_reference(b));
            assert!(
                x == y || (x.is_nan() && y.is_nan()),
                "e5m2 {b:#04x}: {x} vs {y}"
            );
        }
        assert_eq!(E4m3(0x5a).to_f32(), 20.0);
        assert_eq!(E4m3(0x7e).to_f32(), 448.0);
        assert_eq!(E5m2(0x7b).to_f32(), 57344.0);
        assert_eq!(E4m3(0x01).to_f32(), pow2(-9) as f32);
        assert_eq!(E5m2(0x01).to_f32(), pow2(-16) as f32);
    }

    #[test]
    fn every_value_round_trips() {
        for b in 0..=255u8 {
            let v = E4m3(b).to_f32();
            if !v.is_nan() {
                assert_eq!(E4m3::from_f32(v).0, b, "e4m3 {b:#04x} = {v}");
            }
            let v = E5m2(b).to_f32();
            if v.is_finite() {
                assert_eq!(E5m2::from_f32(v).0, b, "e5m2 {b:#04x} = {v}");
            }
        }
    }

    /// Every f32 halfway between two neighbours, and a little either side of it, against the
    /// nearest of the 256 values found by search.
    #[test]
    fn rounding_is_to_nearest_even_and_saturating() {
        fn check<T: Fp8 + Copy>(decode: fn(u8) -> f64, encode: fn(f32) -> u8) {
            let mut finite: Vec<(f64, u8)> = (0..=255u8)
                .map(|b| (decode(b), b))
                .filter(|(v, _)| v.is_finite())
                .collect();
            finite.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
            let nearest = |x: f64| -> f64 {
                if x.abs() >= T::MAX as f64 {
                    return T::MAX as f64 * x.signum();
                }
                let mut best = finite[0];
                for &(v, b) in &finite {
                    let (d, db) = ((v - x).abs(), (best.0 - x).abs());
                    // Ties go to the even mantissa (the even encoding).
                    if d < db || (d == db && b % 2 == 0) {
                        best = (v, b);
                    }
                }
                best.0
            };
            for w in finite.windows(2) {
                let mid = (w[0].0 + w[1].0) / 2.0;
                for x in [mid, mid * (1.0 + 1e-6), mid * (1.0 - 1e-6)] {
                    let got = decode(encode(x as f32));
                    assert_eq!(got, nearest(x as f32 as f64), "{x}");
                }
            }
            assert_eq!(decode(encode(1e30)), T::MAX as f64);
            assert_eq!(decode(encode(-f32::INFINITY)), -T::MAX as f64);
            assert!(decode(encode(f32::NAN)).is_nan());
        }
        check::<E4m3>(e4m3_reference, |x| E4m3::from_f32(x).0);
        check::<E5m2>(e5m2_reference, |x| E5m2::from_f32(x).0);
    }
}
