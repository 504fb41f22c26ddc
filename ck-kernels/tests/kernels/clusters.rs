//! Thread-block clusters on the emulator: the cluster's ids, a ring of TMA copies multicast to
//! both blocks of a cluster with the stages released through each other's mbarriers (checked
//! against the tensor), and each way of getting the cluster's synchronisation wrong caught with
//! its diagnosis.

use ck_core::device::*;
use ck_core::host::{
    Device, DeviceBuffer, Fault, KernelError, LaunchConfig, LaunchError, TensorMap,
};
use ck_core::wgmma::SwizzleMode;
use ck_macros::tile_kernel;

/// Rows of 32 u32 per tile.
const TILE_ROWS: u32 = 8;

#[tile_kernel(block = 32, cluster = 2)]
fn cluster_ids(output: GlobalMut<u32>) {
    output.store(
        block_idx() * 32 + thread_idx(),
        100 * cluster_ctarank() + cluster_size(),
    );
}

#[tile_kernel(block = 32)]
fn no_cluster_ids(output: GlobalMut<u32>) {
    output.store(thread_idx(), 100 * cluster_ctarank() + cluster_size());
}

/// The `multicast` exercise (`ck_kernels::probes::exercise::multicast`) with a switch per rule to
/// break: streams `tiles` tiles of 8 rows × 32 u32 into both blocks of a cluster through two
/// stages, as a multicast GEMM's producer and consumers do: rank 0's thread 0 multicasts each tile into
/// both blocks; each block's thread 0 waits until its stage is free and announces the bytes on
/// its own "full" barrier; each block's warp 1 waits for the tile, writes it to its block's
/// half of `output` and releases the stage on the "empty" barrier of *every* block (rank 0's
/// producer writes both). Modes break one rule each: 1, rank 1 never releases; 2, no
/// `cluster_sync` before returning; 3, warp 1 reads without waiting; 4, `block_sync` instead of
/// `cluster_sync` after the barriers' `init`; 5, releases go to a rank past the cluster; 6, one
/// thread returns before the last `cluster_sync`.
#[tile_kernel(block = 64, cluster = 2)]
fn cluster_ring(input: Tma<u32, 2>, output: GlobalMut<u32>, tiles: u32, mode: u32) {
    let stage = shared!(u32; 2 * 256);
    // full[s] = s, empty[s] = 2 + s, in each block.
    let bars = shared!(Mbarrier; 4);
    let (t, rank) = (thread_idx(), cluster_ctarank());
    if t == 0 {
        for s in 0..2 {
            bars.init(s, 1);
            bars.init(2 + s, cluster_size());
        }
        fence_barrier_init();
    }
    if mode == 4 {
        block_sync();
    } else {
        cluster_sync();
    }
    if warp_id() == 0 {
        if t == 0 {
            for j in 0..tiles {
                let (s, use_) = (j % 2, j / 2);
                if use_ > 0 {
                    bars.wait(2 + s, (use_ - 1) % 2);
                }
                bars.arrive_expect_tx(s, input.box_bytes());
                if rank == 0 {
                    let row = (TILE_ROWS * j) as i32;
                    input.copy_to_shared_multicast([0, row], (&stage, 256 * s), (&bars, s), 0b11);
                }
            }
        }
    } else {
        let lane = lane_id();
        let ranks = if mode == 5 { 3 } else { cluster_size() };
        for j in 0..tiles {
            let s = j % 2;
            if mode != 3 {
                bars.wait(s, (j / 2) % 2);
            }
            for r in 0..TILE_ROWS {
                let row = (block_idx() * tiles + j) * TILE_ROWS + r;
                output.store(row * 32 + lane, stage.load(256 * s + r * 32 + lane));
            }
            warp_sync();
            if lane == 0 && !(mode == 1 && rank == 1) {
                for peer in 0..ranks {
                    bars.arrive_cluster(2 + s, peer);
                }
            }
        }
    }
    if mode == 6 && rank == 1 && t == 33 {
        return;
    }
    if mode != 2 {
        cluster_sync();
    }
}

fn device() -> Device {
    Device::Emulator { workers: 2 }
}

fn kernel_error<T: std::fmt::Debug>(r: Result<T, LaunchError>) -> KernelError {
    match r {
        Err(LaunchError::Kernel(e)) => e,
        other => panic!("expected a kernel fault, got {other:?}"),
    }
}

/// `cluster_ring` over a tensor of `rows` rows in `clusters` clusters; `output` starts at
/// u32::MAX so that every element written shows.
fn ring(rows: u32, clusters: u32, mode: u32) -> (Vec<u32>, Result<Vec<u32>, LaunchError>) {
    let d = device();
    let values: Vec<u32> = (0..rows * 32).map(|i| i * 13 + 5).collect();
    let x = DeviceBuffer::from_slice(&d, &values).unwrap();
    let map = TensorMap::dense(&x, [32, rows as u64], [32, TILE_ROWS], SwizzleMode::None).unwrap();
    let tiles = rows.div_ceil(TILE_ROWS);
    let len = 2 * clusters * tiles * TILE_ROWS * 32;
    let mut out = DeviceBuffer::from_slice(&d, &vec![u32::MAX; len as usize]).unwrap();
    let cfg = LaunchConfig::new(2 * clusters, 64);
    let r = ClusterRing::launch(&d, cfg, &map, &mut out, tiles, mode);
    (values, r.and_then(|_| out.to_vec()))
}

#[test]
fn blocks_know_their_rank_and_the_cluster_size() {
    let d = device();
    let mut out = DeviceBuffer::<u32>::zeros(&d, 6 * 32).unwrap();
    ClusterIds::launch(&d, LaunchConfig::new(6, 32), &mut out).unwrap();
    let got = out.to_vec().unwrap();
    for (i, &v) in got.iter().enumerate() {
        let block = i as u32 / 32;
        assert_eq!(
            v,
            100 * (block % 2) + 2,
            "thread {} of block {block}",
            i % 32
        );
    }
    let mut one = DeviceBuffer::<u32>::zeros(&d, 32).unwrap();
    NoClusterIds::launch(&d, LaunchConfig::new(1, 32), &mut one).unwrap();
    assert!(one.to_vec().unwrap().iter().all(|&v| v == 1));
}

#[test]
fn a_grid_of_part_clusters_is_refused() {
    let d = device();
    let mut out = DeviceBuffer::<u32>::zeros(&d, 5 * 32).unwrap();
    let e = ClusterIds::launch(&d, LaunchConfig::new(5, 32), &mut out).unwrap_err();
    assert_eq!(e.rule(), "grid-size", "{e}");
    assert!(e.message().contains("multiple of 2"), "{e}");
    // A hand-made spec outside the macro's 1..=8 is refused before anything runs.
    for c in [0, 9] {
        let spec = ck_core::kernel::KernelSpec {
            cluster: Some(c),
            ..ClusterIds::SPEC
        };
        let e = ck_core::host::validate(&d, &spec, LaunchConfig::new(72, 32)).unwrap_err();
        assert_eq!(e.rule(), "grid-size", "{e}");
        assert!(e.message().contains("1 to 8"), "{e}");
    }
}

#[test]
fn the_multicast_exercise_matches_its_reference() {
    for rows in [1, 8, 45, 200] {
        let r = ck_kernels::checks::run_exercise(&device(), "multicast", rows, 3).unwrap();
        assert_eq!(r.mismatch, None, "{rows} rows");
    }
}

#[test]
fn a_multicast_ring_delivers_every_tile_to_both_blocks() {
    // 45 rows: 6 tiles, the last with 5 rows and zero fill; three clusters.
    let (rows, clusters) = (45, 3);
    let (values, got) = ring(rows, clusters, 0);
    let got = got.unwrap();
    let per_block = (rows.div_ceil(TILE_ROWS) * TILE_ROWS * 32) as usize;
    for (i, &v) in got.iter().enumerate() {
        let (block, at) = (i / per_block, i % per_block);
        let expect = values.get(at).copied().unwrap_or(0);
        assert_eq!(v, expect, "block {block}, row {}, col {}", at / 32, at % 32);
    }
}

#[test]
fn a_block_that_never_releases_its_stages_deadlocks_the_cluster() {
    let e = kernel_error(ring(45, 1, 1).1);
    assert_eq!(e.fault, Fault::Deadlock, "{e}");
    assert!(
        e.message
            .contains("cluster rank 0: thread 0 waits for the mbarrier")
            && e.message.contains("cluster rank 1:"),
        "{e}"
    );
}

#[test]
fn returning_while_the_other_block_still_arrives_is_misuse() {
    let e = kernel_error(ring(45, 1, 2).1);
    assert_eq!(e.fault, Fault::BarrierMisuse, "{e}");
    assert!(
        e.message.contains("whose threads have all returned")
            && e.message.contains("cluster_sync before the kernel returns"),
        "{e}"
    );
}

#[test]
fn reading_a_multicast_stage_before_its_barrier_is_a_race() {
    let e = kernel_error(ring(45, 1, 3).1);
    assert_eq!(e.fault, Fault::SharedRace, "{e}");
    // The copy's issuer, rank 0's producer, and a reader of the block.
    assert!(
        e.message.contains("thread 32 of cluster rank 0 reads")
            && e.message.contains("thread 0 of cluster rank 0"),
        "{e}"
    );
}

#[test]
fn a_peer_using_barriers_not_ordered_after_their_init_is_a_race() {
    let e = kernel_error(ring(45, 1, 4).1);
    assert_eq!(e.fault, Fault::SharedRace, "{e}");
    assert!(
        e.message.contains("thread 0 of cluster rank 0 reads")
            && e.message.contains("thread 0 of cluster rank 1 wrote")
            && e.message.contains("cluster_sync"),
        "{e}"
    );
}

#[test]
fn a_rank_past_the_cluster_is_misuse() {
    let e = kernel_error(ring(45, 1, 5).1);
    assert_eq!(e.fault, Fault::BarrierMisuse, "{e}");
    assert!(e.message.contains("the cluster has ranks 0..2"), "{e}");
}

#[test]
fn a_thread_that_skips_the_cluster_barrier_is_divergence() {
    let e = kernel_error(ring(45, 1, 6).1);
    assert_eq!(e.fault, Fault::BarrierDivergence, "{e}");
    assert_eq!(e.threads, [33]);
    assert!(
        e.message
            .contains("of cluster rank 1 exited without reaching the cluster_sync"),
        "{e}"
    );
}
