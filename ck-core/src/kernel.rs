//! What `#[tile_kernel]` records about a kernel, on every target.

/// Shared memory one block may use on an H100 (227 KiB), in bytes.
pub const MAX_SHARED_BYTES: usize = 227 * 1024;

/// A kernel's name, static shared memory and declared block size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSpec {
    /// The kernel's name (its PTX entry point).
    pub name: &'static str,
    /// The sum of its `shared!` arrays, each 16-byte aligned.
    pub shared_bytes: usize,
    /// The block size it is written for (`#[tile_kernel(block = N)]`), if declared.
    pub block: Option<u32>,
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
