//! `block_reduce_x` over values of several words — a `(max, sum)` pair and a Welford
//! accumulator (each thread's registers folded by `welford_x`) — on a distribution whose rows span lanes *and* warps (so both the shuffles and
//! the shared-memory step move every word), against fp64 row statistics computed here; and
//! `last_arrival`, the hand-over of parts from several blocks to the last one.

use ck_core::device::*;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig};
use ck_core::tile::{block_reduce_x, make_tile_window, welford_x, View2, Welford};
use ck_kernels::checks::Rng;
use ck_macros::{tile_distribution, tile_kernel};

tile_distribution! {
    /// 8 rows × 512 over 4 warps: a row spans 2 warps × 16 lanes × 2 × 8 registers.
    struct Tile {
        warp_size: 32, block_size: 128,
        h: { m: [repeat: 2, warp: 2, lane: 2, vec: 1], n: [repeat: 2, warp: 2, lane: 16, vec: 8] },
        p: [[m.warp, n.warp], [m.lane, n.lane]],
        y: [m.repeat, m.vec, n.repeat, n.vec],
    }
}

/// Scratch: BLOCK_SIZE × 2 rows per thread × 4 words (the Welford accumulator).
const SCRATCH: usize = 128 * 2 * 4;

/// Row statistics of an `8·grid × 512` matrix: max and sum (one pair reduction), and mean and
/// variance (one Welford reduction); the threads holding column 0 of a row write them.
#[tile_kernel(block = 128, distributions(Tile))]
fn row_stats(
    x: Global<f32>,
    max: GlobalMut<f32>,
    sum: GlobalMut<f32>,
    mean: GlobalMut<f32>,
    var: GlobalMut<f32>,
    rows: u32,
) {
    let scratch = shared!(u32; SCRATCH);
    let origin = [(block_idx() * 8) as i32, 0];
    let t = make_tile_window::<Tile, _>(View2::<_, f32, 8>::new(x, rows, 512, 512), origin)
        .load::<f32>();
    let pairs = t.map(|v| (v, v));
    let max_sum = block_reduce_x::<Tile, (f32, f32), 1, SCRATCH>(
        &pairs,
        |a, b| (a.0.max(b.0), a.1 + b.1),
        &scratch,
    );
    let w = welford_x::<Tile, 1>(&t);
    let stats = block_reduce_x::<Tile, Welford, 1, SCRATCH>(&w, Welford::merge, &scratch);
    // One value per row: views of one column, so only the tile's column 0 is stored.
    let column = |g: GlobalMut<f32>| View2::<_, f32, 1>::new(g, rows, 1, 1);
    make_tile_window::<Tile, _>(column(max), origin).store(&max_sum.map(|p| p.0));
    make_tile_window::<Tile, _>(column(sum), origin).store(&max_sum.map(|p| p.1));
    make_tile_window::<Tile, _>(column(mean), origin).store(&stats.map(Welford::row_mean));
    make_tile_window::<Tile, _>(column(var), origin).store(&stats.map(|s| s.variance()));
}

#[test]
fn pairs_and_welford_accumulators_reduce_across_lanes_and_warps() {
    let device = Device::emulator();
    let rows = 16u32;
    // Rows with a large offset: 1e4 + a value in [-1, 1]. The Welford variance keeps the
    // spread (≈ 1/3); E[x²] − E[x]² in f32 would lose it entirely (ulp of 1e8 is 8).
    let mut rng = Rng(9);
    let x: Vec<f32> = (0..rows * 512).map(|_| 1e4 + rng.f32()).collect();
    let xd = DeviceBuffer::from_slice(&device, &x).unwrap();
    let mut outs: Vec<DeviceBuffer<f32>> = (0..4)
        .map(|_| DeviceBuffer::from_slice(&device, &vec![f32::NAN; rows as usize]).unwrap())
        .collect();
    let [max, sum, mean, var] = &mut outs[..] else {
        unreachable!()
    };
    RowStats::launch(
        &device,
        LaunchConfig::new(rows / 8, 128),
        &xd,
        max,
        sum,
        mean,
        var,
        rows,
    )
    .unwrap();
    let got: Vec<Vec<f32>> = outs.iter().map(|b| b.to_vec().unwrap()).collect();
    for r in 0..rows as usize {
        let row: Vec<f64> = x[r * 512..(r + 1) * 512]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let want_max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let want_sum: f64 = row.iter().sum();
        let want_mean = want_sum / 512.0;
        let want_var = row.iter().map(|v| (v - want_mean).powi(2)).sum::<f64>() / 512.0;
        assert_eq!(got[0][r] as f64, want_max, "row {r} max");
        assert!(
            (got[1][r] as f64 - want_sum).abs() <= 1e-6 * want_sum,
            "row {r} sum"
        );
        assert!(
            (got[2][r] as f64 - want_mean).abs() <= 1e-6 * want_mean,
            "row {r} mean"
        );
        // The deviations from the shift (a value of the row) are exact in f32, so only
        // roundings of quantities of the spread's size (~0.5) remain: a few ulp of f32 over 16
        // registers and 5 merge levels, well under 1e-5. (An f32 mean of 1e4 alone, off by up to
        // ulp(1e4)/2 ≈ 5e-4, would cost ~1e-4; E[x²] − E[x]² in f32 about 100 %.)
        assert!(
            (got[3][r] as f64 - want_var).abs() <= 1e-5 * want_var,
            "row {r} variance {} vs {want_var}",
            got[3][r]
        );
    }
}

/// Block `b` stores part `b` (`64 b + t` at thread `t`) and arrives at ticket `b mod 2`; the
/// last of each ticket's blocks adds its group's parts into row `b mod 2` of `out` and counts
/// itself in `winners`.
#[tile_kernel(block = 64)]
fn hand_over(
    parts: GlobalMut<u32>,
    tickets: GlobalMut<u32>,
    out: GlobalMut<u32>,
    winners: GlobalMut<u32>,
) {
    let said = shared!(u32; 1);
    let (b, t, grid) = (block_idx(), thread_idx(), grid_dim());
    parts.store(64 * b + t, 64 * b + t);
    fence_acq_rel_gpu();
    let group = b % 2;
    let arrivals = (grid + 1 - group) / 2;
    if last_arrival((tickets, group), arrivals, &said, block_sync) {
        let mut sum = 0;
        let mut other = group;
        while other < grid {
            sum += parts.load(64 * other + t);
            other += 2;
        }
        out.store(64 * group + t, sum);
        if t == 0 {
            winners.atomic_add(group, 1);
        }
    }
}

/// Seven blocks on two tickets (blocks 0, 2, 4, 6 and 1, 3, 5), launched twice on the same
/// tickets: each time exactly one block of each group sums every part of its group, and the
/// tickets are back at zero for the next launch.
#[test]
fn the_last_arrival_sums_every_part_and_resets_its_ticket() {
    let device = Device::emulator();
    let grid = 7u32;
    let mut parts = DeviceBuffer::<u32>::zeros(&device, 64 * grid as usize).unwrap();
    let mut tickets = DeviceBuffer::<u32>::zeros(&device, 2).unwrap();
    let mut winners = DeviceBuffer::<u32>::zeros(&device, 2).unwrap();
    for launch in 1..=2 {
        let mut out = DeviceBuffer::<u32>::zeros(&device, 128).unwrap();
        let cfg = LaunchConfig::new(grid, 64);
        HandOver::launch(
            &device,
            cfg,
            &mut parts,
            &mut tickets,
            &mut out,
            &mut winners,
        )
        .unwrap();
        let out = out.to_vec().unwrap();
        for group in 0..2u32 {
            let blocks: Vec<u32> = (group..grid).step_by(2).collect();
            for t in 0..64u32 {
                let want: u32 = blocks.iter().map(|b| 64 * b + t).sum();
                assert_eq!(
                    out[(64 * group + t) as usize],
                    want,
                    "group {group} thread {t}"
                );
            }
        }
        assert_eq!(
            winners.to_vec().unwrap(),
            [launch, launch],
            "one winner per group"
        );
        assert_eq!(tickets.to_vec().unwrap(), [0, 0], "tickets reset");
    }
}
