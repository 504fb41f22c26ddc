//! Tile windows, distributed tensors and the RMSNorm / elementwise kernels on the emulator:
//! spec TV7 (vector width and access trace), the padded-row hazard, load/store round trips,
//! block reductions, shuffle_tile, and the kernels against fp64 CPU references on odd shapes.

use ck_core::device::*;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig};
use ck_core::tile::{block_reduce_x, make_tile_window, shuffle_tile, Plan, TileWindow, View2};
use ck_kernels::elementwise::{AddBf16, AddF32, CopyBf16, CopyF32, TILE_BF16, TILE_F32};
use ck_kernels::op::{Dtype, HostCall};
use ck_kernels::rows::rmsnorm::{host::reference, OP as RMSNORM};
use ck_macros::{tile_distribution, tile_kernel};

/// Each thread copies the 16 bytes (4 × u32) at `[t / 4, 4 · (t % 4) + shift]` of a `rows ×
/// cols` view (row stride `stride`) of `x` into shared memory with `copy_16_async` (with
/// `copy_16` when `elementwise` is 1), then writes them out: 16 rows of 16 elements.
#[tile_kernel(block = 64)]
fn view_copy(
    x: Global<u32>,
    output: GlobalMut<u32>,
    rows: u32,
    cols: u32,
    stride: u32,
    shift: u32,
    elementwise: u32,
) {
    let v = View2::<_, u32, 4>::new(x, rows, cols, stride);
    let s = shared!(u32; 256);
    let t = thread_idx();
    if elementwise == 1 {
        v.copy_16(&s, 4 * t, [t / 4, 4 * (t % 4) + shift]);
    } else {
        v.copy_16_async(&s, 4 * t, [t / 4, 4 * (t % 4) + shift]);
    }
    cp_async_commit();
    cp_async_wait::<0>();
    for e in 0..4 {
        output.store(4 * t + e, s.load(4 * t + e));
    }
}

tile_distribution! {
    /// Spec TV1 (wave64).
    struct Tv1 {
        warp_size: 64, block_size: 256, r: [],
        h: [[2, 2, 4, 1], [2, 2, 16, 8]],
        p_major: [[1, 2], [1, 2]], p_minor: [[1, 1], [2, 2]],
        y_major: [1, 1, 2, 2], y_minor: [0, 3, 0, 3],
    }
}

fn view<const VEC: usize>(
    buf: &DeviceBuffer<u16>,
    rows: u32,
    cols: u32,
    stride: u32,
) -> View2<GlobalMut<u16>, u16, VEC> {
    View2::new(buf.global_mut(), rows, cols, stride)
}

type Trace = Vec<([i32; 4], [i32; 2], i32, usize, bool, i32)>;

fn trace<const VEC: usize>(buf: &DeviceBuffer<u16>, cols: u32, warp: i32, lane: i32) -> Trace {
    let w =
        TileWindow::<Tv1, _>::for_partition(view::<VEC>(buf, 16, cols, cols), [0, 0], [warp, lane]);
    let mut out = Vec::new();
    w.trace::<u16>(|a| out.push((a.y, a.x, a.offset, a.d, a.valid, a.len)));
    out
}

#[test]
fn tv7_vector_width_and_access_trace() {
    let device = Device::emulator();
    let buf = DeviceBuffer::<u16>::zeros(&device, 16 * 512).unwrap();
    let plan = Plan::<Tv1, View2<GlobalMut<u16>, u16, 8>, u16>::PLAN;
    assert_eq!(
        (plan.vector_dim_y, plan.scalar_per_vector, plan.num_access),
        (3, 8, 4)
    );
    let t = trace::<8>(&buf, 512, 1, 17);
    let expect: Trace = vec![
        ([0, 0, 0, 0], [1, 136], 648, 0, true, 8),
        ([0, 0, 1, 0], [1, 392], 904, 8, true, 8),
        ([1, 0, 0, 0], [9, 136], 4744, 16, true, 8),
        ([1, 0, 1, 0], [9, 392], 5000, 24, true, 8),
    ];
    assert_eq!(t, expect);
    // No guarantee: one element per access, 32 accesses. Guarantee 4: gcd(4, 8) = 4.
    assert_eq!(trace::<1>(&buf, 512, 1, 17).len(), 32);
    assert_eq!(
        Plan::<Tv1, View2<GlobalMut<u16>, u16, 4>, u16>::PLAN.scalar_per_vector,
        4
    );
    assert!(trace::<4>(&buf, 512, 1, 17).iter().all(|a| a.5 == 4));
}

#[test]
fn tv7_padding_and_the_next_row_hazard() {
    let device = Device::emulator();
    // N = 500 padded to 512: the spec's vector starts of thread (warp 3, lane 63).
    let buf = DeviceBuffer::<u16>::zeros(&device, 16 * 500).unwrap();
    let v = view::<8>(&buf, 16, 500, 500);
    use ck_core::tile::View as _;
    for (x, valid) in [
        ([7, 248], true),
        ([7, 504], false),
        ([15, 248], true),
        ([15, 504], false),
    ] {
        assert_eq!(v.valid(&x), valid, "{x:?}");
    }
    // 500 % 8 != 0: the thread owning n = 496..503 (warp 3, lane 62: tn = 14) would start a
    // valid vector at 496 and read n = 500..503 from the next row; the window falls back to one
    // element per access instead, so 500..503 are padding.
    let t = trace::<8>(&buf, 500, 3, 62);
    assert!(t.iter().all(|a| a.5 == 1));
    assert!(t.iter().any(|a| a.1 == [7, 499] && a.4));
    for n in 500..504 {
        assert!(
            t.iter().any(|a| a.1 == [7, n] && !a.4),
            "n = {n} must be padding"
        );
    }
}

tile_distribution! {
    /// TV1c: 4 warps × 32 lanes over 8 × 512, two warps per row group.
    struct Tv1c {
        warp_size: 32, block_size: 128,
        h: { m: [repeat: 2, warp: 2, lane: 2, vec: 1], n: [repeat: 2, warp: 2, lane: 16, vec: 8] },
        p: [[m.warp, n.warp], [m.lane, n.lane]],
        y: [m.repeat, m.vec, n.repeat, n.vec],
    }
}

tile_distribution! {
    /// TV1c with its Y dims in another order (same R, H, P).
    struct Tv1cShuffled {
        warp_size: 32, block_size: 128,
        h: { m: [repeat: 2, warp: 2, lane: 2, vec: 1], n: [repeat: 2, warp: 2, lane: 16, vec: 8] },
        p: [[m.warp, n.warp], [m.lane, n.lane]],
        y: [n.vec, n.repeat, m.vec, m.repeat],
    }
}

/// Copies an `rows × cols` matrix through registers, tile by tile, and writes each row's sum
/// (a block reduction over X1) to `sums`, and the tile again through a shuffled distribution.
#[tile_kernel(block = 128, distributions(Tv1c, Tv1cShuffled))]
fn tile_roundtrip(
    x: Global<f32>,
    y: GlobalMut<f32>,
    y2: GlobalMut<f32>,
    sums: GlobalMut<f32>,
    rows: u32,
    cols: u32,
) {
    let scratch = shared!(u32; 512);
    let origin = [(block_idx() * 8) as i32, 0];
    let t = make_tile_window::<Tv1c, _>(View2::<_, f32, 8>::new(x, rows, cols, cols), origin)
        .load::<f32>();
    make_tile_window::<Tv1c, _>(View2::<_, f32, 8>::new(y, rows, cols, cols), origin).store(&t);
    let s = shuffle_tile::<Tv1c, Tv1cShuffled, f32>(&t);
    make_tile_window::<Tv1cShuffled, _>(View2::<_, f32, 8>::new(y2, rows, cols, cols), origin)
        .store(&s);
    let r = block_reduce_x::<Tv1c, f32, 1, 512>(&t, |a, b| a + b, &scratch);
    // Every register holds its row's sum; lane 0 of warp 0 (n = 0) writes rows of its tile.
    let one_col = View2::<_, f32, 1>::new(sums, rows, 1, 1);
    let mut w = make_tile_window::<Tv1c, _>(one_col, origin);
    w.set_origin(origin);
    w.store(&r);
}

use ck_kernels::checks::Rng;

/// Stages the tile at `[8 · block, col0]` of an `rows × cols` view of `x` through shared memory
/// with `async_load_into` (into the second of two tiles of the stage), reads it back with the
/// stage window's `load` and writes it whole as block `block`'s 8 × 512 tile of `y`.
#[tile_kernel(block = 128, distributions(Tv1c))]
fn staged_tile(x: Global<f32>, y: GlobalMut<f32>, rows: u32, cols: u32, col0: u32) {
    let stage = shared!(f32; 2 * 8 * 512);
    let row0 = (block_idx() * 8) as i32;
    let view = View2::<_, f32, 8>::new(x, rows, cols, cols);
    let w = make_tile_window::<Tv1c, _>(view, [row0, col0 as i32]);
    let s = make_tile_window::<Tv1c, _>(View2::<_, f32, 8>::new(stage, 16, 512, 512), [8, 0]);
    w.async_load_into(&s);
    cp_async_commit();
    cp_async_wait::<0>();
    let out = View2::<_, f32, 8>::new(y, grid_dim() * 8, 512, 512);
    make_tile_window::<Tv1c, _>(out, [row0, 0]).store(&s.load::<f32>());
}

/// What `async_load_into` stages is the window's tile: element `(r, j)` of block `b`'s tile is
/// `x[8b + r, col0 + j]` inside the view and 0 outside it, by 16-byte copies (two per 8-float
/// vector) where the rows are whole vectors and the origin on one, element by element otherwise.
#[test]
fn staged_tiles_are_the_window_with_zero_padding() {
    let device = Device::emulator();
    let mut rng = Rng(7);
    // (rows, cols, col0): exact; padded rows and columns; rows not whole vectors; an origin on a
    // vector; an origin off one.
    for (rows, cols, col0) in [
        (8u32, 512u32, 0u32),
        (13, 500, 0),
        (3, 37, 0),
        (13, 500, 4),
        (9, 40, 2),
    ] {
        let x: Vec<f32> = (0..rows * cols).map(|_| rng.f32() + 1.0).collect();
        let xd = DeviceBuffer::from_slice(&device, &x).unwrap();
        let blocks = rows.div_ceil(8);
        let len = (blocks * 8 * 512) as usize;
        let mut y = DeviceBuffer::from_slice(&device, &vec![f32::NAN; len]).unwrap();
        let cfg = LaunchConfig::new(blocks, 128);
        StagedTile::launch(&device, cfg, &xd, &mut y, rows, cols, col0).unwrap();
        let got = y.to_vec().unwrap();
        for (i, g) in got.iter().enumerate() {
            let (r, c) = (i as u32 / 512, col0 + i as u32 % 512);
            let want = if r < rows && c < cols {
                x[(r * cols + c) as usize]
            } else {
                0.0
            };
            assert_eq!(*g, want, "{rows}x{cols} from column {col0}: [{r}, {c}]");
        }
    }
}

#[test]
fn windows_round_trip_reduce_and_shuffle_with_padding() {
    let device = Device::emulator();
    let mut rng = Rng(3);
    for (rows, cols) in [(8u32, 512u32), (13, 500), (3, 37)] {
        let x: Vec<f32> = (0..rows * cols).map(|_| rng.f32()).collect();
        let xd = DeviceBuffer::from_slice(&device, &x).unwrap();
        let mut y = DeviceBuffer::from_slice(&device, &vec![f32::NAN; x.len()]).unwrap();
        let mut y2 = DeviceBuffer::from_slice(&device, &vec![f32::NAN; x.len()]).unwrap();
        let mut sums = DeviceBuffer::from_slice(&device, &vec![f32::NAN; rows as usize]).unwrap();
        TileRoundtrip::launch(
            &device,
            LaunchConfig::new(rows.div_ceil(8), 128),
            &xd,
            &mut y,
            &mut y2,
            &mut sums,
            rows,
            cols,
        )
        .unwrap();
        assert_eq!(y.to_vec().unwrap(), x, "{rows}x{cols}");
        assert_eq!(y2.to_vec().unwrap(), x, "{rows}x{cols} shuffled");
        let got = sums.to_vec().unwrap();
        for r in 0..rows as usize {
            let want: f64 = x[r * cols as usize..(r + 1) * cols as usize]
                .iter()
                .map(|&v| v as f64)
                .sum();
            assert!(
                (got[r] as f64 - want).abs() < 1e-4,
                "row {r}: {} vs {want}",
                got[r]
            );
        }
    }
}

fn max_rel_err(got: &[f32], want: &[f64]) -> f64 {
    let scale = want.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w).abs() / w.abs().max(scale * 1e-3))
        .fold(0.0, f64::max)
}

#[test]
fn rmsnorm_matches_fp64_on_odd_shapes() {
    let device = Device::emulator();
    let mut rng = Rng(5);
    // 11×1024, 3×4096 and 2×8192 fill their tiles exactly (the unpadded bf16 kernels; 11 rows
    // leave the last 8-row block with padding rows).
    for (m, n) in [
        (1u32, 1u32),
        (3, 1000),
        (2, 9000),
        (257, 4099),
        (11, 1024),
        (3, 4096),
        (2, 8192),
    ] {
        let x: Vec<f32> = (0..m * n).map(|_| rng.f32()).collect();
        let g: Vec<f32> = (0..n).map(|_| rng.f32() + 1.5).collect();
        let rmsnorm = |dtype| {
            let shape = [m as usize, n as usize];
            let call = HostCall::new(&RMSNORM).dtype(dtype);
            let call = call.input("x", &x, &shape).input("gamma", &g, &shape[1..]);
            call.run(&device).unwrap().output("y").unwrap().to_vec()
        };
        let y = rmsnorm(Dtype::F32);
        let want = reference(&x, &g, (m, n), 1e-6);
        let err = max_rel_err(&y, &want);
        assert!(err <= 1e-5, "f32 {m}x{n}: relative error {err}");
        // bf16: the reference sees the same rounded inputs the kernel does.
        let rb = |v: &[f32]| {
            v.iter()
                .map(|&a| Bf16::from_f32(a).to_f32())
                .collect::<Vec<_>>()
        };
        let y = rmsnorm(Dtype::Bf16);
        let want = reference(&rb(&x), &rb(&g), (m, n), 1e-6);
        let err = max_rel_err(&y, &want);
        assert!(err <= 1e-2, "bf16 {m}x{n}: relative error {err}");
    }
}

#[test]
fn elementwise_kernels_match_references() {
    let device = Device::emulator();
    let mut rng = Rng(9);
    for n in [1u32, 1000, 4097 + 3] {
        let a: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
        let b: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
        let (ad, bd) = (
            DeviceBuffer::from_slice(&device, &a).unwrap(),
            DeviceBuffer::from_slice(&device, &b).unwrap(),
        );
        let mut out = DeviceBuffer::from_slice(&device, &vec![f32::NAN; n as usize]).unwrap();
        CopyF32::launch(
            &device,
            LaunchConfig::new(n.div_ceil(TILE_F32), 256),
            &ad,
            &mut out,
            n,
        )
        .unwrap();
        assert_eq!(out.to_vec().unwrap(), a);
        AddF32::launch(
            &device,
            LaunchConfig::new(n.div_ceil(TILE_F32), 256),
            &ad,
            &bd,
            &mut out,
            n,
        )
        .unwrap();
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        assert_eq!(out.to_vec().unwrap(), want);
        let (ah, bh): (Vec<Bf16>, Vec<Bf16>) = (
            a.iter().map(|&v| Bf16::from_f32(v)).collect(),
            b.iter().map(|&v| Bf16::from_f32(v)).collect(),
        );
        let (ad, bd) = (
            DeviceBuffer::from_slice(&device, &ah).unwrap(),
            DeviceBuffer::from_slice(&device, &bh).unwrap(),
        );
        let mut out = DeviceBuffer::from_slice(&device, &vec![Bf16(0x7fc0); n as usize]).unwrap();
        CopyBf16::launch(
            &device,
            LaunchConfig::new(n.div_ceil(TILE_BF16), 256),
            &ad,
            &mut out,
            n,
        )
        .unwrap();
        assert_eq!(out.to_vec().unwrap(), ah);
        AddBf16::launch(
            &device,
            LaunchConfig::new(n.div_ceil(TILE_BF16), 256),
            &ad,
            &bd,
            &mut out,
            n,
        )
        .unwrap();
        let want: Vec<Bf16> = ah
            .iter()
            .zip(&bh)
            .map(|(x, y)| Bf16::from_f32(x.to_f32() + y.to_f32()))
            .collect();
        assert_eq!(out.to_vec().unwrap(), want);
    }
}

#[test]
fn copy_moves_16_byte_vectors() {
    let device = Device::emulator();
    let a = DeviceBuffer::from_slice(&device, &vec![1f32; 4096]).unwrap();
    let mut out = DeviceBuffer::zeros(&device, 4096).unwrap();
    let st = CopyF32::launch(&device, LaunchConfig::new(1, 256), &a, &mut out, 4096).unwrap();
    // 4096 floats = 16 KiB = 512 sectors each way, in 8 warps × 4 repeats = 32 warp requests.
    assert_eq!((st.global_load_sectors, st.global_load_requests), (512, 32));
    assert_eq!(
        (st.global_store_sectors, st.global_store_requests),
        (512, 32)
    );
}

#[test]
fn the_reduce_encoding_drives_block_reductions() {
    use ck_core::tile::Reduction;
    // Spec TV2b is TV1 reduced over X1.
    let tv2b = ck_core::Encoding::new(
        &[2, 16],
        &[&[2, 2, 4, 1]],
        &[&[1, 0], &[1, 0]],
        &[&[1, 0], &[2, 1]],
        &[1, 1],
        &[0, 3],
    )
    .unwrap();
    assert_eq!(Reduction::<Tv1, 1>::REDUCED, tv2b);
    // TV1: lane = tm·16 + tn, warp = wm·2 + wn; X1's thread digits are tn (lane bits 0-3) and wn
    // (warp bit 0).
    assert_eq!(Reduction::<Tv1, 1>::THREAD_BITS, (0b1111, 0b1));
    // X0's are tm (lane bits 4-5) and wm (warp bit 1); two rows per thread remain for X1.
    assert_eq!(Reduction::<Tv1, 0>::THREAD_BITS, (0b11_0000, 0b10));
    assert_eq!(Reduction::<Tv1, 1>::SLOTS, 2);
}

tile_distribution! {
    /// A 128 × 32 u16 tile in the `k-write` pattern: lane → (m = lane / 4, k = (lane % 4)·8).
    struct Tile128x32 {
        warp_size: 32, block_size: 256,
        h: { m: [rep: 2, warp: 8, lane: 8], k: [lane: 4, vec: 8] },
        p: [[m.warp], [m.lane, k.lane]],
        y: [m.rep, k.vec],
    }
}

tile_distribution! {
    /// The same tile read column-chunk-wise: lane i takes row i of a 32-row group, 8 k each.
    struct Tile128x32Cols {
        warp_size: 32, block_size: 256,
        h: { m: [rep: 1, lane: 32, warp: 4], k: [warp: 2, rep: 2, vec: 8] },
        p: [[m.warp, k.warp], [m.lane]],
        y: [m.rep, k.rep, k.vec],
    }
}

/// Global → LDS (spec TV8 XOR layout, through a window over an LdsView) → global.
#[tile_kernel(block = 256, distributions(Tile128x32, Tile128x32Cols))]
fn lds_round_trip(x: Global<u16>, y: GlobalMut<u16>) {
    use ck_core::lds::LdsLayout;
    use ck_core::tile::LdsView;
    let smem = shared!(u16; 4096);
    let layout = LdsLayout::xor_or_panic(128, 32, 8, 2, None);
    let t = make_tile_window::<Tile128x32, _>(View2::<_, u16, 8>::new(x, 128, 32, 32), [0, 0])
        .load::<u16>();
    make_tile_window::<Tile128x32, _>(LdsView::<u16, 4096, 8>::new(smem, layout), [0, 0]).store(&t);
    block_sync();
    let u =
        make_tile_window::<Tile128x32Cols, _>(LdsView::<u16, 4096, 8>::new(smem, layout), [0, 0])
            .load::<u16>();
    make_tile_window::<Tile128x32Cols, _>(View2::<_, u16, 8>::new(y, 128, 32, 32), [0, 0])
        .store(&u);
}

#[test]
fn windows_over_the_swizzled_lds_layout() {
    let device = Device::emulator();
    let x: Vec<u16> = (0..4096).map(|i| (i * 7 + 3) as u16).collect();
    let xd = DeviceBuffer::from_slice(&device, &x).unwrap();
    let mut y = DeviceBuffer::<u16>::zeros(&device, 4096).unwrap();
    let st = LdsRoundTrip::launch(&device, LaunchConfig::new(1, 256), &xd, &mut y).unwrap();
    assert_eq!(y.to_vec().unwrap(), x);
    // The k-write pattern is conflict-free in the XOR layout (spec TV8).
    assert_eq!(st.shared_store_conflicts, 0, "{st:?}");
    assert!(st.shared_load_requests > 0);
}

/// Runs `ViewCopy` (`elementwise`: with `copy_16`) over a `rows × cols` view of 1, 2, 3, … with
/// row stride `stride`, and checks each copied element: the view's element where `inside(r, c,
/// e)` says the copy reads it (row r, the vector's first column c, element e), zero elsewhere.
fn check_view_copy(
    d: &Device,
    (rows, cols, stride, shift): (u32, u32, u32, u32),
    elementwise: bool,
    inside: impl Fn(u32, u32, u32) -> bool,
) {
    let len = if rows == 0 {
        0
    } else {
        (rows - 1) * stride + cols
    };
    let x: Vec<u32> = (1..=len).collect();
    let xb = DeviceBuffer::from_slice(d, &x).unwrap();
    let mut out = DeviceBuffer::zeros(d, 256).unwrap();
    let cfg = LaunchConfig::new(1, 64);
    let shape = (rows, cols, stride, shift);
    ViewCopy::launch(
        d,
        cfg,
        &xb,
        &mut out,
        rows,
        cols,
        stride,
        shift,
        elementwise as u32,
    )
    .unwrap();
    let got = out.to_vec().unwrap();
    for t in 0..64u32 {
        let (r, c) = (t / 4, 4 * (t % 4) + shift);
        for e in 0..4 {
            let want = if inside(r, c, e) {
                x[(r * stride + c + e) as usize]
            } else {
                0
            };
            let at = (4 * t + e) as usize;
            assert_eq!(got[at], want, "{shape:?}: thread {t} element {e}");
        }
    }
}

#[test]
fn view_copies_are_whole_vectors_inside_the_view_or_zeros() {
    let d = Device::emulator();
    for shape @ (rows, cols, _, _) in [
        (16, 16, 16, 0),
        (5, 12, 12, 0),
        (3, 12, 16, 4),
        (0, 4, 4, 0),
    ] {
        // A vector is copied only when all four elements are in the view.
        check_view_copy(&d, shape, false, |r, c, _| r < rows && c + 4 <= cols);
    }
    // A vector that starts off a 16-byte boundary is a fault, not a silent split copy.
    let x = DeviceBuffer::from_slice(&d, &[0u32; 64]).unwrap();
    let mut out = DeviceBuffer::zeros(&d, 256).unwrap();
    let err = ViewCopy::launch(&d, LaunchConfig::new(1, 64), &x, &mut out, 4, 16, 16, 1, 0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not 16-byte aligned"), "{err}");
    // Rows that are not whole vectors would lose their last partial vector: a fault that names
    // copy_16.
    let mut out = DeviceBuffer::zeros(&d, 256).unwrap();
    let err = ViewCopy::launch(&d, LaunchConfig::new(1, 64), &x, &mut out, 4, 10, 12, 0, 0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("View2::copy_16"), "{err}");
}

#[test]
fn element_copies_take_every_element_of_any_view_and_zeros_outside_it() {
    let d = Device::emulator();
    for shape @ (rows, cols, _, _) in [
        (5, 10, 12, 0),
        (4, 7, 9, 1),
        (2, 16, 18, 3),
        (16, 16, 16, 0),
    ] {
        check_view_copy(&d, shape, true, |r, c, e| r < rows && c + e < cols);
    }
}

tile_distribution! {
    /// Three registers per thread: an odd count, so `round_to` has a last unpaired register.
    struct Odd3 {
        warp_size: 32, block_size: 32,
        h: { m: [lane: 32], n: [y: 3] },
        p: [[m.lane]],
        y: [n.y],
    }
}

/// `round_to::<Bf16>()` on even and odd register counts: every register rounded to nearest
/// even, in place. Inputs `1 + k/512` lie between bf16 neighbours `4/512` apart, so the
/// expected value is `1 + 4 · rne(k / 4) / 512` — computed here, not by the conversion.
#[test]
fn round_to_bf16_rounds_every_register_to_nearest_even_in_place() {
    fn rne_quarter(k: u32) -> f32 {
        let (q, r) = (k / 4, k % 4);
        let up = r > 2 || (r == 2 && q % 2 == 1);
        1.0 + 4.0 * (q + up as u32) as f32 / 512.0
    }
    fn check<D: ck_core::distribution::TileDistribution>() -> usize {
        let mut t = ck_core::tile::DistributedTensor::<D, f32>::splat(0.0);
        let len = t.data.as_ref().len();
        for d in 0..len {
            t.set(d, 1.0 + (d as u32 * 3 + 1) as f32 / 512.0);
        }
        let r = t.round_to::<Bf16>();
        for d in 0..len {
            let want = rne_quarter(d as u32 * 3 + 1);
            assert_eq!(r.get(d).to_f32(), want, "register {d} of {len}");
        }
        len
    }
    assert_eq!(check::<Odd3>(), 3);
    assert_eq!(check::<Tv1c>(), 32);
}
