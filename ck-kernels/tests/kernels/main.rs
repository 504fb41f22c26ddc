//! The kernel crate's tests, one binary: one link instead of a link per file, and one test
//! harness whose threads share the long emulator runs of every family (binaries run one after
//! another under `cargo test`, each as long as its slowest test). Run one family with
//! `cargo test -p ck-kernels --test kernels gemm_tma::`.
//!
//! | module | what it checks |
//! |---|---|
//! | `tiles`, `reductions`, `lane_groups` | windows, distributed tensors, block and lane-group reductions |
//! | `pipeline`, `clusters`, `matrix_fragments`, `wgmma_operands` | Hopper's asynchronous copies, clusters, fragment layouts |
//! | `sanitizer`, `exercise`, `cross_backend` | the emulator as a sanitizer and a bank profiler; emulator against GPU |
//! | `gemm*` | the GEMM family: `mma.sync`, TMA + wgmma, fused epilogues, grouped, `nn.Linear`, the picker |
//! | `attention`, `attention_decode` | attention forward, backward, varlen, decode |
//! | `softmax`, `layernorm`, `add_rmsnorm`, `rows_backward`, `row_instances` | the row-wise family, forward and backward |
//! | `rope`, `glu` | rotary embeddings, gated units |
//! | `registry` | every operator of the registry against its reference; the error measures |

mod add_rmsnorm;
mod attention;
mod attention_decode;
mod clusters;
mod cross_backend;
mod exercise;
mod gemm;
mod gemm_auto;
mod gemm_fused;
mod gemm_grouped;
mod gemm_linear;
mod gemm_tma;
mod glu;
mod lane_groups;
mod layernorm;
mod matrix_fragments;
mod pipeline;
mod reductions;
mod registry;
mod rope;
mod row_instances;
mod rows_backward;
mod sanitizer;
mod softmax;
mod tiles;
mod wgmma_operands;
