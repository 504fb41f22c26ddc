//! Tiles of the row-wise operators (RMSNorm, LayerNorm): how a block covers rows of N columns,
//! and which tile a row length gets ([`RowTile::for_columns`]).
//!
//! The rule, per element type: N ≤ 1024 → 8 rows per block, one warp per row; N ≤ 4096 → one
//! row of 4096 per block of 128 threads; larger → one row of 8192 per block of 256 threads, the
//! kernel looping over column tiles when N > 8192. Every thread keeps 4–8 independent 16-byte
//! loads in flight; columns past N are padding (read as 0, never written).
//!
//! The backward kernels with parameter gradients have tiles of their own for the same three
//! ranges of N (`Bwd*`, see `backward_tile!`): a thread holds whole rows of its columns, so
//! that its column sums take one register per column instead of one per element.

pub(crate) use crate::op::Dtype;
use ck_core::TileDistribution;
use ck_macros::tile_distribution;

tile_distribution! {
    /// f32, 8 rows × 1024: one warp per row, 32 floats per lane.
    pub struct RowsF32 {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 8], n: [repeat: 8, lane: 32, vec: 4] },
        p: [[m.warp], [n.lane]],
        y: [n.repeat, n.vec],
    }
}

tile_distribution! {
    /// f32, one row of 4096: 4 warps × 32 lanes × 4 × 8 repeats (8 loads in flight per thread).
    pub struct RowF32x4096 {
        warp_size: 32, block_size: 128,
        h: { m: [one: 1], n: [repeat: 8, warp: 4, lane: 32, vec: 4] },
        p: [[n.warp], [n.lane]],
        y: [m.one, n.repeat, n.vec],
    }
}

tile_distribution! {
    /// f32, one row of 8192: 8 warps × 32 lanes × 4 × 8 repeats.
    pub struct RowF32x8192 {
        warp_size: 32, block_size: 256,
        h: { m: [one: 1], n: [repeat: 8, warp: 8, lane: 32, vec: 4] },
        p: [[n.warp], [n.lane]],
        y: [m.one, n.repeat, n.vec],
    }
}

tile_distribution! {
    /// bf16, 8 rows × 1024: one warp per row, 4 × 8 per lane.
    pub struct RowsBf16 {
        warp_size: 32, block_size: 256,
        h: { m: [warp: 8], n: [repeat: 4, lane: 32, vec: 8] },
        p: [[m.warp], [n.lane]],
        y: [n.repeat, n.vec],
    }
}

tile_distribution! {
    /// bf16, one row of 4096: 4 warps × 32 lanes × 8 × 4 repeats.
    pub struct RowBf16x4096 {
        warp_size: 32, block_size: 128,
        h: { m: [one: 1], n: [repeat: 4, warp: 4, lane: 32, vec: 8] },
        p: [[n.warp], [n.lane]],
        y: [m.one, n.repeat, n.vec],
    }
}

tile_distribution! {
    /// bf16, one row of 8192: 8 warps × 32 lanes × 8 × 4 repeats (32 values per thread: with
    /// 64, RMSNorm took 164 registers and LayerNorm spilled).
    pub struct RowBf16x8192 {
        warp_size: 32, block_size: 256,
        h: { m: [one: 1], n: [repeat: 4, warp: 8, lane: 32, vec: 8] },
        p: [[n.warp], [n.lane]],
        y: [m.one, n.repeat, n.vec],
    }
}

/// The backward's tiles: a thread holds `rows` whole rows of its columns as registers (no warp
/// splits the rows), so the per-column sums of `dgamma` (and `dbeta`) collect in the thread
/// before they reach a register of their own: one accumulator per column the thread owns, where
/// the forward's tiles (a warp per row) would need one per element. Each tile comes with its
/// columns (`cols`: the tile reduced over X0, spec §4.4: the accumulators and gamma) and its
/// rows (`rows`: reduced over X1: one register per row, replicated over the row's threads; the
/// forward's statistics).
///
/// For example `BwdRowsBf16x4` (LayerNorm's): 4 rows × 1024 in 128 threads, each thread 8
/// consecutive columns of every row (32 values, four 16-byte loads per input), so 8
/// accumulators instead of the 32 of `RowsBf16`'s warp per row.
macro_rules! backward_tile {
    ($doc:literal $tile:ident, $cols:ident, $rows:ident: block $block:literal,
     rows $r:literal, n [repeat $rep:literal, warp $w:literal, vec $v:literal]) => {
        tile_distribution! {
            #[doc = $doc]
            pub struct $tile {
                warp_size: 32, block_size: $block,
                h: { m: [repeat: $r], n: [repeat: $rep, warp: $w, lane: 32, vec: $v] },
                p: [[n.warp], [n.lane]],
                y: [m.repeat, n.repeat, n.vec],
            }
        }
        tile_distribution! {
            #[doc = concat!("The columns of `", stringify!($tile), "` (reduced over X0).")]
            pub struct $cols {
                warp_size: 32, block_size: $block,
                h: { n: [repeat: $rep, warp: $w, lane: 32, vec: $v] },
                p: [[n.warp], [n.lane]],
                y: [n.repeat, n.vec],
            }
        }
        tile_distribution! {
            #[doc = concat!("The rows of `", stringify!($tile), "` (reduced over X1).")]
            pub struct $rows {
                warp_size: 32, block_size: $block,
                r: [warp: $w, lane: 32],
                h: { m: [repeat: $r] },
                p: [[r.warp], [r.lane]],
                y: [m.repeat],
            }
        }
    };
}

backward_tile! { "f32 backward, 1 row × 1024 in one warp (32 values per lane): no barrier per row tile, and one-warp blocks fill an SM where 256 threads of 210 registers fit once."
BwdRowsF32, BwdRowsF32Cols, BwdRowsF32Rows: block 32, rows 1, n [repeat 8, warp 1, vec 4] }
backward_tile! { "f32 backward, 1 row × 4096 in 128 threads (32 values each)."
BwdRowF32x4096, BwdRowF32x4096Cols, BwdRowF32x4096Rows: block 128, rows 1, n [repeat 8, warp 4, vec 4] }
backward_tile! { "f32 backward, 1 row × 8192 in 256 threads (32 values each)."
BwdRowF32x8192, BwdRowF32x8192Cols, BwdRowF32x8192Rows: block 256, rows 1, n [repeat 8, warp 8, vec 4] }
backward_tile! { "bf16 backward, 1 row × 1024 in one warp (32 values per lane), as `BwdRowsF32`."
BwdRowsBf16, BwdRowsBf16Cols, BwdRowsBf16Rows: block 32, rows 1, n [repeat 4, warp 1, vec 8] }
backward_tile! { "bf16 backward, 4 rows × 1024 in 128 threads (32 values each, 8 column sums): LayerNorm's, whose two column sums per element made the one-row tiles' registers the limit."
BwdRowsBf16x4, BwdRowsBf16x4Cols, BwdRowsBf16x4Rows: block 128, rows 4, n [repeat 1, warp 4, vec 8] }
backward_tile! { "bf16 backward, 1 row × 8192 in 256 threads (32 values each): the `_long` kernels' column tile."
BwdRowBf16x8192, BwdRowBf16x8192Cols, BwdRowBf16x8192Rows: block 256, rows 1, n [repeat 4, warp 8, vec 8] }
backward_tile! { "bf16 backward, 1 row × 4096 in 256 threads (16 values each): 16 column sums a thread where 128 threads held 32 — LayerNorm's 230 registers (two blocks of 128 threads per SM) became 118 (two of 256), and its kernel 6 % faster (H100, ncu, job 119)."
BwdRowBf16x4096c16, BwdRowBf16x4096c16Cols, BwdRowBf16x4096c16Rows: block 256, rows 1, n [repeat 2, warp 8, vec 8] }
backward_tile! { "bf16 backward, 1 row × 8192 in 512 threads (16 values each), as `BwdRowBf16x4096c16`."
BwdRowBf16x8192c16, BwdRowBf16x8192c16Cols, BwdRowBf16x8192c16Rows: block 512, rows 1, n [repeat 2, warp 16, vec 8] }
backward_tile! { "f32 backward, 1 row × 4096 in 256 threads (16 values each), as `BwdRowBf16x4096c16`."
BwdRowF32x4096c16, BwdRowF32x4096c16Cols, BwdRowF32x4096c16Rows: block 256, rows 1, n [repeat 4, warp 8, vec 4] }
backward_tile! { "f32 backward, 1 row × 8192 in 512 threads (16 values each), as `BwdRowBf16x4096c16`."
BwdRowF32x8192c16, BwdRowF32x8192c16Cols, BwdRowF32x8192c16Rows: block 512, rows 1, n [repeat 4, warp 16, vec 4] }

/// Which tile a row length gets (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowTile {
    /// 8 rows × 1024 columns, one warp per row.
    Rows,
    /// One row of 4096 columns, 4 warps.
    Row4096,
    /// One row of 8192 columns (f32: 8 warps, bf16: 4), looping when N > 8192.
    Row8192,
}

impl RowTile {
    /// The tile for rows of `n` columns.
    pub fn for_columns(n: u32) -> RowTile {
        match n {
            0..=1024 => RowTile::Rows,
            1025..=4096 => RowTile::Row4096,
            _ => RowTile::Row8192,
        }
    }

    /// `(rows, columns, threads)` of this tile's distribution for `dtype`.
    fn dims(self, dtype: Dtype) -> (u32, u32, u32) {
        fn of<D: TileDistribution<X = [i32; 2]>>() -> (u32, u32, u32) {
            let [rows, cols] = D::X_LENGTHS;
            (rows as u32, cols as u32, D::BLOCK_SIZE)
        }
        match (dtype, self) {
            (Dtype::F32, RowTile::Rows) => of::<RowsF32>(),
            (Dtype::F32, RowTile::Row4096) => of::<RowF32x4096>(),
            (Dtype::F32, RowTile::Row8192) => of::<RowF32x8192>(),
            (Dtype::Bf16, RowTile::Rows) => of::<RowsBf16>(),
            (Dtype::Bf16, RowTile::Row4096) => of::<RowBf16x4096>(),
            (Dtype::Bf16, RowTile::Row8192) => of::<RowBf16x8192>(),
        }
    }

    /// `(rows per block, threads per block)` of this tile for `dtype`.
    pub fn shape(self, dtype: Dtype) -> (u32, u32) {
        let (rows, _, threads) = self.dims(dtype);
        (rows, threads)
    }

    /// Columns of this tile for `dtype` (a row of exactly this many needs no padding).
    pub fn columns(self, dtype: Dtype) -> u32 {
        self.dims(dtype).1
    }

    /// The launch configuration for `m` rows.
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn launch_config(self, dtype: Dtype, m: u32) -> ck_core::host::LaunchConfig {
        let (rows, block) = self.shape(dtype);
        ck_core::host::LaunchConfig::new(m.div_ceil(rows), block)
    }
}

/// The kernel of an operator for a tile: rows narrower than the tile (`Padded`: columns past N
/// read as padding, the only kernel a tile must have), exactly its width (`Full`: no mask), or
/// longer than [`LONG_ROWS`] (`Long`: the row kept as running statistics and read twice).
/// Without a `Long` kernel, the `Padded` one of [`RowTile::Row8192`] loops over column tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Rows up to the tile's width, padded.
    Padded,
    /// Rows of exactly the tile's width.
    Full,
    /// Rows longer than [`LONG_ROWS`].
    Long,
}

/// Rows longer than this go to an operator's `Long` kernel where it has one.
pub const LONG_ROWS: u32 = 8192;

/// One kernel of a row operator: its tile and variant (CK Tile's instance of a problem).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instance {
    /// The tile ([`RowTile::for_columns`]).
    pub tile: RowTile,
    /// The variant for the row length.
    pub variant: Variant,
}

impl Instance {
    /// The instance for rows of `n` elements of `dtype` among an operator's `instances`: the
    /// tile for `n`; `Full` where `n` is the tile's width and the operator has that kernel,
    /// `Long` where `n` > [`LONG_ROWS`] and it has that one, else `Padded`.
    ///
    /// For example, with bf16 RMSNorm's instances (every tile `Padded` and `Full`): `n = 1000`
    /// → (`Rows`, `Padded`); `n = 4096` → (`Row4096`, `Full`); `n = 20000` → (`Row8192`,
    /// `Padded`), the kernel that loops over column tiles.
    pub fn pick(n: u32, dtype: Dtype, instances: &[Instance]) -> Instance {
        let tile = RowTile::for_columns(n);
        let has = |variant| instances.contains(&Instance { tile, variant });
        let variant = if n == tile.columns(dtype) && has(Variant::Full) {
            Variant::Full
        } else if n > LONG_ROWS && has(Variant::Long) {
            Variant::Long
        } else {
            Variant::Padded
        };
        Instance { tile, variant }
    }
}

/// A row operator's instances as one table: per element type, each instance's kernel (declared
/// by the operator's own kernel macro, `declare`) and the trait `Kernels` that launches an
/// [`Instance`] for that type, so the operator's host code is one generic `launch::<T>`:
///
/// ```text
/// instances! {
///     declare: rmsnorm_kernel,
///     launch(x: &DeviceBuffer<Self>, gamma: &DeviceBuffer<Self>, y: &mut DeviceBuffer<Self>,
///            m: u32, n: u32, eps: f32),
///     f32 {
///         Rows Padded => rmsnorm_f32_rows / RmsnormF32Rows (RowsF32, f32, 4, 256, true),
///         …
///     }
///     Bf16 { … }
/// }
/// ```
///
/// expands to `rmsnorm_kernel!(rmsnorm_f32_rows, RowsF32, f32, 4, 256, true);` for every row and
/// `impl Kernels for f32 { const INSTANCES = [(Rows, Padded), …]; fn launch_instance(…) }`.
macro_rules! instances {
    (
        declare: $declare:ident,
        launch($($arg:ident: $ty:ty),* $(,)?),
        $($types:tt)*
    ) => {
        /// The operator's kernels of one element type, by [`Instance`].
        #[cfg(not(target_arch = "nvptx64"))]
        pub trait Kernels: $crate::op::OpElement {
            /// The instances compiled for this type.
            const INSTANCES: &'static [$crate::rows::plan::Instance];
            /// `(rows, threads)` of `instance`'s tile (its distribution's first X length and
            /// block size), `None` where it is not one of [`Kernels::INSTANCES`].
            fn shape(instance: $crate::rows::plan::Instance) -> Option<(u32, u32)>;
            /// The instance for rows of `n` ([`Instance::pick`]) and its `(rows, threads)`.
            fn pick(
                n: u32,
            ) -> Result<
                ($crate::rows::plan::Instance, (u32, u32)),
                ::ck_core::host::LaunchError,
            > {
                let instance = $crate::rows::plan::Instance::pick(n, Self::DTYPE, Self::INSTANCES);
                let shape = Self::shape(instance).ok_or_else(|| {
                    ::ck_core::host::LaunchError::invalid(
                        ::ck_core::rules::INTERNAL,
                        format!("no {:?} kernel for {instance:?}", Self::DTYPE),
                    )
                })?;
                Ok((instance, shape))
            }
            /// Launches `instance` (one of [`Kernels::INSTANCES`]) with `cfg`.
            #[allow(clippy::too_many_arguments)]
            fn launch_instance(
                instance: $crate::rows::plan::Instance,
                device: &::ck_core::host::Device,
                cfg: ::ck_core::host::LaunchConfig,
                $($arg: $ty),*
            ) -> Result<::ck_core::host::LaunchStats, ::ck_core::host::LaunchError>;
        }

        $crate::rows::plan::instances!(@types $declare, instance,
            (
                instance: $crate::rows::plan::Instance,
                device: &::ck_core::host::Device,
                cfg: ::ck_core::host::LaunchConfig,
                $($arg: $ty),*
            ),
            (device, cfg, $($arg),*),
            $($types)*
        );
    };
    // The parameters and the call's arguments arrive as one token tree each (and the instance's
    // name with them, for hygiene), so that they can be repeated per element type and instance.
    (@types $declare:ident, $instance:ident, $params:tt, $args:tt, $($t:ty {
        $($tile:ident $variant:ident => $name:ident / $launcher:ident ($dist:ident, $($kernel:tt)*)),* $(,)?
    })*) => {
        $($($declare!($name, $dist, $($kernel)*);)*)*

        $(
            #[cfg(not(target_arch = "nvptx64"))]
            impl Kernels for $t {
                const INSTANCES: &'static [$crate::rows::plan::Instance] = &[$(
                    $crate::rows::plan::Instance {
                        tile: $crate::rows::plan::RowTile::$tile,
                        variant: $crate::rows::plan::Variant::$variant,
                    }
                ),*];

                fn shape(instance: $crate::rows::plan::Instance) -> Option<(u32, u32)> {
                    use $crate::rows::plan::{RowTile, Variant};
                    match (instance.tile, instance.variant) {
                        $((RowTile::$tile, Variant::$variant) =>
                            Some((
                                <$dist as ::ck_core::TileDistribution>::X_LENGTHS[0] as u32,
                                <$dist as ::ck_core::TileDistribution>::BLOCK_SIZE,
                            )),)*
                        _ => None,
                    }
                }

                #[allow(clippy::too_many_arguments)]
                fn launch_instance $params
                    -> Result<::ck_core::host::LaunchStats, ::ck_core::host::LaunchError>
                {
                    use $crate::rows::plan::{RowTile, Variant};
                    match ($instance.tile, $instance.variant) {
                        $((RowTile::$tile, Variant::$variant) => $launcher::launch $args,)*
                        _ => Err(::ck_core::host::LaunchError::invalid(
                            ::ck_core::rules::INTERNAL,
                            format!("no {} kernel for {:?}", stringify!($t), $instance),
                        )),
                    }
                }
            }
        )*
    };
}
pub(crate) use instances;
