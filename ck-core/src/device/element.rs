//! Element types that kernels load and store: plain little-endian scalars of 1, 2 or 4 bytes.

/// A scalar that lives in device memory. `to_bits`/`from_bits` give its little-endian bytes in
/// the low bits of a `u32` (what the emulator stores and shuffles move).
pub trait Element: Copy + Default + PartialEq + core::fmt::Debug + Send + Sync + 'static {
    /// Size in bytes (1, 2 or 4).
    const BYTES: u32;
    /// Name for messages.
    const NAME: &'static str;
    /// The bits, zero-extended.
    fn to_bits(self) -> u32;
    /// From the low `BYTES` bytes.
    fn from_bits(bits: u32) -> Self;
}

macro_rules! element {
    ($t:ty, $bytes:expr, $to:expr, $from:expr) => {
        impl Element for $t {
            const BYTES: u32 = $bytes;
            const NAME: &'static str = stringify!($t);
            #[inline(always)]
            fn to_bits(self) -> u32 {
                ($to)(self)
            }
            #[inline(always)]
            fn from_bits(bits: u32) -> Self {
                ($from)(bits)
            }
        }
    };
}

element!(f32, 4, |v: f32| v.to_bits(), f32::from_bits);
element!(u32, 4, |v: u32| v, |b: u32| b);
element!(i32, 4, |v: i32| v as u32, |b: u32| b as i32);
element!(u16, 2, |v: u16| v as u32, |b: u32| b as u16);
element!(i16, 2, |v: i16| v as u16 as u32, |b: u32| b as u16 as i16);
element!(u8, 1, |v: u8| v as u32, |b: u32| b as u8);
element!(i8, 1, |v: i8| v as u8 as u32, |b: u32| b as u8 as i8);

/// bfloat16: the upper half of an `f32`. Conversions round to nearest even.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug, Hash)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl Bf16 {
    /// Rounds an `f32` to the nearest bf16 (ties to even; NaN stays NaN).
    #[inline(always)]
    pub fn from_f32(v: f32) -> Bf16 {
        #[cfg(target_arch = "nvptx64")]
        {
            // The hardware conversion (round to nearest even), one instruction.
            let r: u16;
            // SAFETY: a pure register-to-register conversion.
            unsafe {
                core::arch::asm!("cvt.rn.bf16.f32 {0}, {1};", out(reg16) r, in(reg32) v, options(pure, nomem, nostack))
            };
            Bf16(r)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let b = v.to_bits();
            if v.is_nan() {
                return Bf16(((b >> 16) as u16) | 0x40);
            }
            let round = 0x7fff + ((b >> 16) & 1);
            Bf16((b.wrapping_add(round) >> 16) as u16)
        }
    }

    /// The exact `f32` value.
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }

    /// `lo` and `hi` rounded to bf16 and packed into one word, `lo` in the low half (the
    /// element order of MMA register operands); one `cvt.rn.bf16x2.f32` on the GPU.
    #[inline(always)]
    pub fn pack2(lo: f32, hi: f32) -> u32 {
        #[cfg(target_arch = "nvptx64")]
        {
            let r: u32;
            // SAFETY: a pure register-to-register conversion.
            unsafe {
                core::arch::asm!("cvt.rn.bf16x2.f32 {0}, {1}, {2};", out(reg32) r, in(reg32) hi, in(reg32) lo, options(pure, nomem, nostack))
            };
            r
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            Bf16::from_f32(lo).0 as u32 | (Bf16::from_f32(hi).0 as u32) << 16
        }
    }

    /// The two values of a word packed by [`Bf16::pack2`] (or read by `ldmatrix`), low half
    /// first: exact, two bit operations.
    #[inline(always)]
    pub fn unpack2(word: u32) -> (f32, f32) {
        (
            f32::from_bits(word << 16),
            f32::from_bits(word & 0xffff_0000),
        )
    }
}

element!(Bf16, 2, |v: Bf16| v.0 as u32, |b: u32| Bf16(b as u16));

/// 32-bit elements: what warp shuffles and 32-bit atomics move.
pub trait Element32: Element {}
impl Element32 for f32 {}
impl Element32 for u32 {}
impl Element32 for i32 {}

/// Which hardware atomic an [`Atomic`] type uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicKind {
    /// `f32`: native add, max through compare-and-swap.
    F32,
    /// `u32`.
    U32,
    /// `i32`.
    I32,
}

/// Elements with a device atomic add / max (f32, i32, u32).
pub trait Atomic: Element32 {
    /// The hardware atomic family.
    const KIND: AtomicKind;
    /// `a + b` as the device computes it.
    fn add(a: Self, b: Self) -> Self;
    /// `max(a, b)` as the device computes it.
    fn max(a: Self, b: Self) -> Self;
}

impl Atomic for f32 {
    const KIND: AtomicKind = AtomicKind::F32;
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    fn max(a: f32, b: f32) -> f32 {
        a.max(b)
    }
}
impl Atomic for u32 {
    const KIND: AtomicKind = AtomicKind::U32;
    fn add(a: u32, b: u32) -> u32 {
        a.wrapping_add(b)
    }
    fn max(a: u32, b: u32) -> u32 {
        a.max(b)
    }
}
impl Atomic for i32 {
    const KIND: AtomicKind = AtomicKind::I32;
    fn add(a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }
    fn max(a: i32, b: i32) -> i32 {
        a.max(b)
    }
}

/// Floating-point elements computed in f32 (f32 itself, bf16 storage).
pub trait Real: Element {
    /// The value as f32 (exact).
    fn to_f32(self) -> f32;
    /// Rounds an f32 to this type (nearest even).
    fn from_f32(v: f32) -> Self;
    /// Rounds two f32s, `[from_f32(lo), from_f32(hi)]`: one instruction for bf16 on the GPU
    /// (`cvt.rn.bf16x2.f32`), where `from_f32` is one conversion each on a slower pipe.
    #[inline(always)]
    fn from_f32_pair(lo: f32, hi: f32) -> [Self; 2] {
        [Self::from_f32(lo), Self::from_f32(hi)]
    }
}

impl Real for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl Real for Bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        Bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        Bf16::from_f32(v)
    }
    #[inline(always)]
    fn from_f32_pair(lo: f32, hi: f32) -> [Self; 2] {
        let w = Bf16::pack2(lo, hi);
        [Bf16(w as u16), Bf16((w >> 16) as u16)]
    }
}

#[cfg(test)]
mod tests {
    use super::Bf16;

    /// Every bf16 value packed with its negation comes back unchanged, in order (under miri,
    /// every 97th).
    #[test]
    fn unpack2_inverts_pack2_over_every_bf16_value() {
        let step = if cfg!(miri) { 97 } else { 1 };
        for bits in (0..=u16::MAX as u32).step_by(step) {
            let v = f32::from_bits(bits << 16);
            if v.is_nan() {
                continue;
            }
            let (lo, hi) = Bf16::unpack2(Bf16::pack2(v, -v));
            assert_eq!((lo.to_bits(), hi.to_bits()), (v.to_bits(), (-v).to_bits()));
        }
    }
}
