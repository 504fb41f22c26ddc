//! Which of the `cp.async` bf16 GEMM kernels runs a problem: [`Bf16Kernel`], the choice the
//! launchers of [`crate::gemm::fused`] and the entry points of [`crate::gemm::auto`] share.

use crate::gemm::wgmma::{whole_vector_rows, BM};
use ck_core::host::Device;

/// The bf16 GEMM kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bf16Kernel {
    /// `gemm_bf16`: `mma.sync` + `ldmatrix`, any shape.
    MmaSync,
    /// `gemm_bf16_wgmma`: wgmma on 128 × 256 tiles (N, K multiples of 8).
    Wgmma128x256,
    /// `gemm_bf16_wgmma_n128`: wgmma on 128 × 128 tiles (N, K multiples of 8).
    Wgmma128x128,
}

impl Bf16Kernel {
    /// The kernel for an M × N × K product on `device`: wgmma where N and K are multiples
    /// of 8 (its 16-byte copies need 16-byte rows of A and B), `mma.sync` otherwise. The
    /// wgmma tiles are 128 × 128 when they all run at once (one wave: a 128 × 128 tile takes
    /// 0.7 of a 128 × 256 one's time on an H100, so halving the tiles of a partial wave
    /// pays), else 128 × 256 (at 1024 × 1024 × 8192: 282 against 204 TFLOP/s; at
    /// 2048 × 2048 × 4096, 256 tiles of 128 × 128 on 132 SMs: 486 against 628).
    pub fn for_shape(device: &Device, (m, n, k): (u32, u32, u32)) -> Bf16Kernel {
        if !whole_vector_rows(n, k) {
            Bf16Kernel::MmaSync
        } else if m.div_ceil(BM) * n.div_ceil(128) <= device.multiprocessors() {
            Bf16Kernel::Wgmma128x128
        } else {
            Bf16Kernel::Wgmma128x256
        }
    }

    /// The kernel's name.
    pub fn name(self) -> &'static str {
        match self {
            Bf16Kernel::MmaSync => "gemm_bf16",
            Bf16Kernel::Wgmma128x256 => "gemm_bf16_wgmma",
            Bf16Kernel::Wgmma128x128 => "gemm_bf16_wgmma_n128",
        }
    }
}
