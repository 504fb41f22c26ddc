//! Float functions kernels need that `core` does not provide on every target. Both backends
//! compute the IEEE correctly rounded result, so the emulator and the GPU agree bit for bit —
//! except [`exp2`] and [`log2`], which use the GPU's approximate instructions.

/// Correctly rounded square root.
#[inline(always)]
pub fn sqrt(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a pure register-to-register instruction.
        unsafe {
            core::arch::asm!("sqrt.rn.f32 {0}, {1};", out(reg32) r, in(reg32) x, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.sqrt()
    }
}

/// `1 / sqrt(x)`, both steps correctly rounded.
#[inline(always)]
pub fn rsqrt(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a pure register-to-register instruction.
        unsafe {
            core::arch::asm!("div.rn.f32 {0}, 0f3F800000, {1};", out(reg32) r, in(reg32) sqrt(x), options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        1.0 / x.sqrt()
    }
}

/// `a·b + c` with one rounding (FFMA on the GPU; the same correctly rounded value on the host).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a pure register-to-register instruction.
        unsafe {
            core::arch::asm!("fma.rn.f32 {0}, {1}, {2}, {3};", out(reg32) r, in(reg32) a, in(reg32) b, in(reg32) c, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        a.mul_add(b, c)
    }
}

/// `2^x`. On the GPU this is `ex2.approx.ftz.f32` (the SFU instruction softmax and attention
/// kernels use: at most 2 ulp from the exact value; subnormal results flush to 0), on the
/// emulator the correctly rounded value — so the two backends agree within 2 ulp, not bit for
/// bit. `exp(x)` is `exp2(x · LOG2_E)`, with the multiplication folded into the caller's scale.
#[inline(always)]
pub fn exp2(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a pure register-to-register instruction.
        unsafe {
            core::arch::asm!("ex2.approx.ftz.f32 {0}, {1};", out(reg32) r, in(reg32) x, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.exp2()
    }
}

/// `log₂(x)`. On the GPU `lg2.approx.ftz.f32` (maximum relative error 2⁻²², subnormal inputs
/// flush to 0 and give −∞), on the emulator the correctly rounded value.
#[inline(always)]
pub fn log2(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a pure register-to-register instruction.
        unsafe {
            core::arch::asm!("lg2.approx.ftz.f32 {0}, {1};", out(reg32) r, in(reg32) x, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.log2()
    }
}

/// `tanh(x)`, approximately. On the GPU `tanh.approx.f32` (one SFU instruction; maximum relative
/// error about 2⁻¹¹ by the PTX ISA — well under a bf16 rounding, 2⁻⁹, and far over an f32 one),
/// on the emulator the libm value. For activations whose result is rounded to bf16: GELU and
/// SiLU on one SFU instruction instead of two (`ex2` and `rcp`).
#[inline(always)]
pub fn tanh_approx(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a pure register-to-register instruction.
        unsafe {
            core::arch::asm!("tanh.approx.f32 {0}, {1};", out(reg32) r, in(reg32) x, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x.tanh()
    }
}

/// `1 / x`, approximately. On the GPU `rcp.approx.ftz.f32` (maximum relative error 2⁻²³;
/// one SFU instruction, where `/` is an IEEE division subroutine; `1/±0 = ±∞`, `1/±∞ = ±0`),
/// on the emulator the correctly rounded value. For epilogues and activations, where
/// a division's last bit does not matter and its cost does.
#[inline(always)]
pub fn rcp(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a pure register-to-register instruction.
        unsafe {
            core::arch::asm!("rcp.approx.ftz.f32 {0}, {1};", out(reg32) r, in(reg32) x, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        1.0 / x
    }
}
