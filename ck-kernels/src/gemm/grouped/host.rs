//! Host side of the grouped GEMM: where each problem's operands lie in the shared buffers, the
//! table the kernel reads, the checks and the launch.
//!
//! ```
//! use ck_core::device::Bf16;
//! use ck_core::host::Device;
//! use ck_kernels::gemm::fused::HostEpilogue;
//! use ck_kernels::gemm::grouped::host::{GroupedGemm, Operand, Problem};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Device::emulator();
//! // Two experts of a mixture-of-experts layer, 3 and 5 tokens, and a 1 × 1 × 1 problem.
//! let problems = [Problem::new(3, 16, 8), Problem::new(5, 16, 8), Problem::new(1, 1, 1)];
//! let grouped = GroupedGemm::new(&device, &problems)?;
//! let a: Vec<Vec<f32>> = problems.iter().map(|p| vec![1.0; (p.m * p.k) as usize]).collect();
//! let b: Vec<Vec<f32>> = problems.iter().enumerate()
//!     .map(|(g, p)| vec![g as f32 + 1.0; (p.k * p.n) as usize]).collect();
//! let (a, b) = (grouped.pack(Operand::A, &a)?, grouped.pack(Operand::B, &b)?);
//! let (c, _) = grouped.gemm_on_host_values::<Bf16>(&device, (&a, &b), HostEpilogue::default())?;
//! let c = grouped.unpack(Operand::C, &c)?;
//! // C_g = A_g · B_g: k ones times (g + 1).
//! assert_eq!((c[0][0], c[1][79], c[2][0]), (8.0, 16.0, 3.0));
//! # Ok(()) }
//! ```

use super::*;
use crate::gemm::fused::{
    check_scales, run_with_host_epilogue, upload, EpilogueArgs, GemmOutput, HostEpilogue,
};
use crate::gemm::tma::grouped::field as row_field;
use crate::gemm::tma::host::{k_major_map, TmaGemm};
use crate::gemm::tma::{
    Bf16NkOperands, Bf16Operands, GemmTmaGroupedBf16, GemmTmaGroupedBf16F32, GemmTmaGroupedBf16Nk,
    GemmTmaGroupedBf16NkF32, Width, N256, THREADS,
};
use crate::gemm::wgmma::whole_vector_rows;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats, TensorMap};
use ck_core::rules;

/// One problem of a grouped GEMM: `[m, k]` A times `[k, n]` B, row-major.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem {
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

impl Problem {
    pub const fn new(m: u32, n: u32, k: u32) -> Self {
        Problem { m, n, k }
    }

    /// Elements of `operand`: `m·k` (A), `k·n` (B), `m·n` (C and D), `n` (bias).
    pub const fn len(&self, operand: Operand) -> u64 {
        let (m, n, k) = (self.m as u64, self.n as u64, self.k as u64);
        match operand {
            Operand::A => m * k,
            Operand::B => k * n,
            Operand::C => m * n,
            Operand::Bias => n,
        }
    }
}

/// The buffers a grouped GEMM reads and writes; D lies like C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    A,
    B,
    C,
    Bias,
}

const OPERANDS: [Operand; 4] = [Operand::A, Operand::B, Operand::C, Operand::Bias];

/// Each problem's operands start on an 8-element boundary of their buffer (16 bytes of bf16,
/// 32 of f32), as the kernels' row vectors need.
pub const ALIGN: u32 = 8;

/// A list of problems laid out in shared buffers, with their table on the device: made once,
/// launched any number of times.
///
/// Problem `g`'s operands follow problem `g − 1`'s in each buffer, at the next multiple of
/// [`ALIGN`] elements. Where every N and K is a multiple of 8 that is plain concatenation:
/// a mixture-of-experts layer's tokens `[Σ m_g, k]`, its experts' weights `[groups, k, n]` and
/// its output `[Σ m_g, n]` are the buffers as they are.
pub struct GroupedGemm {
    problems: Vec<Problem>,
    /// Per problem, the offsets of A, B, C and the bias.
    offsets: Vec<[u32; 4]>,
    /// Elements of each buffer.
    lens: [u32; 4],
    tiles: u32,
    /// Every problem's N and K are multiples of 8: the kernels without element copies run.
    vector_rows: bool,
    /// [`super::field`]'s table; none when there are no tiles.
    table: Option<DeviceBuffer<u32>>,
    /// The TMA kernels' row tiles, where every problem has the same N and K.
    row_tiles: Option<RowTiles>,
}

/// A group whose problems share N and K (multiples of 8, K > 0) and have rows, as the TMA
/// kernels see it ([`crate::gemm::tma::grouped`]): A `[rows, k]`, B `[groups, k, n]`, C
/// `[rows, n]`, and the table of its `count` row tiles.
struct RowTiles {
    table: DeviceBuffer<u32>,
    count: u32,
    rows: u32,
    groups: u32,
    n: u32,
    k: u32,
    /// The problems with rows have [`TMA_MIN_ROWS`] on average: [`GroupedGemm::launch`] takes
    /// the TMA kernel for alpha alone.
    deep: bool,
}

/// Rows per problem (on average over the problems with rows) from which the TMA kernel runs a
/// group. Each problem's B is read once per row tile, so a problem of `m` rows does `m` FLOP
/// per byte of B: under ~300 (an H100's 990 TFLOP/s over 3.35 TB/s) the group is bound by
/// reading the weights, and there the `cp.async` kernel read them faster on an H100 (64
/// experts of 121 rows on average, N = K = 2048: 0.225 ms against 0.243); above, the TMA
/// kernel computes faster (8 experts of 2048 rows, N = K = 4096: 0.78–0.82 ms against
/// 0.89–0.92). `ck bench gemm --dtypes grouped_bf16` times both kernels on every case.
pub const TMA_MIN_ROWS: u32 = 256;

/// The TMA kernels' row table for problems of `ms` rows (see [`crate::gemm::tma::grouped`]):
/// each problem's rows in 128-row tiles, field by field.
pub fn row_table(ms: &[u32]) -> Vec<u32> {
    let mut tiles: Vec<[u32; row_field::COUNT as usize]> = Vec::new();
    let mut start = 0;
    for (g, &m) in ms.iter().enumerate() {
        let end = start + m;
        tiles.extend(
            (start..end)
                .step_by(BM as usize)
                .map(|first| [first, end, g as u32]),
        );
        start = end;
    }
    (0..row_field::COUNT as usize)
        .flat_map(|f| tiles.iter().map(move |t| t[f]))
        .collect()
}

impl RowTiles {
    /// The row tiles of `problems` if they share N and K (multiples of 8, K > 0), have rows,
    /// and their tiles fit the kernels' 32-bit indices; else none.
    fn new(device: &Device, problems: &[Problem]) -> Result<Option<RowTiles>, LaunchError> {
        let Some(&Problem { n, k, .. }) = problems.first() else {
            return Ok(None);
        };
        let rows: u64 = problems.iter().map(|p| p.m as u64).sum();
        let count: u64 = problems.iter().map(|p| p.m.div_ceil(BM) as u64).sum();
        let shared = problems.iter().all(|p| (p.n, p.k) == (n, k));
        let fits = (row_field::COUNT as u64 * count).max(count * n.div_ceil(N256::BN) as u64)
            <= u32::MAX as u64
            && rows <= u32::MAX as u64;
        if !shared || !whole_vector_rows(n, k) || k == 0 || n == 0 || rows == 0 || !fits {
            return Ok(None);
        }
        let ms: Vec<u32> = problems.iter().map(|p| p.m).collect();
        let with_rows = ms.iter().filter(|&&m| m > 0).count() as u64;
        Ok(Some(RowTiles {
            table: DeviceBuffer::from_slice(device, &row_table(&ms))?,
            count: count as u32,
            rows: rows as u32,
            groups: problems.len() as u32,
            n,
            k,
            deep: rows >= TMA_MIN_ROWS as u64 * with_rows,
        }))
    }

    /// `C = alpha · A·B` for every problem on the TMA kernel writing `O`: a persistent grid;
    /// B `[groups, K, N]`, or `[groups, N, K]` where `nk`.
    fn launch<O: GroupedOutput>(
        &self,
        device: &Device,
        (a, b): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
        c: &mut DeviceBuffer<O>,
        alpha: f32,
        nk: bool,
    ) -> Result<LaunchStats, LaunchError> {
        let (n, k) = (self.n, self.k);
        let a_map = k_major_map(a, (k, self.rows, 1), BM)?;
        let b_map = match nk {
            true => <Bf16NkOperands as TmaGemm<Bf16>>::b_map(b, (k, n, self.groups))?,
            false => <Bf16Operands as TmaGemm<Bf16>>::b_map(b, (k, n, self.groups))?,
        };
        let tiles = self.count * n.div_ceil(N256::BN);
        let cfg = LaunchConfig::new(tiles.min(device.multiprocessors()), THREADS);
        let rows = (&self.table, self.count);
        O::launch_grouped_tma(device, cfg, (&a_map, &b_map), c, rows, (n, k, alpha), nk)
    }
}

impl GroupedGemm {
    /// Lays out `problems` and uploads their table to `device`. Errors: `argument-size` when a
    /// buffer would pass 2³² elements or the grid 2³² blocks.
    pub fn new(device: &Device, problems: &[Problem]) -> Result<GroupedGemm, LaunchError> {
        let too_large = |what: String| {
            LaunchError::invalid(
                rules::ARGUMENT_SIZE,
                format!("{what} exceeds the kernels' 32-bit indices; split the group into several launches"),
            )
        };
        let mut ends = [0u64; 4];
        let mut tiles = 0u64;
        let mut offsets = Vec::with_capacity(problems.len());
        let mut first_tiles = Vec::with_capacity(problems.len());
        for p in problems {
            let mut at = [0u32; 4];
            for (i, operand) in OPERANDS.into_iter().enumerate() {
                let start = ends[i].next_multiple_of(ALIGN as u64);
                ends[i] = start + p.len(operand);
                if ends[i] > u32::MAX as u64 {
                    return Err(too_large(format!(
                        "the {operand:?} buffer of {} problems",
                        problems.len()
                    )));
                }
                at[i] = start as u32;
            }
            offsets.push(at);
            first_tiles.push(tiles as u32);
            tiles += super::tiles(p.m, p.n) as u64;
            if tiles > u32::MAX as u64 {
                return Err(too_large(format!(
                    "the grid of {} problems",
                    problems.len()
                )));
            }
        }
        let fields: [&dyn Fn(usize) -> u32; field::COUNT as usize] = [
            &|g| first_tiles[g],
            &|g| problems[g].m,
            &|g| problems[g].n,
            &|g| problems[g].k,
            &|g| offsets[g][0],
            &|g| offsets[g][1],
            &|g| offsets[g][2],
            &|g| offsets[g][3],
        ];
        let table: Vec<u32> = fields
            .iter()
            .flat_map(|f| (0..problems.len()).map(f))
            .collect();
        let table = if tiles > 0 {
            Some(DeviceBuffer::from_slice(device, &table)?)
        } else {
            None
        };
        let row_tiles = RowTiles::new(device, problems)?;
        Ok(GroupedGemm {
            problems: problems.to_vec(),
            offsets,
            lens: ends.map(|e| e as u32),
            tiles: tiles as u32,
            vector_rows: problems.iter().all(|p| whole_vector_rows(p.n, p.k)),
            table,
            row_tiles,
        })
    }

    /// The problems, in order.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Where problem `g`'s `operand` starts in its buffer, in elements. Panics if `g` is not
    /// below the number of problems.
    pub fn offset(&self, g: usize, operand: Operand) -> u32 {
        self.offsets[g][operand as usize]
    }

    /// Elements of `operand`'s buffer (C's for D).
    pub fn len(&self, operand: Operand) -> u32 {
        self.lens[operand as usize]
    }

    /// True when there are no problems.
    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }

    /// Every problem's 128 × 256 tiles: the blocks of a `cp.async` kernel's launch, the work of
    /// a TMA kernel's persistent grid.
    pub fn tiles(&self) -> u32 {
        self.tiles
    }

    /// The kernel [`GroupedGemm::launch`] runs for C of `O` and an epilogue of `flags`: where
    /// the problems share N and K, have [`TMA_MIN_ROWS`] rows on average and the epilogue is
    /// alpha alone, the persistent TMA kernel ([`crate::gemm::tma::grouped`]); else the
    /// `cp.async` one, without element copies where every row is whole 16-byte vectors.
    pub fn kernel_name<O: GroupedOutput>(&self, flags: u32) -> &'static str {
        self.kernel_name_on::<O>(self.takes_tma(flags))
    }

    /// The name of the TMA kernel (`tma`) or of the `cp.async` kernel for this group.
    pub fn kernel_name_on<O: GroupedOutput>(&self, tma: bool) -> &'static str {
        O::kernel_names()[if tma { 2 } else { self.vector_rows as usize }]
    }

    /// Whether [`GroupedGemm::launch`] runs the TMA kernel for an epilogue of `flags`.
    fn takes_tma(&self, flags: u32) -> bool {
        flags == 0 && self.row_tiles.as_ref().is_some_and(|r| r.deep)
    }

    /// Whether the TMA kernel can run this group (its problems share N and K) with alpha
    /// alone, whichever [`GroupedGemm::launch`] picks.
    pub fn has_tma(&self) -> bool {
        self.row_tiles.is_some()
    }

    /// One problem's values per entry of `values` placed in `operand`'s buffer (zeros between
    /// problems). Errors: `shape-mismatch` when the count or a length is not the problems'.
    pub fn pack<V: AsRef<[f32]>>(
        &self,
        operand: Operand,
        values: &[V],
    ) -> Result<Vec<f32>, LaunchError> {
        if values.len() != self.problems.len() {
            return Err(LaunchError::invalid(
                rules::SHAPE_MISMATCH,
                format!(
                    "{} {operand:?} operands for {} problems",
                    values.len(),
                    self.problems.len()
                ),
            ));
        }
        let mut out = vec![0.0; self.len(operand) as usize];
        for (g, (p, v)) in self.problems.iter().zip(values).enumerate() {
            let v = v.as_ref();
            if v.len() as u64 != p.len(operand) {
                return Err(LaunchError::invalid(
                    rules::SHAPE_MISMATCH,
                    format!(
                        "problem {g} ({}×{}×{}): {operand:?} has {} elements, not {}",
                        p.m,
                        p.n,
                        p.k,
                        v.len(),
                        p.len(operand)
                    ),
                ));
            }
            let at = self.offset(g, operand) as usize;
            out[at..at + v.len()].copy_from_slice(v);
        }
        Ok(out)
    }

    /// Each problem's part of `operand`'s buffer `values`. Errors: `shape-mismatch` unless
    /// `values` has [`GroupedGemm::len`] elements.
    pub fn unpack<'v, T>(
        &self,
        operand: Operand,
        values: &'v [T],
    ) -> Result<Vec<&'v [T]>, LaunchError> {
        if values.len() != self.len(operand) as usize {
            return Err(LaunchError::invalid(
                rules::SHAPE_MISMATCH,
                format!(
                    "{operand:?}'s buffer has {} elements; the group's layout has {} (GroupedGemm::len)",
                    values.len(),
                    self.len(operand)
                ),
            ));
        }
        Ok((0..self.problems.len())
            .map(|g| {
                let at = self.offset(g, operand) as usize;
                &values[at..at + self.problems[g].len(operand) as usize]
            })
            .collect())
    }

    /// Every problem's `C_g = act(alpha · A_g·B_g + beta · D_g + bias_g)` in one launch, on
    /// buffers laid out by this group (D like C; the epilogue's alpha, beta and activation are
    /// the same for all problems).
    ///
    /// Errors: `shape-mismatch` when a buffer's length is not the layout's, `bad-scale` for a
    /// non-finite alpha or beta, and the launch's errors.
    pub fn launch<O: GroupedOutput>(
        &self,
        device: &Device,
        ab: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
        c: &mut DeviceBuffer<O>,
        epilogue: &EpilogueArgs<'_, O>,
    ) -> Result<LaunchStats, LaunchError> {
        self.launch_on(self.takes_tma(epilogue.flags()), device, ab, c, epilogue)
    }

    /// [`GroupedGemm::launch`] on the TMA kernel where `tma` and it can run the group with
    /// this epilogue, else on the `cp.async` kernel.
    pub fn launch_on<O: GroupedOutput>(
        &self,
        tma: bool,
        device: &Device,
        (a, b): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
        c: &mut DeviceBuffer<O>,
        epilogue: &EpilogueArgs<'_, O>,
    ) -> Result<LaunchStats, LaunchError> {
        let lens = [
            ("A", Some(a.len()), Operand::A),
            ("B", Some(b.len()), Operand::B),
            ("C", Some(c.len()), Operand::C),
            ("D", epilogue.d.map(|d| d.len()), Operand::C),
            ("bias", epilogue.bias.map(|b| b.len()), Operand::Bias),
        ];
        for (what, len, operand) in lens {
            if let Some(len) = len.filter(|&l| l != self.len(operand) as usize) {
                return Err(LaunchError::invalid(
                    rules::SHAPE_MISMATCH,
                    format!(
                        "{what} has {len} elements; the group's layout needs {} (GroupedGemm::len, GroupedGemm::pack)",
                        self.len(operand)
                    ),
                ));
            }
        }
        check_scales(epilogue)?;
        let Some(table) = &self.table else {
            return Ok(LaunchStats::default());
        };
        if let (Some(row_tiles), true, 0) = (&self.row_tiles, tma, epilogue.flags()) {
            return row_tiles.launch(device, (a, b), c, epilogue.alpha, false);
        }
        let empty = DeviceBuffer::<O>::empty(device)?;
        let d_bias = (
            epilogue.d.unwrap_or(&empty),
            epilogue.bias.unwrap_or(&empty),
        );
        let groups = self.problems.len() as u32;
        O::launch_grouped(
            device,
            self.vector_rows,
            LaunchConfig::new(self.tiles, 256),
            (a, b),
            c,
            d_bias,
            (table, groups),
            (epilogue.alpha, epilogue.beta, epilogue.flags()),
        )
    }

    /// `C_g = alpha · A_g · B_gᵀ` with the experts' weights as `nn.Linear` keeps them: B
    /// `[groups, N, K]` (problem `g`'s `[N, K]` at `g · N · K`), read in place on the TMA kernel
    /// (`gemm_tma_grouped_bf16_nk*`, K-major B as the MMA reads it) — whatever the rows per
    /// problem, since the `cp.async` kernels read `[K, N]` B only. A and C as for
    /// [`GroupedGemm::launch`].
    ///
    /// Errors: `shape-unsupported` where the problems do not share N and K (or those are not
    /// multiples of 8), `shape-mismatch` for a buffer of the wrong length, `bad-scale`.
    pub fn launch_nk<O: GroupedOutput>(
        &self,
        device: &Device,
        (a, b): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
        c: &mut DeviceBuffer<O>,
        alpha: f32,
    ) -> Result<LaunchStats, LaunchError> {
        let epilogue = EpilogueArgs::<O> {
            alpha,
            ..Default::default()
        };
        let lens = [
            ("A", a.len(), Operand::A),
            ("B", b.len(), Operand::B),
            ("C", c.len(), Operand::C),
        ];
        for (what, len, operand) in lens {
            if len != self.len(operand) as usize {
                return Err(LaunchError::invalid(
                    rules::SHAPE_MISMATCH,
                    format!(
                        "{what} has {len} elements; the group's layout needs {}",
                        self.len(operand)
                    ),
                ));
            }
        }
        check_scales(&epilogue)?;
        if self.table.is_none() {
            return Ok(LaunchStats::default());
        }
        match &self.row_tiles {
            Some(row_tiles) => row_tiles.launch(device, (a, b), c, alpha, true),
            None => Err(LaunchError::invalid(
                rules::SHAPE_UNSUPPORTED,
                "weights as [groups, N, K] run on the TMA kernel only, which takes groups whose problems share N and K, both multiples of 8 and K > 0, within 2³² rows and tiles; give [K, N] weights to GroupedGemm::launch for any other group".to_string(),
            )),
        }
    }

    /// [`GroupedGemm::launch`] from host values laid out by this group ([`GroupedGemm::pack`]):
    /// A and B rounded to bf16, D and bias (in `epilogue`) to `O`; returns C's buffer widened
    /// to f32 ([`GroupedGemm::unpack`] splits it).
    pub fn gemm_on_host_values<O: GroupedOutput>(
        &self,
        device: &Device,
        (a, b): (&[f32], &[f32]),
        epilogue: HostEpilogue<'_>,
    ) -> Result<(Vec<f32>, LaunchStats), LaunchError> {
        let (ad, bd) = (upload::<Bf16>(device, a)?, upload::<Bf16>(device, b)?);
        run_with_host_epilogue::<O>(
            device,
            self.len(Operand::C) as usize,
            epilogue,
            |c, args| self.launch(device, (&ad, &bd), c, args),
        )
    }
}

/// C's element types with a grouped kernel.
pub trait GroupedOutput: GemmOutput {
    /// The kernels' names: for problems of any shapes, of whole-vector rows, on TMA.
    fn kernel_names() -> [&'static str; 3];
    /// Launches the TMA kernel writing this type on A's and B's maps (B `[groups, N, K]`
    /// where `nk`), the row tiles' table and count, and the shared N and K.
    fn launch_grouped_tma(
        device: &Device,
        cfg: LaunchConfig,
        maps: (&TensorMap<'_, Bf16, 3>, &TensorMap<'_, Bf16, 3>),
        c: &mut DeviceBuffer<Self>,
        rows: (&DeviceBuffer<u32>, u32),
        n_k_alpha: (u32, u32, f32),
        nk: bool,
    ) -> Result<LaunchStats, LaunchError>;
    /// Launches the grouped kernel writing this type: the one without element copies when
    /// `vector_rows` (every problem's N and K multiples of 8).
    #[allow(clippy::too_many_arguments)]
    fn launch_grouped(
        device: &Device,
        vector_rows: bool,
        cfg: LaunchConfig,
        ab: (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
        c: &mut DeviceBuffer<Self>,
        d_bias: (&DeviceBuffer<Self>, &DeviceBuffer<Self>),
        table: (&DeviceBuffer<u32>, u32),
        scalars: (f32, f32, u32),
    ) -> Result<LaunchStats, LaunchError>;
}

macro_rules! grouped_output {
    ($o:ty, $kernel:ident, $any:ident, $tma:ident, $tma_nk:ident, $names:expr) => {
        impl GroupedOutput for $o {
            fn kernel_names() -> [&'static str; 3] {
                $names
            }

            fn launch_grouped_tma(
                device: &Device,
                cfg: LaunchConfig,
                (a, b): (&TensorMap<'_, Bf16, 3>, &TensorMap<'_, Bf16, 3>),
                c: &mut DeviceBuffer<$o>,
                (rows, count): (&DeviceBuffer<u32>, u32),
                (n, k, alpha): (u32, u32, f32),
                nk: bool,
            ) -> Result<LaunchStats, LaunchError> {
                match nk {
                    true => $tma_nk::launch(device, cfg, a, b, c, rows, count, n, k, alpha),
                    false => $tma::launch(device, cfg, a, b, c, rows, count, n, k, alpha),
                }
            }

            fn launch_grouped(
                device: &Device,
                vector_rows: bool,
                cfg: LaunchConfig,
                (a, b): (&DeviceBuffer<Bf16>, &DeviceBuffer<Bf16>),
                c: &mut DeviceBuffer<$o>,
                (d, bias): (&DeviceBuffer<$o>, &DeviceBuffer<$o>),
                (table, groups): (&DeviceBuffer<u32>, u32),
                (alpha, beta, flags): (f32, f32, u32),
            ) -> Result<LaunchStats, LaunchError> {
                if vector_rows {
                    $kernel::launch(
                        device, cfg, a, b, c, d, bias, table, groups, alpha, beta, flags,
                    )
                } else {
                    $any::launch(
                        device, cfg, a, b, c, d, bias, table, groups, alpha, beta, flags,
                    )
                }
            }
        }
    };
}
grouped_output!(
    Bf16,
    GemmGroupedBf16,
    GemmGroupedAnyBf16,
    GemmTmaGroupedBf16,
    GemmTmaGroupedBf16Nk,
    [
        "gemm_grouped_any_bf16",
        "gemm_grouped_bf16",
        "gemm_tma_grouped_bf16"
    ]
);
grouped_output!(
    f32,
    GemmGroupedBf16F32,
    GemmGroupedAnyBf16F32,
    GemmTmaGroupedBf16F32,
    GemmTmaGroupedBf16NkF32,
    [
        "gemm_grouped_any_bf16_f32",
        "gemm_grouped_bf16_f32",
        "gemm_tma_grouped_bf16_f32"
    ]
);
