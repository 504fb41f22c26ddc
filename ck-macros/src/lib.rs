//! Proc-macro entry points of ck-rs. Each is a thin wrapper over the `ck-dsl` front end, which
//! parses, checks, lowers and emits; keeping the logic there makes it unit-testable and shared
//! with the `ck` command.

use proc_macro::TokenStream;

/// Declares a tile distribution: how a tile is spread over the threads of a block (P) and the
/// registers of each thread (Y), in CK Tile's R/H/P/Y encoding. Every mistake is reported at
/// the offending token with a rule name; the expansion is straight-line index arithmetic.
///
/// Two spellings. CK's raw lists:
/// ```
/// use ck_macros::tile_distribution;
/// tile_distribution! {
///     /// RMSNorm X tile (CK wave64 layout, spec TV1).
///     pub struct RmsX {
///         warp_size: 64,
///         block_size: 256,
///         r: [],
///         h: [[2, 2, 4, 1], [2, 2, 16, 8]],
///         p_major: [[1, 2], [1, 2]],
///         p_minor: [[1, 1], [2, 2]],
///         y_major: [1, 1, 2, 2],
///         y_minor: [0, 3, 0, 3],
///     }
/// }
/// assert_eq!(RmsX::X_LENGTHS, [16, 512]);
/// // warp 3, lane 63, last register: the tile's far corner.
/// assert_eq!(RmsX::x_index(RmsX::partition_index(255), [1, 0, 1, 7]), [15, 511]);
/// assert_eq!(RmsX::d_index([1, 0, 1, 7]), 31);
/// ```
/// Named components (the same encoding re-derived for 32-lane NVIDIA warps, spec TV1c):
/// ```
/// use ck_macros::tile_distribution;
/// tile_distribution! {
///     pub struct RmsX32 {
///         warp_size: 32,
///         block_size: 128,
///         h: { m: [repeat: 2, warp: 2, lane: 2, vec: 1], n: [repeat: 2, warp: 2, lane: 16, vec: 8] },
///         p: [[m.warp, n.warp], [m.lane, n.lane]],
///         y: [m.repeat, m.vec, n.repeat, n.vec],
///     }
/// }
/// assert_eq!(RmsX32::x_index([3, 31], [1, 0, 1, 7]), [7, 511]);
/// ```
/// A wrong encoding does not compile:
/// ```compile_fail
/// use ck_macros::tile_distribution;
/// tile_distribution! {
///     pub struct Bad {
///         warp_size: 32,
///         h: { m: [lane: 32, row: 4] },
///         p: [[m.lane]],
///         y: [],
///     }
/// }
/// ```
#[proc_macro]
pub fn tile_distribution(input: TokenStream) -> TokenStream {
    ck_dsl::tile_distribution(input.into()).into()
}

/// `static_for!(i in 0..4 => { body })`: one copy of `body` per value, `i` a constant in each.
///
/// ```
/// use ck_macros::static_for;
/// let mut regs = [0i32; 4];
/// static_for!(i in 0..4 => { regs[i] = (i * i) as i32; });
/// assert_eq!(regs, [0, 1, 4, 9]);
/// let mut sum = 0;
/// static_for!(k: i32 in 0..=12 step 4 => { sum += k; });
/// assert_eq!(sum, 0 + 4 + 8 + 12);
/// ```
#[proc_macro]
pub fn static_for(input: TokenStream) -> TokenStream {
    ck_dsl::static_for::expand(input.into()).into()
}

/// Turns a function into a kernel: a typed host launcher (`Name::launch(&device, cfg, args..)`)
/// that runs it on the emulator, and an `extern "ptx-kernel"` entry on `nvptx64`. Arguments are
/// `Global<T>` (read-only buffer), `GlobalMut<T>` (writable buffer) or scalars; `shared!(T; N)`
/// declares block-shared arrays. Options: `block = N`, `distributions(A, ..)`.
///
/// ```
/// use ck_core::device::*;
/// use ck_core::host::{Device, DeviceBuffer, LaunchConfig};
/// use ck_macros::tile_kernel;
///
/// /// Reverses each block's 64 elements through shared memory.
/// #[tile_kernel(block = 64)]
/// fn reverse(input: Global<f32>, output: GlobalMut<f32>) {
///     let tile = shared!(f32; 64);
///     let t = thread_idx();
///     let base = block_idx() * block_dim();
///     tile.store(t, input.load(base + t));
///     block_sync();
///     output.store(base + t, tile.load(block_dim() - 1 - t));
/// }
///
/// let device = Device::emulator();
/// let x: Vec<f32> = (0..128).map(|i| i as f32).collect();
/// let input = DeviceBuffer::from_slice(&device, &x).unwrap();
/// let mut output = DeviceBuffer::zeros(&device, 128).unwrap();
/// Reverse::launch(&device, LaunchConfig::new(2, 64), &input, &mut output).unwrap();
/// assert_eq!(output.to_vec().unwrap()[0], 63.0);
/// assert_eq!(Reverse::SPEC.shared_bytes, 256);
/// ```
#[proc_macro_attribute]
pub fn tile_kernel(args: TokenStream, item: TokenStream) -> TokenStream {
    ck_dsl::kernel::expand(args.into(), item.into()).into()
}
