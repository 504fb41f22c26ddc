//! Exercise and probe kernels: small kernels whose results are known in closed form, which check
//! the device layer, the emulator's sanitizer and its bank-conflict profiler against the GPU
//! (`ck run reverse|block-sum|histogram|bank-probe|lds-probe`, `ck cross-check`).
//!
//! | file | kernels |
//! |---|---|
//! | [`exercise`] | `reverse` (shared memory), `block_sum` (shuffles + shared), `histogram` (atomics), each with a CPU reference |
//! | [`bank_probe`] | `bank_probe`: a shared-memory access pattern whose bank conflicts are known |
//! | [`lds_probe`] | `lds_probe_xor`, `lds_probe_plain`: the spec's TV8 LDS tile, swizzled and plain |
//! | [`lane_groups`] | `lane_group_rmsnorm_*`: CK's short-row RMSNorm configurations (lane groups of 8 and 16 lanes), copied, for 64- and 32-lane warps |

pub mod bank_probe;
pub mod exercise;
pub mod lane_groups;
pub mod lds_probe;
