//! What `#[tile_kernel]` records about a kernel, on every target.

/// Shared memory one block may use on an H100 (227 KiB), in bytes.
pub const MAX_SHARED_BYTES: usize = 227 * 1024;

/// A kernel's name, module, static shared memory and declared launch bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSpec {
    /// The kernel's name (its PTX entry point).
    pub name: &'static str,
    /// The PTX module it is compiled into: its crate's.
    pub module: Module,
    /// The sum of its `shared!` arrays, each 16-byte aligned.
    pub shared_bytes: usize,
    /// The block size it is written for (`#[tile_kernel(block = N)]`), if declared.
    pub block: Option<u32>,
    /// Blocks per SM the compiler must make room for (`#[tile_kernel(min_blocks_per_sm = N)]`):
    /// PTX `.maxntid block` and `.minnctapersm N`, which cap the registers per thread.
    pub min_blocks_per_sm: Option<u32>,
    /// Blocks per thread-block cluster (`#[tile_kernel(cluster = N)]`, PTX
    /// `.reqnctapercluster N, 1, 1`): consecutive blocks `N·c..N·c + N` run together and may
    /// use each other's shared memory; the grid must be a multiple of `N`.
    pub cluster: Option<u32>,
}

/// The PTX module of one kernel crate: every `#[tile_kernel]` of a crate is compiled into one
/// module, `<crate_name>.ptx`, by `ck build-ptx`. On the GPU, each module is loaded once, when the
/// first of its kernels is launched, so kernels of several crates run in one process.
#[derive(Clone, Copy)]
pub struct Module {
    /// The crate's name as rustc spells it (`my_kernels`, not `my-kernels`).
    pub crate_name: &'static str,
    /// The crate's directory when it was compiled: where the fix for a missing module points.
    pub manifest_dir: &'static str,
    /// The module's PTX, deflated, embedded at build time by `ck_build::embed_ptx()` in the
    /// crate's `build.rs` (release builds whose module had been built), else `None`; the
    /// launcher inflates it when the module is first loaded.
    ///
    /// A function rather than the bytes: a `&'static [u8]` in a constant is copied into every
    /// codegen unit (and every crate) that reads the constant, and a module of a few MB
    /// embedded ten times made a 116 MB `ck`. The bytes live in the one function's unit; a
    /// crate built with `codegen-units = 1` holds them once.
    pub embedded: Option<fn() -> &'static [u8]>,
}

/// Two modules are the same crate's: same name and directory (whether each embeds its text is
/// compared, not the functions that hold it, whose addresses mean nothing).
impl PartialEq for Module {
    fn eq(&self, other: &Module) -> bool {
        self.crate_name == other.crate_name
            && self.manifest_dir == other.manifest_dir
            && self.embedded.is_some() == other.embedded.is_some()
    }
}

impl Eq for Module {}

impl core::fmt::Debug for Module {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Module")
            .field("crate_name", &self.crate_name)
            .field("manifest_dir", &self.manifest_dir)
            .field("embedded_bytes", &self.embedded.map(|bytes| bytes().len()))
            .finish()
    }
}

/// The most blocks a cluster may have portably (`#[tile_kernel(cluster = N)]`, 1 to this).
pub const MAX_CLUSTER_BLOCKS: u32 = 8;

/// The version of [`kernel_info`]'s layout, its first word.
pub const KERNEL_INFO_VERSION: u32 = 2;

/// What a kernel crate's PTX module records about each `#[tile_kernel]` for `ck build-ptx`, as
/// the exported static `__ck_kernel_info_<name>`: `[KERNEL_INFO_VERSION, block (0: undeclared),
/// min_blocks_per_sm (0: none), shared_bytes, cluster (0: none)]`. The builder turns these into
/// launch bounds and cluster dimensions on the entry, reports them, and removes the statics
/// from the module.
pub const fn kernel_info(spec: &KernelSpec) -> [u32; 5] {
    const fn or_zero(v: Option<u32>) -> u32 {
        match v {
            Some(v) => v,
            None => 0,
        }
    }
    [
        KERNEL_INFO_VERSION,
        or_zero(spec.block),
        or_zero(spec.min_blocks_per_sm),
        spec.shared_bytes as u32,
        or_zero(spec.cluster),
    ]
}

/// Byte offsets of a kernel's `shared!` arrays of `sizes` bytes, in declaration order, each
/// aligned to 16 bytes (so any vector access of up to 16 bytes can be aligned).
pub const fn shared_offsets<const K: usize>(sizes: [usize; K]) -> [usize; K] {
    let mut offsets = [0; K];
    let mut at = 0;
    let mut k = 0;
    while k < K {
        offsets[k] = at;
        at = (at + sizes[k]).div_ceil(16) * 16;
        k += 1;
    }
    offsets
}

/// Total shared bytes of arrays of `sizes` bytes laid out by [`shared_offsets`].
pub const fn shared_bytes<const K: usize>(sizes: [usize; K]) -> usize {
    if K == 0 {
        return 0;
    }
    let offsets = shared_offsets(sizes);
    (offsets[K - 1] + sizes[K - 1]).div_ceil(16) * 16
}
