//! One description per operator ([`Op`]): its name, its tensors with their element types and
//! shape rules, its scalars, its launch and its check against an fp64 CPU reference. The `ck`
//! command (`ck run`, `ck cross-check`, `ck bench`), the Python package and the tests all
//! iterate [`crate::registry`], so an operator is described once, in its family's folder.
//!
//! | file | what |
//! |---|---|
//! | [`dtype`] | [`Dtype`], the operator's element type, and [`OpElement`] (device code too) |
//! | [`param`] | [`Param`] (role, element type, shape rule of [`Dim`]s), [`Scalar`], [`Signature`] |
//! | [`sizes`] | [`Sizes`]: the values of the shape rules' symbols |
//! | [`verify`] | the seeded [`Rng`], [`Outcome`] and the error measures against fp64 |
//! | [`buffers`] | [`Buffer`] (a device buffer of either type) and [`Launch`] (one call's buffers) |
//! | [`output`] | [`HostOutput`]: a call's values, what a check reads |
//! | [`describe`] | [`Op`]: the description |
//! | [`bind`] | [`bind::bind`]: [`Sizes`] from the tensors' shapes, each checked against its rule |
//! | [`host`] | [`HostCall`]: an operator on host data (`.npy` files, seeded samples); [`check`] |
//!
//! For example RMSNorm (`rows/rmsnorm.rs`):
//!
//! ```
//! use ck_kernels::op::{Dim::*, Elem, HostCall, Role};
//! use ck_kernels::rows::rmsnorm::OP;
//! assert_eq!(OP.params[0].dims, &[Rows, Sym("N")]); // x: [..., N]
//! assert_eq!(OP.params[1].dims, &[Sym("N")]); // gamma: [N]
//! let device = ck_core::host::Device::emulator();
//! let out = HostCall::new(&OP)
//!     .input("x", &[3.0, 4.0], &[1, 2])
//!     .input("gamma", &[1.0, 2.0], &[2])
//!     .run(&device)
//!     .unwrap();
//! // rms = √((9 + 16) / 2) ≈ 3.5355: y = (3, 4) / 3.5355 · (1, 2)
//! let y = out.output("y").unwrap();
//! assert!((y[0] - 0.848_528).abs() < 1e-5 && (y[1] - 2.262_742).abs() < 1e-5);
//! ```

pub mod dtype;
pub use dtype::{Dtype, OpElement};

// The rest describes and runs operators on the host; the files in their dependency order.
#[cfg(not(target_arch = "nvptx64"))]
pub mod bind;
#[cfg(not(target_arch = "nvptx64"))]
pub mod buffers;
#[cfg(not(target_arch = "nvptx64"))]
pub mod describe;
#[cfg(not(target_arch = "nvptx64"))]
pub mod host;
#[cfg(not(target_arch = "nvptx64"))]
pub mod output;
#[cfg(not(target_arch = "nvptx64"))]
pub mod param;
#[cfg(not(target_arch = "nvptx64"))]
pub mod sizes;
#[cfg(not(target_arch = "nvptx64"))]
pub mod verify;

#[cfg(not(target_arch = "nvptx64"))]
pub use {
    buffers::{Buffer, Launch},
    describe::{no_constraints, Launched, Op},
    host::{check, HostCall},
    output::HostOutput,
    param::{tensor, Dim, Elem, Param, Role, Scalar, ScalarRule, Signature},
    sizes::Sizes,
    verify::{
        max_relative_error, norm_error_relative_to, norm_relative_error, worst, Outcome, Rng,
    },
};
