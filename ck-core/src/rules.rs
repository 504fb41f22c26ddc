//! The one vocabulary of rule identifiers: every error and warning ck-rs reports — from the
//! macros, the index algebra, the emulator, a launch, the `ck` command, the PTX builder and the
//! Python bindings — names one of these. A [`RuleId`] is a stable kebab-case name and a
//! severity; printers frame a message with it as `error[name]: …` (its `Display`), and the
//! error types' own `Display` never does.
//!
//! ```
//! use ck_core::rules::{self, Severity};
//! assert_eq!(rules::SHAPE_MISMATCH.name(), "shape-mismatch");
//! assert_eq!(rules::R_UNOWNED.severity(), Severity::Warning);
//! assert_eq!(format!("{}: tensors of 3 and 4 rows", rules::SHAPE_MISMATCH), "error[shape-mismatch]: tensors of 3 and 4 rows");
//! assert_eq!(rules::by_name("deadlock"), Some(rules::DEADLOCK));
//! ```

use core::fmt;

/// How serious a rule's violation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    /// The input is refused.
    Error,
    /// The input is accepted; the message says what is probably unintended.
    Warning,
}

/// A rule: its stable kebab-case name and its severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RuleId {
    name: &'static str,
    severity: Severity,
}

impl RuleId {
    /// An error rule named `name` (kebab-case). ck-rs's own are the constants of this module;
    /// a crate of kernels names its own the same way.
    pub const fn error(name: &'static str) -> RuleId {
        RuleId {
            name,
            severity: Severity::Error,
        }
    }

    /// A warning rule named `name`.
    pub const fn warning(name: &'static str) -> RuleId {
        RuleId {
            name,
            severity: Severity::Warning,
        }
    }

    /// The stable name (`shape-mismatch`).
    pub const fn name(self) -> &'static str {
        self.name
    }

    /// Error or warning.
    pub const fn severity(self) -> Severity {
        self.severity
    }

    /// True for warnings.
    pub const fn is_warning(self) -> bool {
        matches!(self.severity, Severity::Warning)
    }
}

/// The frame a printer puts before a message: `error[name]` or `warning[name]`.
impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{kind}[{}]", self.name)
    }
}

/// Compares by name (`e.rule() == "bad-scale"`).
impl PartialEq<&str> for RuleId {
    fn eq(&self, other: &&str) -> bool {
        self.name == *other
    }
}

/// The rule named `name`, if there is one.
pub fn by_name(name: &str) -> Option<RuleId> {
    ALL.iter().copied().find(|r| r.name == name)
}

// Tile-distribution encodings (`tile_distribution!`, `Encoding`).
/// `length-not-positive`: a length is zero or negative.
pub const LENGTH_NOT_POSITIVE: RuleId = RuleId::error("length-not-positive");
/// `empty-x`: an encoding has no X dimension.
pub const EMPTY_X: RuleId = RuleId::error("empty-x");
/// `empty-h`: an X dimension has no H component.
pub const EMPTY_H: RuleId = RuleId::error("empty-h");
/// `no-y`: an encoding has no Y dimension.
pub const NO_Y: RuleId = RuleId::error("no-y");
/// `list-length-mismatch`: two lists that must have the same length do not.
pub const LIST_LENGTH_MISMATCH: RuleId = RuleId::error("list-length-mismatch");
/// `index-out-of-range`: an index is outside its range.
pub const INDEX_OUT_OF_RANGE: RuleId = RuleId::error("index-out-of-range");
/// `y-maps-to-r`: a Y dimension names an R component.
pub const Y_MAPS_TO_R: RuleId = RuleId::error("y-maps-to-r");
/// `empty-p`: a P dimension claims nothing.
pub const EMPTY_P: RuleId = RuleId::error("empty-p");
/// `p-count`: not one or two P dimensions.
pub const P_COUNT: RuleId = RuleId::error("p-count");
/// `claimed-twice`: a component is claimed by two P or Y entries.
pub const CLAIMED_TWICE: RuleId = RuleId::error("claimed-twice");
/// `unclaimed`: a component of length > 1 is claimed by no P and no Y.
pub const UNCLAIMED: RuleId = RuleId::error("unclaimed");
/// `warp-size-mismatch`: the lane dimension does not span the warp size, or a distribution's warp size is not the hardware's.
pub const WARP_SIZE_MISMATCH: RuleId = RuleId::error("warp-size-mismatch");
/// `block-size-mismatch`: the P lengths do not give the declared block size.
pub const BLOCK_SIZE_MISMATCH: RuleId = RuleId::error("block-size-mismatch");
/// `shape-mismatch`: lengths or shapes that must agree do not (a tile's shape, or a call's tensors).
pub const SHAPE_MISMATCH: RuleId = RuleId::error("shape-mismatch");
/// `capacity-exceeded`: more entries than the fixed capacity.
pub const CAPACITY_EXCEEDED: RuleId = RuleId::error("capacity-exceeded");
/// `tile-too-large`: a tile past 32-bit indices.
pub const TILE_TOO_LARGE: RuleId = RuleId::error("tile-too-large");
/// `slice-through-p`: a slice cuts a component a P dimension owns.
pub const SLICE_THROUGH_P: RuleId = RuleId::error("slice-through-p");
/// `slice-not-factor`: a slice that does not divide its component.
pub const SLICE_NOT_FACTOR: RuleId = RuleId::error("slice-not-factor");
/// `r-unowned`: an R component no P owns (warning).
pub const R_UNOWNED: RuleId = RuleId::warning("r-unowned");
/// `unclaimed-unit`: a length-1 component nothing claims (warning).
pub const UNCLAIMED_UNIT: RuleId = RuleId::warning("unclaimed-unit");
/// `unknown-name`: a named component that does not exist.
pub const UNKNOWN_NAME: RuleId = RuleId::error("unknown-name");
/// `unknown-field`: a field the macro does not know.
pub const UNKNOWN_FIELD: RuleId = RuleId::error("unknown-field");
/// `missing-field`: a required field is missing.
pub const MISSING_FIELD: RuleId = RuleId::error("missing-field");
/// `duplicate-field`: a field given twice.
pub const DUPLICATE_FIELD: RuleId = RuleId::error("duplicate-field");
/// `duplicate-name`: a component name used twice.
pub const DUPLICATE_NAME: RuleId = RuleId::error("duplicate-name");
/// `mixed-spelling`: raw and named fields mixed.
pub const MIXED_SPELLING: RuleId = RuleId::error("mixed-spelling");
/// `syntax`: input that does not parse.
pub const SYNTAX: RuleId = RuleId::error("syntax");
/// `unsupported-generic`: a generic parameter the macro cannot check.
pub const UNSUPPORTED_GENERIC: RuleId = RuleId::error("unsupported-generic");
/// `parametric-encoding`: a parametric encoding where literal lengths are needed.
pub const PARAMETRIC_ENCODING: RuleId = RuleId::error("parametric-encoding");

// The index algebra (transforms, adaptors, descriptors, space-filling curves, LDS layouts, swizzles).
/// `negative-parameter`: a pad or stride that must be >= 0 is negative.
pub const NEGATIVE_PARAMETER: RuleId = RuleId::error("negative-parameter");
/// `empty-list`: a list that needs an entry is empty.
pub const EMPTY_LIST: RuleId = RuleId::error("empty-list");
/// `xor-not-power-of-two`: an xor length that is not a power of two.
pub const XOR_NOT_POWER_OF_TWO: RuleId = RuleId::error("xor-not-power-of-two");
/// `slice-out-of-range`: slice bounds outside the lower length.
pub const SLICE_OUT_OF_RANGE: RuleId = RuleId::error("slice-out-of-range");
/// `index-overflow`: a product of lengths past 2^31.
pub const INDEX_OVERFLOW: RuleId = RuleId::error("index-overflow");
/// `sfc-not-divisible`: a curve length not divisible by its scalars per access.
pub const SFC_NOT_DIVISIBLE: RuleId = RuleId::error("sfc-not-divisible");
/// `sfc-order-not-permutation`: a curve's order is not a permutation.
pub const SFC_ORDER_NOT_PERMUTATION: RuleId = RuleId::error("sfc-order-not-permutation");
/// `adaptor-arity`: an adaptor's id lists do not match its transform.
pub const ADAPTOR_ARITY: RuleId = RuleId::error("adaptor-arity");
/// `adaptor-hidden-reused`: a hidden dimension produced or consumed twice.
pub const ADAPTOR_HIDDEN_REUSED: RuleId = RuleId::error("adaptor-hidden-reused");
/// `adaptor-order`: a hidden dimension read before it is produced.
pub const ADAPTOR_ORDER: RuleId = RuleId::error("adaptor-order");
/// `adaptor-top-bottom`: top or bottom ids repeated.
pub const ADAPTOR_TOP_BOTTOM: RuleId = RuleId::error("adaptor-top-bottom");
/// `adaptor-dangling`: a hidden dimension produced and never used.
pub const ADAPTOR_DANGLING: RuleId = RuleId::error("adaptor-dangling");
/// `adaptor-ids-not-permutation`: ids that do not name every dimension once.
pub const ADAPTOR_IDS_NOT_PERMUTATION: RuleId = RuleId::error("adaptor-ids-not-permutation");
/// `chain-mismatch`: chained adaptors whose dimensions do not meet.
pub const CHAIN_MISMATCH: RuleId = RuleId::error("chain-mismatch");
/// `descriptor-bottom`: a descriptor without exactly one bottom dimension.
pub const DESCRIPTOR_BOTTOM: RuleId = RuleId::error("descriptor-bottom");
/// `lds-k-pack`: K per block not a multiple of the K pack.
pub const LDS_K_PACK: RuleId = RuleId::error("lds-k-pack");
/// `lds-mlds-layer`: M per block not a multiple of MLdsLayer.
pub const LDS_MLDS_LAYER: RuleId = RuleId::error("lds-mlds-layer");
/// `lds-bank-conflict`: an LDS layout with more bank conflicts than allowed.
pub const LDS_BANK_CONFLICT: RuleId = RuleId::error("lds-bank-conflict");
/// `swizzle-bits`: a swizzle whose bits overlap or pass bit 31.
pub const SWIZZLE_BITS: RuleId = RuleId::error("swizzle-bits");

// Kernels (`#[tile_kernel]`, `static_for!`, the tile layer's compile-time checks).
/// `kernel-argument`: a kernel parameter of a type kernels cannot take.
pub const KERNEL_ARGUMENT: RuleId = RuleId::error("kernel-argument");
/// `kernel-options`: bad `#[tile_kernel(..)]` options.
pub const KERNEL_OPTIONS: RuleId = RuleId::error("kernel-options");
/// `kernel-signature`: a kernel that is async, const, unsafe, generic or returns a value.
pub const KERNEL_SIGNATURE: RuleId = RuleId::error("kernel-signature");
/// `block-size`: a block size outside 1..=1024 or not the declared one.
pub const BLOCK_SIZE: RuleId = RuleId::error("block-size");
/// `shared-syntax`: a malformed `shared!`.
pub const SHARED_SYNTAX: RuleId = RuleId::error("shared-syntax");
/// `shared-outside-kernel`: `shared!` outside a kernel.
pub const SHARED_OUTSIDE_KERNEL: RuleId = RuleId::error("shared-outside-kernel");
/// `shared-memory`: more shared memory than a block may use.
pub const SHARED_MEMORY: RuleId = RuleId::error("shared-memory");
/// `static-for-step`: a `static_for!` step that is zero.
pub const STATIC_FOR_STEP: RuleId = RuleId::error("static-for-step");
/// `static-for-too-long`: a `static_for!` too long to unroll.
pub const STATIC_FOR_TOO_LONG: RuleId = RuleId::error("static-for-too-long");
/// `reduce-x`: a reduction over a dimension the tile does not have.
pub const REDUCE_X: RuleId = RuleId::error("reduce-x");
/// `reduce-type`: a reduced distribution that is not the tile reduced.
pub const REDUCE_TYPE: RuleId = RuleId::error("reduce-type");
/// `reduce-scratch`: a reduction's scratch too small.
pub const REDUCE_SCRATCH: RuleId = RuleId::error("reduce-scratch");
/// `reduce-across-warps`: an in-warp reduction whose rows span warps.
pub const REDUCE_ACROSS_WARPS: RuleId = RuleId::error("reduce-across-warps");
/// `shuffle-mismatch`: a shuffle between distributions of different shapes.
pub const SHUFFLE_MISMATCH: RuleId = RuleId::error("shuffle-mismatch");
/// `window-rank`: a window whose rank is not its view's.
pub const WINDOW_RANK: RuleId = RuleId::error("window-rank");
/// `warp-size`: a distribution written for another warp size.
pub const WARP_SIZE: RuleId = RuleId::error("warp-size");
/// `setmaxnreg`: a register count setmaxnreg cannot take.
pub const SETMAXNREG: RuleId = RuleId::error("setmaxnreg");

// Kernel faults the emulator finds.
/// `out-of-bounds`: an access outside its array.
pub const OUT_OF_BOUNDS: RuleId = RuleId::error("out-of-bounds");
/// `misaligned-access`: a vector access not aligned to its size.
pub const MISALIGNED_ACCESS: RuleId = RuleId::error("misaligned-access");
/// `shared-race`: two threads touch a shared byte with nothing ordering them.
pub const SHARED_RACE: RuleId = RuleId::error("shared-race");
/// `barrier-divergence`: a barrier not every thread reaches.
pub const BARRIER_DIVERGENCE: RuleId = RuleId::error("barrier-divergence");
/// `warp-divergence`: lanes of a warp at different warp operations.
pub const WARP_DIVERGENCE: RuleId = RuleId::error("warp-divergence");
/// `deadlock`: no thread can make progress.
pub const DEADLOCK: RuleId = RuleId::error("deadlock");
/// `kernel-panic`: the kernel panicked.
pub const KERNEL_PANIC: RuleId = RuleId::error("kernel-panic");
/// `foreign-handle`: a buffer handle the launch did not receive.
pub const FOREIGN_HANDLE: RuleId = RuleId::error("foreign-handle");
/// `emulator-unmodelled`: a hardware mode the emulator does not model.
pub const EMULATOR_UNMODELLED: RuleId = RuleId::error("emulator-unmodelled");
/// `barrier-misuse`: an mbarrier or named barrier used against its contract.
pub const BARRIER_MISUSE: RuleId = RuleId::error("barrier-misuse");

// Launches and the host API.
/// `grid-size`: an empty or too large grid.
pub const GRID_SIZE: RuleId = RuleId::error("grid-size");
/// `argument-size`: a buffer too large for 32-bit indices, or of the wrong length.
pub const ARGUMENT_SIZE: RuleId = RuleId::error("argument-size");
/// `argument-device`: a buffer of another device.
pub const ARGUMENT_DEVICE: RuleId = RuleId::error("argument-device");
/// `misaligned-buffer`: a device pointer not 16-byte aligned.
pub const MISALIGNED_BUFFER: RuleId = RuleId::error("misaligned-buffer");
/// `tensor-map`: a tensor map the TMA engine cannot copy.
pub const TENSOR_MAP: RuleId = RuleId::error("tensor-map");
/// `no-gpu`: no CUDA driver or device.
pub const NO_GPU: RuleId = RuleId::error("no-gpu");
/// `no-ptx`: no PTX module for a kernel crate.
pub const NO_PTX: RuleId = RuleId::error("no-ptx");
/// `ptx-module`: the driver rejected a PTX module or it lacks a kernel.
pub const PTX_MODULE: RuleId = RuleId::error("ptx-module");
/// `no-cublas`: no cuBLASLt library to load (the in-process GEMM peer).
pub const NO_CUBLAS: RuleId = RuleId::error("no-cublas");
/// `cuda`: a CUDA driver error.
pub const CUDA: RuleId = RuleId::error("cuda");
/// `unknown-kernel`: a kernel name the command does not know.
pub const UNKNOWN_KERNEL: RuleId = RuleId::error("unknown-kernel");
/// `probe-parameters`: bad parameters of a probe kernel.
pub const PROBE_PARAMETERS: RuleId = RuleId::error("probe-parameters");

// Operators (`ck-kernels`).
/// `shape-unsupported`: a shape an operator does not take.
pub const SHAPE_UNSUPPORTED: RuleId = RuleId::error("shape-unsupported");
/// `epilogue-unsupported`: an epilogue the chosen kernel is not compiled for.
pub const EPILOGUE_UNSUPPORTED: RuleId = RuleId::error("epilogue-unsupported");
/// `bad-scale`: a scale that is not a positive finite number.
pub const BAD_SCALE: RuleId = RuleId::error("bad-scale");
/// `bad-seqlens`: packed sequences' bounds (`cu_seqlens`) that decrease or pass the tensor's end.
pub const BAD_SEQLENS: RuleId = RuleId::error("bad-seqlens");
/// `bad-page-table`: a page-table entry, of a page a sequence's keys lie in, outside the pool.
pub const BAD_PAGE_TABLE: RuleId = RuleId::error("bad-page-table");
/// `bad-eps`: an epsilon that is not positive and finite.
pub const BAD_EPS: RuleId = RuleId::error("bad-eps");
/// `bad-activation`: an activation name that is not known.
pub const BAD_ACTIVATION: RuleId = RuleId::error("bad-activation");
/// `bad-layout`: a tensor layout name that is not known.
pub const BAD_LAYOUT: RuleId = RuleId::error("bad-layout");
/// `head-dim-unsupported`: an attention head dim other than 64 and 128.
pub const HEAD_DIM_UNSUPPORTED: RuleId = RuleId::error("head-dim-unsupported");
/// `gqa-heads`: key/value heads that do not divide the query heads.
pub const GQA_HEADS: RuleId = RuleId::error("gqa-heads");
/// `too-large`: a problem past the kernels' 32-bit indices.
pub const TOO_LARGE: RuleId = RuleId::error("too-large");

// The `ck` command.
/// `usage`: bad command-line arguments.
pub const USAGE: RuleId = RuleId::error("usage");
/// `io`: a file that cannot be read or written.
pub const IO: RuleId = RuleId::error("io");
/// `npy`: an .npy file the command cannot use.
pub const NPY: RuleId = RuleId::error("npy");
/// `dtype`: an element type the command does not take.
pub const DTYPE: RuleId = RuleId::error("dtype");
/// `backend`: a backend name that is not emu or cuda.
pub const BACKEND: RuleId = RuleId::error("backend");
/// `peers`: a peers file that cannot be used.
pub const PEERS: RuleId = RuleId::error("peers");
/// `new-exists`: `ck new` into a folder that exists.
pub const NEW_EXISTS: RuleId = RuleId::error("new-exists");
/// `cross-backend-mismatch`: emulator and GPU disagree.
pub const CROSS_BACKEND_MISMATCH: RuleId = RuleId::error("cross-backend-mismatch");
/// `wrong-result`: a check that failed against its reference.
pub const WRONG_RESULT: RuleId = RuleId::error("wrong-result");
/// `mismatch`: outputs that do not match.
pub const MISMATCH: RuleId = RuleId::error("mismatch");
/// `internal`: a bug in ck itself.
pub const INTERNAL: RuleId = RuleId::error("internal");

// Building PTX (`ck build-ptx`, `ck-build`).
/// `manifest-invalid`: a Cargo manifest that cannot be read.
pub const MANIFEST_INVALID: RuleId = RuleId::error("manifest-invalid");
/// `manifest-not-found`: no Cargo manifest.
pub const MANIFEST_NOT_FOUND: RuleId = RuleId::error("manifest-not-found");
/// `no-ptx-toolchain`: the PTX toolchain is missing.
pub const NO_PTX_TOOLCHAIN: RuleId = RuleId::error("no-ptx-toolchain");
/// `ptx-build`: cargo failed to build the kernel crate.
pub const PTX_BUILD: RuleId = RuleId::error("ptx-build");
/// `ptx-compile`: the kernel crate does not compile for nvptx64.
pub const PTX_COMPILE: RuleId = RuleId::error("ptx-compile");
/// `ptx-kernel-info`: a kernel's recorded information cannot be read.
pub const PTX_KERNEL_INFO: RuleId = RuleId::error("ptx-kernel-info");
/// `ptx-needs-feature`: the kernel crate needs a feature for nvptx64.
pub const PTX_NEEDS_FEATURE: RuleId = RuleId::error("ptx-needs-feature");
/// `ptx-needs-no-std`: the kernel crate is not no_std for nvptx64.
pub const PTX_NEEDS_NO_STD: RuleId = RuleId::error("ptx-needs-no-std");
/// `ptx-uses-std`: the kernel crate uses std on nvptx64.
pub const PTX_USES_STD: RuleId = RuleId::error("ptx-uses-std");
/// `ptx-no-kernels`: a module without kernels.
pub const PTX_NO_KERNELS: RuleId = RuleId::error("ptx-no-kernels");
/// `ptx-no-lib`: a crate without a library target.
pub const PTX_NO_LIB: RuleId = RuleId::error("ptx-no-lib");
/// `ptx-spill`: a kernel that spills registers without launch bounds.
pub const PTX_SPILL: RuleId = RuleId::error("ptx-spill");
/// `ptx-registers`: a kernel whose registers for its declared block pass an SM's register file.
pub const PTX_REGISTERS: RuleId = RuleId::error("ptx-registers");
/// `ptxas`: ptxas rejected the module.
pub const PTXAS: RuleId = RuleId::error("ptxas");
/// `wgmma-serialized`: ptxas serialised a kernel's wgmma instructions.
pub const WGMMA_SERIALIZED: RuleId = RuleId::error("wgmma-serialized");

// From Python (`ck-python`, `ck_rs`).
/// `not-a-tensor`: an argument that is not a DLPack tensor.
pub const NOT_A_TENSOR: RuleId = RuleId::error("not-a-tensor");
/// `dtype-unsupported`: a tensor element type the kernels do not take.
pub const DTYPE_UNSUPPORTED: RuleId = RuleId::error("dtype-unsupported");
/// `dtype-mismatch`: a tensor of another element type than the kernel's.
pub const DTYPE_MISMATCH: RuleId = RuleId::error("dtype-mismatch");
/// `device-mismatch`: tensors on different devices.
pub const DEVICE_MISMATCH: RuleId = RuleId::error("device-mismatch");
/// `device-unsupported`: a tensor in memory the kernels cannot use.
pub const DEVICE_UNSUPPORTED: RuleId = RuleId::error("device-unsupported");
/// `not-contiguous`: a tensor that is not row-major contiguous.
pub const NOT_CONTIGUOUS: RuleId = RuleId::error("not-contiguous");
/// `unknown-argument`: a tensor name the call was not given.
pub const UNKNOWN_ARGUMENT: RuleId = RuleId::error("unknown-argument");
/// `no-stream`: a CUDA call without a stream.
pub const NO_STREAM: RuleId = RuleId::error("no-stream");
/// `read-only`: a read-only array given as an output.
pub const READ_ONLY: RuleId = RuleId::error("read-only");
/// `kind-mismatch`: outputs of another kind (numpy, torch) than the inputs.
pub const KIND_MISMATCH: RuleId = RuleId::error("kind-mismatch");
/// `no-backward`: a tensor that requires grad given to an operator without a backward (its
/// gradient would be dropped).
pub const NO_BACKWARD: RuleId = RuleId::error("no-backward");
/// `no-double-backward`: a second derivative through a backward operator, which has no
/// backward of its own.
pub const NO_DOUBLE_BACKWARD: RuleId = RuleId::error("no-double-backward");

/// Every rule, for lookups and the test that every `error[...]` in the sources names one.
pub const ALL: &[RuleId] = &[
    LENGTH_NOT_POSITIVE,
    EMPTY_X,
    EMPTY_H,
    NO_Y,
    LIST_LENGTH_MISMATCH,
    INDEX_OUT_OF_RANGE,
    Y_MAPS_TO_R,
    EMPTY_P,
    P_COUNT,
    CLAIMED_TWICE,
    UNCLAIMED,
    WARP_SIZE_MISMATCH,
    BLOCK_SIZE_MISMATCH,
    SHAPE_MISMATCH,
    CAPACITY_EXCEEDED,
    TILE_TOO_LARGE,
    SLICE_THROUGH_P,
    SLICE_NOT_FACTOR,
    R_UNOWNED,
    UNCLAIMED_UNIT,
    UNKNOWN_NAME,
    UNKNOWN_FIELD,
    MISSING_FIELD,
    DUPLICATE_FIELD,
    DUPLICATE_NAME,
    MIXED_SPELLING,
    SYNTAX,
    UNSUPPORTED_GENERIC,
    PARAMETRIC_ENCODING,
    NEGATIVE_PARAMETER,
    EMPTY_LIST,
    XOR_NOT_POWER_OF_TWO,
    SLICE_OUT_OF_RANGE,
    INDEX_OVERFLOW,
    SFC_NOT_DIVISIBLE,
    SFC_ORDER_NOT_PERMUTATION,
    ADAPTOR_ARITY,
    ADAPTOR_HIDDEN_REUSED,
    ADAPTOR_ORDER,
    ADAPTOR_TOP_BOTTOM,
    ADAPTOR_DANGLING,
    ADAPTOR_IDS_NOT_PERMUTATION,
    CHAIN_MISMATCH,
    DESCRIPTOR_BOTTOM,
    LDS_K_PACK,
    LDS_MLDS_LAYER,
    LDS_BANK_CONFLICT,
    SWIZZLE_BITS,
    KERNEL_ARGUMENT,
    KERNEL_OPTIONS,
    KERNEL_SIGNATURE,
    BLOCK_SIZE,
    SHARED_SYNTAX,
    SHARED_OUTSIDE_KERNEL,
    SHARED_MEMORY,
    STATIC_FOR_STEP,
    STATIC_FOR_TOO_LONG,
    REDUCE_X,
    REDUCE_TYPE,
    REDUCE_SCRATCH,
    REDUCE_ACROSS_WARPS,
    SHUFFLE_MISMATCH,
    WINDOW_RANK,
    WARP_SIZE,
    SETMAXNREG,
    OUT_OF_BOUNDS,
    MISALIGNED_ACCESS,
    SHARED_RACE,
    BARRIER_DIVERGENCE,
    WARP_DIVERGENCE,
    DEADLOCK,
    KERNEL_PANIC,
    FOREIGN_HANDLE,
    EMULATOR_UNMODELLED,
    BARRIER_MISUSE,
    GRID_SIZE,
    ARGUMENT_SIZE,
    ARGUMENT_DEVICE,
    MISALIGNED_BUFFER,
    TENSOR_MAP,
    NO_GPU,
    NO_PTX,
    PTX_MODULE,
    CUDA,
    UNKNOWN_KERNEL,
    PROBE_PARAMETERS,
    SHAPE_UNSUPPORTED,
    BAD_SCALE,
    BAD_SEQLENS,
    BAD_PAGE_TABLE,
    BAD_EPS,
    BAD_ACTIVATION,
    BAD_LAYOUT,
    HEAD_DIM_UNSUPPORTED,
    GQA_HEADS,
    TOO_LARGE,
    USAGE,
    IO,
    NPY,
    DTYPE,
    BACKEND,
    PEERS,
    NEW_EXISTS,
    CROSS_BACKEND_MISMATCH,
    WRONG_RESULT,
    MISMATCH,
    INTERNAL,
    MANIFEST_INVALID,
    MANIFEST_NOT_FOUND,
    NO_PTX_TOOLCHAIN,
    PTX_BUILD,
    PTX_COMPILE,
    PTX_KERNEL_INFO,
    PTX_NEEDS_FEATURE,
    PTX_NEEDS_NO_STD,
    PTX_USES_STD,
    PTX_NO_KERNELS,
    PTX_NO_LIB,
    PTX_SPILL,
    PTX_REGISTERS,
    PTXAS,
    WGMMA_SERIALIZED,
    NOT_A_TENSOR,
    DTYPE_UNSUPPORTED,
    DTYPE_MISMATCH,
    DEVICE_MISMATCH,
    DEVICE_UNSUPPORTED,
    NOT_CONTIGUOUS,
    UNKNOWN_ARGUMENT,
    NO_STREAM,
    READ_ONLY,
    KIND_MISMATCH,
    NO_BACKWARD,
    NO_DOUBLE_BACKWARD,
];
