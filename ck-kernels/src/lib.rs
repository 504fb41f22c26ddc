//! Kernels written with ck-rs, their host launchers and CPU references, and the `ck` command's
//! implementation ([`cli`]).
pub mod cli;
