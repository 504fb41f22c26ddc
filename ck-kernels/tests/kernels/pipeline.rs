//! Hopper's asynchronous pipeline on the emulator: TMA copies land what the tensor map says
//! (checked against loops written here), TMA stores write staged boxes back, a
//! producer/consumer ring over mbarriers runs, and each way of getting the synchronisation
//! wrong is caught with its diagnosis.

use ck_core::device::*;
use ck_core::host::{
    Device, DeviceBuffer, Fault, KernelError, LaunchConfig, TensorMap, TensorMapMut,
};
use ck_core::tile::{TmaBoxView, View};
use ck_core::wgmma::SwizzleMode;
use ck_macros::tile_kernel;

/// Rows of 32 u32 (128 bytes) per stage.
const STAGE_ROWS: u32 = 8;

/// Streams `tiles` tiles of 8 rows × 32 u32 through two shared stages: thread 0 copies each
/// with TMA (128-byte swizzle) once the consumers have released the stage, warp 1 waits for
/// it, un-swizzles it into `output` and releases it. `mode = 1`: the consumers skip the wait.
#[tile_kernel(block = 64)]
fn tma_ring(input: Tma<u32, 2>, output: GlobalMut<u32>, tiles: u32, mode: u32) {
    let stage = shared!(u32; 2 * 256);
    // full[s] = s, empty[s] = 2 + s.
    let bars = shared!(Mbarrier; 4);
    let t = thread_idx();
    if t == 0 {
        bars.init(0, 1);
        bars.init(1, 1);
        bars.init(2, 32);
        bars.init(3, 32);
        fence_barrier_init();
    }
    block_sync();
    if warp_id() == 0 {
        if t == 0 {
            for j in 0..tiles {
                let (s, use_) = (j % 2, j / 2);
                if use_ > 0 {
                    bars.wait(2 + s, (use_ - 1) % 2);
                }
                bars.arrive_expect_tx(s, input.box_bytes());
                let row = (STAGE_ROWS * j) as i32;
                input.copy_to_shared([0, row], &stage, 256 * s, &bars, s);
            }
        }
    } else {
        let lane = lane_id();
        for j in 0..tiles {
            let s = j % 2;
            if mode != 1 {
                bars.wait(s, (j / 2) % 2);
            }
            for r in 0..STAGE_ROWS {
                // Element (r, lane): 16-byte chunk lane / 4 of row r, moved to chunk ^ (r % 8).
                let at = r * 32 + ((lane / 4) ^ (r % 8)) * 4 + lane % 4;
                output.store((STAGE_ROWS * j + r) * 32 + lane, stage.load(256 * s + at));
            }
            bars.arrive(2 + s);
        }
    }
}

/// Thread 0 copies one box into a barrier that needs a second arrival (warp 1's): warp 1 reads
/// the box before that arrival (`early = 1`, the copy has not completed) or after its wait.
#[tile_kernel(block = 64)]
fn tma_early_read(input: Tma<u32, 2>, output: GlobalMut<u32>, early: u32) {
    let stage = shared!(u32; 256);
    let bars = shared!(Mbarrier; 1);
    if thread_idx() == 0 {
        bars.init(0, 2);
        fence_barrier_init();
    }
    block_sync();
    if thread_idx() == 0 {
        bars.arrive_expect_tx(0, input.box_bytes());
        input.copy_to_shared([0, 0], &stage, 0, &bars, 0);
    }
    if warp_id() == 1 {
        let lane = lane_id();
        if early != 0 {
            output.store(lane, stage.load(lane));
        }
        if lane == 0 {
            bars.arrive(0);
        }
        bars.wait(0, 0);
        output.store(lane, stage.load(lane));
    }
}

/// One box of a rank-3 tensor at `(c0, c1, c2)` (may be negative) into shared memory, written
/// out densely by 64 threads.
#[tile_kernel(block = 64)]
fn tma_box3(input: Tma<u32, 3>, output: GlobalMut<u32>, c0: i32, c1: i32, c2: i32) {
    let stage = shared!(u32; 64);
    let bars = shared!(Mbarrier; 1);
    let t = thread_idx();
    if t == 0 {
        bars.init(0, 1);
        fence_barrier_init();
    }
    block_sync();
    if t == 0 {
        bars.arrive_expect_tx(0, input.box_bytes());
        input.copy_to_shared([c0, c1, c2], &stage, 0, &bars, 0);
    }
    bars.wait(0, 0);
    output.store(t, stage.load(t));
}

/// Warp 0 writes shared memory and arrives at named barrier 3; warp 1 syncs there and reads.
/// `mode = 1`: no barrier (a race); `mode = 2`: warp 1 names another thread count.
#[tile_kernel(block = 64)]
fn named_handoff(output: GlobalMut<u32>, mode: u32) {
    let s = shared!(u32; 32);
    let t = thread_idx();
    if warp_id() == 0 {
        s.store(t, t * 7 + 1);
        if mode != 1 {
            named_barrier_arrive(3, 64);
        }
    } else {
        match mode {
            0 => named_barrier_sync(3, 64),
            2 => named_barrier_sync(3, 32),
            _ => {}
        }
        output.store(t - 32, s.load(t - 32));
    }
}

/// Misuses: `mode = 0` waits on a barrier nobody initialised; `mode = 1` waits for a phase
/// nobody arrives at (a deadlock).
#[tile_kernel(block = 32)]
fn mbarrier_misuse(output: GlobalMut<u32>, mode: u32) {
    let bars = shared!(Mbarrier; 2);
    if thread_idx() == 0 {
        bars.init(1, 1);
        fence_barrier_init();
    }
    block_sync();
    bars.wait(mode, 0);
    output.store(thread_idx(), 1);
}

/// Writes `tiles` tiles of 16 × 64 u32 (element (r, c) of tile j: `10000 j + 64 r + c`) into a
/// staging buffer laid out as four TMA boxes of 8 × 32, through the view's offsets, and thread
/// 0 stores them with TMA below each other. `mode = 1`: no wait before the staging buffer is
/// written again; `mode = 2`: no wait before the kernel returns; `mode = 3`: boxes of 5 rows
/// (16 is not a multiple); `mode = 4`: the view starts one element past the aligned start;
/// `mode = 5`: no `fence_proxy_async` between the writes and the store.
#[tile_kernel(block = 64)]
fn tma_store_tiles(output: TmaMut<u32, 2>, tiles: u32, mode: u32) {
    // 1 KiB more, to start the boxes on a 1024-byte boundary (the swizzle's period).
    let staging = shared!(u32; 16 * 64 + 256);
    let start = (1024 - staging.shared_address(0) % 1024) % 1024 / 4;
    let (start, box_rows) = match mode {
        3 => (start, 5),
        4 => (start + 1, 8),
        _ => (start, 8),
    };
    let view = TmaBoxView::new(staging, start, (16, 64), box_rows);
    let t = thread_idx();
    for j in 0..tiles {
        if t == 0 && mode != 1 {
            bulk_wait_group_read::<0>();
        }
        block_sync();
        for r in 0..16 {
            let at = view.offset(&[r as ck_core::Index, t as ck_core::Index]) as u32;
            staging.store(at, 10000 * j + 64 * r + t);
        }
        if mode != 5 {
            fence_proxy_async();
        }
        block_sync();
        if t == 0 {
            for b in 0..4 {
                let (r, c) = (8 * (b / 2), 32 * (b % 2));
                let coords = [c as i32, (16 * j + r) as i32];
                output.store_from_shared(coords, &staging, view.box_start(r, c));
            }
            bulk_commit_group();
        }
    }
    if t == 0 && mode != 2 {
        bulk_wait_group_read::<0>();
    }
}

/// A 45 × 64 u32 matrix (the last tile of three clipped to 13 rows) and its store map.
fn store_tiles(mode: u32) -> Result<Vec<u32>, ck_core::host::LaunchError> {
    let d = device();
    let rows = 45u32;
    let mut out = DeviceBuffer::from_slice(&d, &vec![u32::MAX; (rows * 64) as usize])?;
    let mut map = TensorMapMut::dense(&mut out, [64, rows as u64], [32, 8], SwizzleMode::B128)?;
    TmaStoreTiles::launch(
        &d,
        LaunchConfig::new(1, 64),
        &mut map,
        rows.div_ceil(16),
        mode,
    )?;
    out.to_vec()
}

#[test]
fn tma_stores_write_staged_boxes_and_clip_at_the_tensor_edge() {
    let got = store_tiles(0).unwrap();
    for (i, &v) in got.iter().enumerate() {
        let (r, c) = (i as u32 / 64, i as u32 % 64);
        assert_eq!(
            v,
            10000 * (r / 16) + 64 * (r % 16) + c,
            "element ({r}, {c})"
        );
    }
}

#[test]
fn writing_a_staging_buffer_a_tma_store_may_still_read_is_a_race() {
    let e = kernel_error(store_tiles(1));
    assert_eq!(e.fault, Fault::SharedRace, "{e}");
    assert!(
        e.message.contains("TMA store") && e.message.contains("bulk_wait_group_read"),
        "{e}"
    );
    let e = kernel_error(store_tiles(2));
    assert_eq!(e.fault, Fault::SharedRace, "{e}");
    assert!(e.message.contains("block ended"), "{e}");
    // Ordered by a barrier but not fenced: the copy engine may read the old bytes.
    let e = kernel_error(store_tiles(5));
    assert_eq!(e.fault, Fault::SharedRace, "{e}");
    assert!(e.message.contains("fence_proxy_async"), "{e}");
}

#[test]
fn a_box_view_that_does_not_fit_its_boxes_says_what_to_change() {
    let e = kernel_error(store_tiles(3));
    assert_eq!(e.fault, Fault::Misaligned, "{e}");
    assert!(
        e.message
            .contains("rows must be a positive multiple of the box rows"),
        "{e}"
    );
    let e = kernel_error(store_tiles(4));
    assert_eq!(e.fault, Fault::Misaligned, "{e}");
    assert!(e.message.contains("1024-byte boundary"), "{e}");
}

fn kernel_error<T: std::fmt::Debug>(r: Result<T, ck_core::host::LaunchError>) -> KernelError {
    match r {
        Err(ck_core::host::LaunchError::Kernel(e)) => e,
        other => panic!("expected a kernel fault, got {other:?}"),
    }
}

fn device() -> Device {
    Device::Emulator { workers: 1 }
}

#[test]
fn a_tma_ring_streams_a_tensor_through_two_stages() {
    let d = device();
    // 45 rows: the last of 6 tiles has 5 rows, the rest zero fill.
    let rows = 45u32;
    let values: Vec<u32> = (0..rows * 32).map(|i| i * 7 + 3).collect();
    let x = DeviceBuffer::from_slice(&d, &values).unwrap();
    let map = TensorMap::dense(&x, [32, rows as u64], [32, STAGE_ROWS], SwizzleMode::B128).unwrap();
    let tiles = rows.div_ceil(STAGE_ROWS);
    let mut out =
        DeviceBuffer::from_slice(&d, &vec![u32::MAX; (tiles * STAGE_ROWS * 32) as usize]).unwrap();
    TmaRing::launch(&d, LaunchConfig::new(1, 64), &map, &mut out, tiles, 0).unwrap();
    let got = out.to_vec().unwrap();
    for (i, &v) in got.iter().enumerate() {
        let expect = if (i as u32) < rows * 32 { values[i] } else { 0 };
        assert_eq!(v, expect, "element {i} (row {}, col {})", i / 32, i % 32);
    }
}

#[test]
fn reading_a_stage_without_waiting_for_its_copy_is_a_race() {
    let d = device();
    let values: Vec<u32> = (0..16 * 32).collect();
    let x = DeviceBuffer::from_slice(&d, &values).unwrap();
    let map = TensorMap::dense(&x, [32, 16], [32, STAGE_ROWS], SwizzleMode::B128).unwrap();
    let mut out = DeviceBuffer::zeros(&d, 16 * 32).unwrap();
    let e = kernel_error(TmaRing::launch(
        &d,
        LaunchConfig::new(1, 64),
        &map,
        &mut out,
        2,
        1,
    ));
    assert_eq!(e.fault, Fault::SharedRace);
    // Thread 0 issued the copy; thread 32 (warp 1's first lane) reads first.
    assert_eq!(e.threads, [0, 32]);
    assert!(e.message.contains("nothing ordering"), "{}", e.message);
}

#[test]
fn bytes_of_a_copy_whose_phase_has_not_completed_are_pending() {
    let d = device();
    let values: Vec<u32> = (0..8 * 32).map(|i| i + 100).collect();
    let x = DeviceBuffer::from_slice(&d, &values).unwrap();
    let map = TensorMap::dense(&x, [32, 8], [32, 8], SwizzleMode::None).unwrap();
    let mut out = DeviceBuffer::zeros(&d, 32).unwrap();
    let cfg = LaunchConfig::new(1, 64);
    let e = kernel_error(TmaEarlyRead::launch(&d, cfg, &map, &mut out, 1));
    assert_eq!(e.fault, Fault::SharedRace);
    assert_eq!(e.threads, [0, 32]);
    assert!(
        e.message.contains("TMA copy") && e.message.contains("has completed"),
        "{}",
        e.message
    );
    TmaEarlyRead::launch(&d, cfg, &map, &mut out, 0).unwrap();
    assert_eq!(out.to_vec().unwrap(), values[..32]);
}

#[test]
fn a_box_past_the_tensor_reads_zeros_on_every_side() {
    let d = device();
    // dims (innermost first) [6, 5, 3] of u32, rows padded to 8 elements (32-byte stride).
    let (dims, stride1) = ([6u64, 5, 3], 8u64);
    let len = (dims[2] * dims[1] * stride1) as usize;
    let values: Vec<u32> = (0..len as u32).map(|i| 1000 + i).collect();
    let x = DeviceBuffer::from_slice(&d, &values).unwrap();
    let strides = [4, stride1 * 4, dims[1] * stride1 * 4];
    let bx = [8u32, 4, 2];
    let map = TensorMap::new(&x, dims, strides, bx, SwizzleMode::None).unwrap();
    for c in [[-3, -2, -1], [0, 0, 0], [2, 3, 2], [-8, 1, 0]] {
        let mut out = DeviceBuffer::zeros(&d, 64).unwrap();
        TmaBox3::launch(
            &d,
            LaunchConfig::new(1, 64),
            &map,
            &mut out,
            c[0],
            c[1],
            c[2],
        )
        .unwrap();
        let got = out.to_vec().unwrap();
        for (k, &v) in got.iter().enumerate() {
            let e = [k as i64 % 8, k as i64 / 8 % 4, k as i64 / 32];
            let at = [c[0] as i64 + e[0], c[1] as i64 + e[1], c[2] as i64 + e[2]];
            let inside = (0..3).all(|i| at[i] >= 0 && at[i] < dims[i] as i64);
            let expect = if inside {
                values[(at[2] * dims[1] as i64 * stride1 as i64 + at[1] * stride1 as i64 + at[0])
                    as usize]
            } else {
                0
            };
            assert_eq!(v, expect, "coords {c:?}, box element {e:?}");
        }
    }
}

#[test]
fn named_barriers_order_a_handoff_and_catch_misuse() {
    let d = device();
    let cfg = LaunchConfig::new(1, 64);
    let mut out = DeviceBuffer::zeros(&d, 32).unwrap();
    NamedHandoff::launch(&d, cfg, &mut out, 0).unwrap();
    let expect: Vec<u32> = (0..32).map(|t| t * 7 + 1).collect();
    assert_eq!(out.to_vec().unwrap(), expect);
    let e = kernel_error(NamedHandoff::launch(&d, cfg, &mut out, 1));
    assert_eq!(e.fault, Fault::SharedRace);
    let e = kernel_error(NamedHandoff::launch(&d, cfg, &mut out, 2));
    assert_eq!(e.fault, Fault::BarrierMisuse);
    assert!(e.message.contains("same count"), "{}", e.message);
}

#[test]
fn an_uninitialised_or_starved_mbarrier_is_diagnosed() {
    let d = device();
    let cfg = LaunchConfig::new(1, 32);
    let mut out = DeviceBuffer::zeros(&d, 32).unwrap();
    let e = kernel_error(MbarrierMisuse::launch(&d, cfg, &mut out, 0));
    assert_eq!(e.fault, Fault::BarrierMisuse);
    assert!(
        e.message.contains("before any thread initialised it"),
        "{}",
        e.message
    );
    let e = kernel_error(MbarrierMisuse::launch(&d, cfg, &mut out, 1));
    assert_eq!(e.fault, Fault::Deadlock);
    assert!(
        e.message.contains("1 of 1 arrivals and 0 bytes still due"),
        "{}",
        e.message
    );
}

#[test]
fn tensor_maps_the_hardware_cannot_copy_are_errors() {
    let d = device();
    let x = DeviceBuffer::<u32>::zeros(&d, 100).unwrap();
    let rule = |r: Result<TensorMap<'_, u32, 2>, ck_core::host::LaunchError>| match r {
        Err(e) => (e.rule(), e.message()),
        Ok(_) => panic!("accepted"),
    };
    let (r, m) = rule(TensorMap::dense(&x, [32, 8], [32, 8], SwizzleMode::None));
    assert_eq!(r, "tensor-map");
    assert!(m.contains("its buffer has 400 bytes"), "{m}");
    let (r, m) = rule(TensorMap::dense(&x, [10, 10], [10, 2], SwizzleMode::None));
    assert_eq!(r, "tensor-map");
    assert!(m.contains("multiples of 16 bytes"), "{m}");
    let (r, _) = rule(TensorMap::dense(&x, [4, 4], [64, 1], SwizzleMode::B128));
    assert_eq!(r, "tensor-map");
}
