//! `Welford` merged in random tree orders (as lanes, warps and a thread's registers
//! combine) against a two-pass fp64 mean and variance computed here, on rows far from zero
//! (`offset + spread · u`), where an f32 mean alone would be off by `ulp(offset) / 2`.

use ck_core::tile::Welford;
use proptest::prelude::*;

/// Merges `xs` as a binary tree whose split points come from `seed` (a small LCG).
fn tree(xs: &[f32], seed: &mut u64) -> Welford {
    if xs.len() == 1 {
        return Welford::of(xs[0]);
    }
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let cut = 1 + (*seed >> 33) as usize % (xs.len() - 1);
    let (a, b) = (tree(&xs[..cut], seed), tree(&xs[cut..], seed));
    Welford::merge(a, b)
}

proptest! {
    #[test]
    fn any_merge_order_keeps_mean_and_variance(
        offset in prop::sample::select(vec![0.0f32, 1e4, -1e4, 3e5]),
        spread in prop::sample::select(vec![1e-2f32, 1.0, 50.0]),
        units in prop::collection::vec(-1.0f32..1.0, 1..300),
        seed in any::<u64>(),
        empties in 0usize..3,
    ) {
        let xs: Vec<f32> = units.iter().map(|u| offset + spread * u).collect();
        let n = xs.len() as f64;
        let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / n;
        let m2: f64 = xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum();
        let sigma = (m2 / n).sqrt();
        let mut s = seed;
        let mut w = tree(&xs, &mut s);
        // Empty accumulators (padding) change nothing, on either side.
        for _ in 0..empties {
            w = Welford::merge(Welford::EMPTY, w);
            w = Welford::merge(w, Welford::EMPTY);
        }
        prop_assert_eq!(w.count as f64, n);
        // x − mean as the kernels form it, for every x: to 1e-4 of the spread (an f32 mean
        // alone would be off by up to ulp(3e5) / 2 = 0.016).
        let scale = sigma.max(spread as f64 * 1e-3);
        for &x in &xs {
            let got = w.deviation(x) as f64;
            let want = x as f64 - mean;
            prop_assert!((got - want).abs() <= 1e-4 * scale, "x − mean {} vs {}", got, want);
        }
        prop_assert!(
            (w.m2 as f64 - m2).abs() <= 1e-4 * m2 + 1e-6 * scale * scale,
            "m2 {} vs {}", w.m2, m2
        );
    }
}
