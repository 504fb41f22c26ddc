//! The TMA GEMM kernels: one `#[tile_kernel]` per operand type, C type and epilogue, each
//! [`super::gemm_tma`]'s body with its shared memory cut into parts (see the parent module).

use super::*;
use crate::rope::{Projection, Rotary};

/// [`gemm_tma`] on operands `$p` writing `$o`, its shared region cut by [`Region`] with `$boxes`
/// C box buffers per consumer warp, for the epilogue `$epi`, sharing tiles out where
/// `stream_k`; then the body's arguments.
macro_rules! gemm_tma_in_region {
    ($p:ty, $o:ty, $boxes:expr, $epi:expr, stream_k: $sk:expr, $($arg:expr),+ $(,)?) => {
        gemm_tma::<
            $p,
            $o,
            _,
            _,
            _,
            { $epi },
            { $sk },
            { Region::<$p, $o, { $boxes }>::ELEMS },
            { Region::<$p, $o, { $boxes }>::A_ELEMS },
            { Region::<$p, $o, { $boxes }>::B_AT },
            { Region::<$p, $o, { $boxes }>::B_ELEMS },
            { Region::<$p, $o, { $boxes }>::C_AT },
            { Region::<$p, $o, { $boxes }>::C_ELEMS },
        >($($arg),+)
    };
}

/// Declares a TMA GEMM kernel on operands `$p` (element types `$a`, `$b`) writing `$o` through
/// the C argument `[$c]` (`TmaMut<Bf16, 3>` or `GlobalMut<f32>`: [`TmaOutput::Dest`]), with
/// alpha alone (`plain`: a kernel without the epilogue's other paths — their code and registers
/// cost the plain GEMM 10–17 % at K = 1024 although never taken) or the epilogue of the flags
/// `fused: EPI` (compile-time flags, or [`RUNTIME_FLAGS`] for the kernel argument's). The two
/// arms differ in their arguments and repeat the `shared!` declarations, which `#[tile_kernel]`
/// finds in the function's own tokens only (not in a macro call there); [`gemm_tma`] cuts the
/// region into its parts.
macro_rules! tma_gemm_kernel {
    ($(#[$doc:meta])* $name:ident, $p:ty, $a:ty, $b:ty, $o:ty, [$($c:tt)+], fused: $epi:expr) => {
        $(#[$doc])*
        #[tile_kernel(block = 384, min_blocks_per_sm = 1)]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            a: Tma<$a, 3>,
            b: Tma<$b, 3>,
            c: $($c)+,
            d: Global<$o>,
            bias: Global<$o>,
            m: u32,
            n: u32,
            k: u32,
            batch: u32,
            alpha: f32,
            beta: f32,
            flags: u32,
            parts: GlobalMut<f32>,
            tickets: GlobalMut<u32>,
            sk_tiles: u32,
        ) {
            const EPI: u32 = $epi;
            let epilogue = Epilogue::of(alpha, beta, (d, bias), flags);
            let shared = (
                shared!($a; Region::<$p, $o, C_BUFFERS>::ELEMS),
                shared!(Mbarrier; BARRIERS),
                shared!($o; BIAS_STAGE),
                shared!(u32; 1),
            );
            gemm_tma_in_region!($p, $o, C_BUFFERS, EPI, stream_k: true, (a, b), (c, epilogue, DLoads), (batched::<$p>((m, n, k, batch)), (parts, tickets, sk_tiles)), shared);
        }
    };
    ($(#[$doc:meta])* $name:ident, $p:ty, $a:ty, $b:ty, $o:ty, [$($c:tt)+], residual: $epi:expr) => {
        $(#[$doc])*
        #[tile_kernel(block = 384, min_blocks_per_sm = 1)]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            a: Tma<$a, 3>,
            b: Tma<$b, 3>,
            c: $($c)+,
            d: Tma<$o, 3>,
            bias: Global<$o>,
            m: u32,
            n: u32,
            k: u32,
            batch: u32,
            alpha: f32,
            beta: f32,
            flags: u32,
        ) {
            // C is staged where D arrived (see `DRing`): no C staging of its own.
            const EPI: u32 = $epi;
            // D is copied whatever the flags say: it is applied whatever they say.
            let flags = flags | HAS_D;
            let epilogue = Epilogue::of(alpha, beta, (Global::<$o>::empty(), bias), flags);
            let shared = (
                shared!($a; Region::<$p, $o, 0>::ELEMS),
                shared!(Mbarrier; BARRIERS),
                shared!($o; BIAS_STAGE),
                shared!(u32; 1),
            );
            let ring = shared.0.part::<$b, { Region::<$p, $o, 0>::B_AT }, { Region::<$p, $o, 0>::B_ELEMS }>();
            let width = core::marker::PhantomData::<<$p as Operands>::W>;
            let dsrc = DRing { map: d, ring, bars: shared.1, width };
            // D comes through the ring after a tile's K stages: every tile whole.
            let (none_f32, none_u32) = (GlobalMut::<f32>::empty(), GlobalMut::<u32>::empty());
            gemm_tma_in_region!($p, $o, 0, EPI, stream_k: false, (a, b), (c, epilogue, dsrc), (batched::<$p>((m, n, k, batch)), (none_f32, none_u32, 0)), shared);
        }
    };
    ($(#[$doc:meta])* $name:ident, $p:ty, $a:ty, $b:ty, $o:ty, [$($c:tt)+], plain) => {
        $(#[$doc])*
        #[tile_kernel(block = 384, min_blocks_per_sm = 1)]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            a: Tma<$a, 3>,
            b: Tma<$b, 3>,
            c: $($c)+,
            m: u32,
            n: u32,
            k: u32,
            batch: u32,
            alpha: f32,
            parts: GlobalMut<f32>,
            tickets: GlobalMut<u32>,
            sk_tiles: u32,
        ) {
            // Only alpha is read (`EPI` is 0): D and bias are never touched.
            const EPI: u32 = 0;
            let none = Global::<$o>::empty();
            let epilogue = Epilogue::of(alpha, 0.0, (none, none), 0);
            let shared = (
                shared!($a; Region::<$p, $o, C_BUFFERS>::ELEMS),
                shared!(Mbarrier; BARRIERS),
                shared!($o; BIAS_STAGE),
                shared!(u32; 1),
            );
            gemm_tma_in_region!($p, $o, C_BUFFERS, EPI, stream_k: true, (a, b), (c, epilogue, DLoads), (batched::<$p>((m, n, k, batch)), (parts, tickets, sk_tiles)), shared);
        }
    };
    ($(#[$doc:meta])* $name:ident, $p:ty, rotary) => {
        $(#[$doc])*
        #[tile_kernel(block = 384, min_blocks_per_sm = 1)]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            a: Tma<Bf16, 3>,
            b: Tma<Bf16, 3>,
            c: TmaMut<Bf16, 3>,
            cos: Global<f32>,
            sin: Global<f32>,
            m: u32,
            n: u32,
            k: u32,
            alpha: f32,
            head_dim: u32,
            rotary_dim: u32,
            rotated: u32,
            table_rows: u32,
            interleaved: u32,
            parts: GlobalMut<f32>,
            tickets: GlobalMut<u32>,
            sk_tiles: u32,
        ) {
            const EPI: u32 = ROTARY;
            let none = Global::<Bf16>::empty();
            let mut epilogue = Epilogue::of(alpha, 0.0, (none, none), EPI);
            let rotary = Rotary { dim: rotary_dim, interleaved: interleaved != 0, cos, sin, inverse: false };
            epilogue.rope = Projection { rotary, head_dim, rotated, table_rows };
            let shared = (
                shared!(Bf16; Region::<$p, Bf16, C_BUFFERS>::ELEMS),
                shared!(Mbarrier; BARRIERS),
                shared!(Bf16; BIAS_STAGE),
                shared!(u32; 1),
            );
            gemm_tma_in_region!($p, Bf16, C_BUFFERS, EPI, stream_k: true, (a, b), (c, epilogue, DLoads), (batched::<$p>((m, n, k, 1)), (parts, tickets, sk_tiles)), shared);
        }
    };
    ($(#[$doc:meta])* $name:ident, $p:ty, $o:ty, grouped) => {
        $(#[$doc])*
        #[tile_kernel(block = 384, min_blocks_per_sm = 1)]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            a: Tma<Bf16, 3>,
            b: Tma<Bf16, 3>,
            c: GlobalMut<$o>,
            rows: Global<u32>,
            row_tiles: u32,
            n: u32,
            k: u32,
            alpha: f32,
        ) {
            // Only alpha is read; C goes through its staging to the threads' own stores
            // (`Direct`).
            const EPI: u32 = 0;
            let none = Global::<$o>::empty();
            let epilogue = Epilogue::of(alpha, 0.0, (none, none), 0);
            let shared = (
                shared!(Bf16; Region::<$p, $o, C_BUFFERS>::ELEMS),
                shared!(Mbarrier; BARRIERS),
                shared!($o; BIAS_STAGE),
                shared!(u32; 1),
            );
            let bk_bn = (<$p as Operands>::BK, N256::BN);
            let tiles = |_| GroupedRows::new((rows, row_tiles), (n, k), bk_bn);
            let (none_f32, none_u32) = (GlobalMut::<f32>::empty(), GlobalMut::<u32>::empty());
            gemm_tma_in_region!($p, $o, C_BUFFERS, EPI, stream_k: false, (a, b), (c, epilogue, Direct), (tiles, (none_f32, none_u32, 0)), shared);
        }
    };
}

/// The flags of a bias and an activation.
pub(crate) const fn bias_and(activation: Activation) -> u32 {
    HAS_BIAS | activation.code() << ACTIVATION_SHIFT
}

/// The flags of a gated linear unit with `activation` on the gate.
pub(crate) const fn gated(activation: Activation) -> u32 {
    GATED | activation.code() << ACTIVATION_SHIFT
}
tma_gemm_kernel!(
    /// bf16 A `[batch, M, K]` · B `[batch, K, N]` → bf16 C = alpha · A·B; persistent grid of at
    /// most one block of 384 threads per multiprocessor (see the module documentation).
    gemm_tma_bf16, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], plain
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = alpha · A·B in tiles of 128 × 192 ([`N192`]).
    gemm_tma_bf16_n192, Bf16Operands<N192>, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], plain
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = alpha · A·B + bias in tiles of 128 × 192.
    gemm_tma_bf16_n192_bias, Bf16Operands<N192>, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::None)
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = relu(alpha · A·B + bias) in tiles of 128 × 192.
    gemm_tma_bf16_n192_bias_relu, Bf16Operands<N192>, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::Relu)
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = gelu(alpha · A·B + bias) in tiles of 128 × 192.
    gemm_tma_bf16_n192_bias_gelu, Bf16Operands<N192>, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::Gelu)
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = silu(alpha · A·B + bias) in tiles of 128 × 192.
    gemm_tma_bf16_n192_bias_silu, Bf16Operands<N192>, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::Silu)
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = alpha · A·B + beta · D in tiles of 128 × 192, D through the ring
    /// (three D stages of one panel each).
    gemm_tma_bf16_n192_residual, Bf16Operands<N192>, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], residual: HAS_D
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C with the whole epilogue (D, bias, activation as `flags` say).
    gemm_tma_bf16_epilogue, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: RUNTIME_FLAGS
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = alpha · A·B + bias (compiled for this epilogue alone; `d`, `beta`
    /// and `flags` are not read).
    gemm_tma_bf16_bias, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::None)
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = relu(alpha · A·B + bias).
    gemm_tma_bf16_bias_relu, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::Relu)
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = gelu(alpha · A·B + bias) (tanh form).
    gemm_tma_bf16_bias_gelu, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::Gelu)
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = silu(alpha · A·B + bias).
    gemm_tma_bf16_bias_silu, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::Silu)
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = alpha · A·B + beta · D, D brought in by the copy engine
    /// ([`DRing`]: D through the ring; compiled for this epilogue alone: `bias` and `flags` are
    /// not read).
    gemm_tma_bf16_residual, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], residual: HAS_D
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = act(alpha · A·B + beta · D + bias), D through the ring as in
    /// `gemm_tma_bf16_residual`, the bias and the activation as `flags` say (D always).
    gemm_tma_bf16_residual_epilogue, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], residual: RUNTIME_FLAGS
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = alpha · A·B + beta · D + bias, D through the ring (compiled for
    /// this epilogue alone).
    gemm_tma_bf16_residual_bias, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], residual: HAS_D | bias_and(Activation::None)
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = relu(alpha · A·B + beta · D + bias), D through the ring.
    gemm_tma_bf16_residual_bias_relu, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], residual: HAS_D | bias_and(Activation::Relu)
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = gelu(alpha · A·B + beta · D + bias), D through the ring.
    gemm_tma_bf16_residual_bias_gelu, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], residual: HAS_D | bias_and(Activation::Gelu)
);
tma_gemm_kernel!(
    /// bf16 A · B → bf16 C = silu(alpha · A·B + beta · D + bias), D through the ring.
    gemm_tma_bf16_residual_bias_silu, Bf16Operands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], residual: HAS_D | bias_and(Activation::Silu)
);
tma_gemm_kernel!(
    /// bf16 A · B → f32 C = alpha · A·B.
    gemm_tma_bf16_f32, Bf16Operands, Bf16, Bf16, f32, [GlobalMut<f32>], plain
);
tma_gemm_kernel!(
    /// bf16 A · B → f32 C = alpha · A·B in tiles of 128 × 192 ([`N192`]).
    gemm_tma_bf16_f32_n192, Bf16Operands<N192>, Bf16, Bf16, f32, [GlobalMut<f32>], plain
);
tma_gemm_kernel!(
    /// bf16 A · B → f32 C with the whole epilogue.
    gemm_tma_bf16_f32_epilogue, Bf16Operands, Bf16, Bf16, f32, [GlobalMut<f32>], fused: RUNTIME_FLAGS
);
// B as `[N, K]` (`nn.Linear`'s weight): the epilogues of a model's projections.
tma_gemm_kernel!(
    /// bf16 A `[batch, M, K]` · (bf16 B `[batch, N, K]`)ᵀ → bf16 C = alpha · A·Bᵀ.
    gemm_tma_bf16_nk, Bf16NkOperands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], plain
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → bf16 C with the whole epilogue.
    gemm_tma_bf16_nk_epilogue, Bf16NkOperands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: RUNTIME_FLAGS
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → bf16 C = alpha · A·Bᵀ + bias.
    gemm_tma_bf16_nk_bias, Bf16NkOperands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::None)
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → bf16 C = relu(alpha · A·Bᵀ + bias).
    gemm_tma_bf16_nk_bias_relu, Bf16NkOperands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::Relu)
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → bf16 C = gelu(alpha · A·Bᵀ + bias).
    gemm_tma_bf16_nk_bias_gelu, Bf16NkOperands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::Gelu)
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → bf16 C = silu(alpha · A·Bᵀ + bias).
    gemm_tma_bf16_nk_bias_silu, Bf16NkOperands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::Silu)
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → bf16 C = alpha · A·Bᵀ + beta · D, D through the ring.
    gemm_tma_bf16_nk_residual, Bf16NkOperands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], residual: HAS_D
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → bf16 C = act(alpha · A·Bᵀ + beta · D + bias), D through
    /// the ring, the bias and the activation as `flags` say.
    gemm_tma_bf16_nk_residual_epilogue, Bf16NkOperands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], residual: RUNTIME_FLAGS
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → bf16 C = alpha · A·Bᵀ in tiles of 128 × 192.
    gemm_tma_bf16_nk_n192, Bf16NkOperands<N192>, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], plain
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → bf16 C = alpha · A·Bᵀ + bias in tiles of 128 × 192.
    gemm_tma_bf16_nk_n192_bias, Bf16NkOperands<N192>, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: bias_and(Activation::None)
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → bf16 C = alpha · A·Bᵀ + beta · D in tiles of 128 × 192, D
    /// through the ring.
    gemm_tma_bf16_nk_n192_residual, Bf16NkOperands<N192>, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], residual: HAS_D
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → f32 C = alpha · A·Bᵀ.
    gemm_tma_bf16_nk_f32, Bf16NkOperands, Bf16, Bf16, f32, [GlobalMut<f32>], plain
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → f32 C with the whole epilogue.
    gemm_tma_bf16_nk_f32_epilogue, Bf16NkOperands, Bf16, Bf16, f32, [GlobalMut<f32>], fused: RUNTIME_FLAGS
);
tma_gemm_kernel!(
    /// bf16 A · (bf16 B `[N, K]`)ᵀ → f32 C = alpha · A·Bᵀ in tiles of 128 × 192.
    gemm_tma_bf16_nk_f32_n192, Bf16NkOperands<N192>, Bf16, Bf16, f32, [GlobalMut<f32>], plain
);
tma_gemm_kernel!(
    /// A QKV projection with RoPE: bf16 A `[M, K]` · (bf16 B `[N, K]`)ᵀ → bf16 C = alpha · A·Bᵀ,
    /// the query and key heads of each row (its first `rotated` columns, heads of `head_dim`)
    /// rotated at table row `row mod table_rows` of `cos`, `sin` `[table_rows, rotary_dim / 2]`
    /// (`crate::rope::Projection`).
    gemm_tma_bf16_nk_rope, Bf16NkOperands, rotary
);
// A as `[K, M]` (a transposed view's storage): weight gradients, dW = dYᵀ·X.
tma_gemm_kernel!(
    /// (bf16 A `[batch, K, M]`)ᵀ · bf16 B `[batch, K, N]` → bf16 C = alpha · Aᵀ·B.
    gemm_tma_bf16_km, Bf16KmOperands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], plain
);
tma_gemm_kernel!(
    /// (bf16 A `[K, M]`)ᵀ · bf16 B `[K, N]` → f32 C = alpha · Aᵀ·B.
    gemm_tma_bf16_km_f32, Bf16KmOperands, Bf16, Bf16, f32, [GlobalMut<f32>], plain
);
tma_gemm_kernel!(
    /// (bf16 A `[K, M]`)ᵀ · bf16 B `[K, N]` → f32 C with the whole epilogue (a gradient added
    /// to the one in C's place: `beta = 1`, D = C).
    gemm_tma_bf16_km_f32_epilogue, Bf16KmOperands, Bf16, Bf16, f32, [GlobalMut<f32>], fused: RUNTIME_FLAGS
);
// Gated linear units: one product over the gate's and the up projection's weights.
tma_gemm_kernel!(
    /// SwiGLU: bf16 A `[M, K]`, the gate's and up projection's weights stacked `[2F, K]` → bf16
    /// C `[M, F]` = silu(alpha · A·W_gateᵀ) · (alpha · A·W_upᵀ).
    gemm_tma_bf16_swiglu, Bf16GatedOperands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: gated(Activation::Silu)
);
tma_gemm_kernel!(
    /// GeGLU: as `gemm_tma_bf16_swiglu` with gelu (tanh form) for silu.
    gemm_tma_bf16_geglu, Bf16GatedOperands, Bf16, Bf16, Bf16, [TmaMut<Bf16, 3>], fused: gated(Activation::Gelu)
);
tma_gemm_kernel!(
    /// e4m3 A `[batch, M, K]` · (e4m3 B `[batch, N, K]`)ᵀ → bf16 C = alpha · A·B (alpha: the
    /// product of the per-tensor scales).
    gemm_fp8_e4m3, Fp8Operands<E4m3, E4m3>, E4m3, E4m3, Bf16, [TmaMut<Bf16, 3>], plain
);
tma_gemm_kernel!(
    /// e4m3 A · (e4m3 B)ᵀ → bf16 C with the whole epilogue.
    gemm_fp8_e4m3_epilogue, Fp8Operands<E4m3, E4m3>, E4m3, E4m3, Bf16, [TmaMut<Bf16, 3>], fused: RUNTIME_FLAGS
);
tma_gemm_kernel!(
    /// e4m3 A · (e4m3 B)ᵀ → f32 C = alpha · A·B.
    gemm_fp8_e4m3_f32, Fp8Operands<E4m3, E4m3>, E4m3, E4m3, f32, [GlobalMut<f32>], plain
);
tma_gemm_kernel!(
    /// e4m3 A · (e4m3 B)ᵀ → f32 C with the whole epilogue.
    gemm_fp8_e4m3_f32_epilogue, Fp8Operands<E4m3, E4m3>, E4m3, E4m3, f32, [GlobalMut<f32>], fused: RUNTIME_FLAGS
);
tma_gemm_kernel!(
    /// e4m3 A · (e5m2 B)ᵀ → bf16 C = alpha · A·B (e5m2's range for gradients).
    gemm_fp8_e4m3_e5m2, Fp8Operands<E4m3, E5m2>, E4m3, E5m2, Bf16, [TmaMut<Bf16, 3>], plain
);
tma_gemm_kernel!(
    /// e4m3 A · (e5m2 B)ᵀ → bf16 C with the whole epilogue.
    gemm_fp8_e4m3_e5m2_epilogue, Fp8Operands<E4m3, E5m2>, E4m3, E5m2, Bf16, [TmaMut<Bf16, 3>], fused: RUNTIME_FLAGS
);
tma_gemm_kernel!(
    /// A group of bf16 products that share N and K → bf16 C = alpha · A_g·B_g: A `[Σ m_g, K]`,
    /// B `[groups, K, N]`, C `[Σ m_g, N]`, the row tiles' table in `rows` (see [`grouped`]).
    gemm_tma_grouped_bf16, Bf16Operands, Bf16, grouped
);
tma_gemm_kernel!(
    /// The same group → f32 C.
    gemm_tma_grouped_bf16_f32, Bf16Operands, f32, grouped
);
tma_gemm_kernel!(
    /// The same group with the experts' weights as `nn.Linear` keeps them, B `[groups, N, K]`
    /// (read K-major, as the MMA reads it) → bf16 C.
    gemm_tma_grouped_bf16_nk, Bf16NkOperands, Bf16, grouped
);
tma_gemm_kernel!(
    /// The same group, B `[groups, N, K]` → f32 C.
    gemm_tma_grouped_bf16_nk_f32, Bf16NkOperands, f32, grouped
);
