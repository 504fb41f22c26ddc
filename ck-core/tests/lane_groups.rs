//! Lane groups (`ck_core::encoding`, "Lane groups"): CK's three rmsnorm2d configurations whose
//! lane dim spans less than a 64-lane wave — `generate.py`'s traits `(tm 8, tn 8, vn 8)`,
//! `(4, 16, 4)` and `(4, 16, 8)`, one wave each — with their X, gamma and reduced-Y encodings in
//! CK's raw spelling (`Rmsnorm2dFwdPipelineDefaultPolicy` over `Generic2dBlockShape`), nine in
//! all. Each map is checked against calculations written here:
//! - CK's own arithmetic on a 64-lane wave: `get_partition_index` = `[tid / 64, tid % 64]`, each
//!   P merge split into its digits with the top digit left unreduced, each X the mixed-radix
//!   number of its H digits (`xs_of_ck` below, which uses nothing of ck-core's adaptor);
//! - the closed forms the configuration means: thread `t` holds row `t / tn`, columns
//!   `vn·(t % tn) .. + vn`; gamma replicated over the `t / tn` groups; the reduced Y one value
//!   per row, replicated over the row's `tn` lanes.
//!
//! The R digits are compared with the closed forms only: CK numbers gamma's replicas by the
//! overflowing lane digit (a length-1 component), ck-rs by the warp digit; which threads share
//! an element is the same, and is checked against CK's arithmetic too.

use ck_core::encoding::{Checks, Encoding};
use ck_core::{Dims, Index};
use std::collections::BTreeMap;

/// `generate.py`'s `(ThreadPerBlock_M, ThreadPerBlock_N, Vector_N)` with Repeat_M = Repeat_N = 1,
/// through `rmsnorm2d_fwd_traits_` (warp per row: BlockWarps = (64 / tn, 1)) and
/// `Generic2dBlockShape`: `[Repeat, WarpPerBlock, ThreadPerWarp, Vector]` along M and N.
struct Config {
    tm: Index,
    tn: Index,
    vn: Index,
}

const CONFIGS: [Config; 3] = [
    Config {
        tm: 8,
        tn: 8,
        vn: 8,
    },
    Config {
        tm: 4,
        tn: 16,
        vn: 4,
    },
    Config {
        tm: 4,
        tn: 16,
        vn: 8,
    },
];

impl Config {
    fn shape(&self) -> ([Index; 4], [Index; 4]) {
        let wm = 64 / self.tn; // BlockWarps_M = total_warps · (warpSize / tn), total_warps = 1
        let tpw_m = self.tm / wm; // Warp_M / Vector_M
        ([1, wm, tpw_m, 1], [1, 1, self.tn, self.vn])
    }

    /// `MakeXBlockTileDistribution`.
    fn x(&self) -> Raw {
        let (m, n) = self.shape();
        Raw {
            r: vec![],
            h: vec![m.to_vec(), n.to_vec()],
            p_major: vec![vec![1, 2], vec![1, 2]],
            p_minor: vec![vec![1, 1], vec![2, 2]],
            y_major: vec![1, 1, 2, 2],
            y_minor: vec![0, 3, 0, 3],
        }
    }

    /// `MakeGammaBlockTileDistribution`: R = [WarpPerBlock_M, ThreadPerWarp_M].
    fn gamma(&self) -> Raw {
        let (m, n) = self.shape();
        Raw {
            r: vec![m[1], m[2]],
            h: vec![n.to_vec()],
            p_major: vec![vec![0, 1], vec![0, 1]],
            p_minor: vec![vec![0, 1], vec![1, 2]],
            y_major: vec![1, 1],
            y_minor: vec![0, 3],
        }
    }

    /// The X encoding reduced over X1 (`make_reduce_tile_distribution_encoding`, spec TV2b):
    /// R = [WarpPerBlock_N, ThreadPerWarp_N].
    fn reduced(&self) -> Raw {
        let (m, n) = self.shape();
        Raw {
            r: vec![n[1], n[2]],
            h: vec![m.to_vec()],
            p_major: vec![vec![1, 0], vec![1, 0]],
            p_minor: vec![vec![1, 0], vec![2, 1]],
            y_major: vec![1, 1],
            y_minor: vec![0, 3],
        }
    }
}

/// An encoding as CK's `tile_distribution_encoding` spells it.
struct Raw {
    r: Vec<Index>,
    h: Vec<Vec<Index>>,
    p_major: Vec<Vec<Index>>,
    p_minor: Vec<Vec<Index>>,
    y_major: Vec<Index>,
    y_minor: Vec<Index>,
}

impl Raw {
    fn encoding(&self) -> Encoding {
        let h: Vec<&[Index]> = self.h.iter().map(Vec::as_slice).collect();
        let pm: Vec<&[Index]> = self.p_major.iter().map(Vec::as_slice).collect();
        let pn: Vec<&[Index]> = self.p_minor.iter().map(Vec::as_slice).collect();
        Encoding::new(&self.r, &h, &pm, &pn, &self.y_major, &self.y_minor).unwrap()
    }

    fn len(&self, major: Index, minor: Index) -> Index {
        if major == 0 {
            self.r[minor as usize]
        } else {
            self.h[major as usize - 1][minor as usize]
        }
    }

    fn y_lengths(&self) -> Vec<Index> {
        (0..self.y_major.len())
            .map(|i| self.len(self.y_major[i], self.y_minor[i]))
            .collect()
    }

    /// CK's arithmetic for thread `tid` of a wave64 block at register index `y`: `(x, r)`.
    fn xs_of_ck(&self, tid: Index, y: &[Index]) -> (Vec<Index>, Vec<Index>) {
        let mut digit: BTreeMap<(Index, Index), Index> = BTreeMap::new();
        let ps = [tid / 64, tid % 64];
        for (p, &value) in ps.iter().enumerate() {
            let comps: Vec<(Index, Index)> = self.p_major[p]
                .iter()
                .zip(&self.p_minor[p])
                .map(|(&a, &b)| (a, b))
                .collect();
            // Merge: the last component is the fastest; the first takes what is left, unreduced.
            let mut rest = value;
            for (k, &(a, b)) in comps.iter().enumerate().rev() {
                let len = self.len(a, b);
                let d = if k == 0 { rest } else { rest % len };
                digit.insert((a, b), d);
                rest /= len;
            }
        }
        for (i, &v) in y.iter().enumerate() {
            digit.insert((self.y_major[i], self.y_minor[i]), v);
        }
        let xs = self
            .h
            .iter()
            .enumerate()
            .map(|(x, lens)| {
                lens.iter().enumerate().fold(0, |acc, (j, &l)| {
                    acc * l
                        + digit
                            .get(&(x as Index + 1, j as Index))
                            .copied()
                            .unwrap_or(0)
                })
            })
            .collect();
        let rs = (0..self.r.len())
            .map(|j| digit.get(&(0, j as Index)).copied().unwrap_or(0))
            .collect();
        (xs, rs)
    }
}

fn points(lens: &[Index]) -> Vec<Vec<Index>> {
    let mut out = vec![vec![]];
    for &l in lens {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..l).map(move |v| {
                    let mut q = p.clone();
                    q.push(v);
                    q
                })
            })
            .collect();
    }
    out
}

/// `(thread, y) -> (x, d, rs)` through ck-core with warp size `w`.
fn ours(e: &Encoding, w: u32, tid: Index, y: &[Index]) -> (Vec<Index>, Index, Vec<Index>) {
    let p = e.partition_index(tid as u32, w);
    let y = Dims::from_slice(y);
    (
        e.x_index(&p, &y).as_slice().to_vec(),
        e.d_index(&y),
        e.rs_index(&p).as_slice().to_vec(),
    )
}

/// Which threads hold each element (sorted), over the whole block.
fn holders(
    mut f: impl FnMut(Index, &[Index]) -> Vec<Index>,
    ys: &[Vec<Index>],
) -> BTreeMap<Vec<Index>, Vec<Index>> {
    let mut m: BTreeMap<Vec<Index>, Vec<Index>> = BTreeMap::new();
    for t in 0..64 {
        for y in ys {
            m.entry(f(t, y)).or_default().push(t);
        }
    }
    m
}

#[test]
fn the_nine_encodings_are_accepted_on_both_warp_sizes() {
    for c in &CONFIGS {
        for raw in [c.x(), c.gamma(), c.reduced()] {
            let e = raw.encoding();
            for w in [32, 64] {
                let v = e.first_error(&Checks::warp(w).block(64));
                assert!(
                    v.is_none(),
                    "tn {} warp {w}: {:?}",
                    c.tn,
                    v.map(|v| v.rule.name())
                );
            }
            assert_eq!(e.lanes(), c.tn, "the lane dim spans ThreadPerWarp_N lanes");
            assert_eq!(e.block_size(), 64);
        }
        // The reduced Y is ck-core's reduce of the X encoding.
        assert!(c
            .x()
            .encoding()
            .reduce(&[1])
            .unwrap()
            .same_as(&c.reduced().encoding()));
    }
}

#[test]
fn x_maps_are_cks_on_wave64_and_the_closed_form_on_both_warp_sizes() {
    for c in &CONFIGS {
        let raw = c.x();
        let e = raw.encoding();
        let ys = points(&raw.y_lengths());
        let mut seen = vec![0u32; (64 / c.tn * c.tn * c.vn) as usize];
        for t in 0..64 {
            for y in &ys {
                let want = vec![t / c.tn, c.vn * (t % c.tn) + y[3]];
                assert_eq!(
                    raw.xs_of_ck(t, y).0,
                    want,
                    "CK's wave64 map, tn {} t {t} y {y:?}",
                    c.tn
                );
                for w in [32, 64] {
                    let (x, d, _) = ours(&e, w, t, y);
                    assert_eq!(x, want, "tn {} warp {w} t {t} y {y:?}", c.tn);
                    assert_eq!(d, y[3], "D: only Vn is longer than 1");
                }
                seen[(want[0] * c.tn * c.vn + want[1]) as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "every element exactly once");
    }
}

#[test]
fn gamma_and_reduced_y_are_replicated_as_their_r_dims_say() {
    for c in &CONFIGS {
        let groups = 64 / c.tn;
        // Gamma: column vn·(t % tn) + v, replica t / tn (R = [groups, 1]).
        let raw = c.gamma();
        let e = raw.encoding();
        let ys = points(&raw.y_lengths());
        for t in 0..64 {
            for y in &ys {
                for w in [32, 64] {
                    let (x, d, rs) = ours(&e, w, t, y);
                    assert_eq!(x, [c.vn * (t % c.tn) + y[1]]);
                    assert_eq!((d, rs), (y[1], vec![t / c.tn, 0]));
                }
            }
        }
        let ck = holders(|t, y| raw.xs_of_ck(t, y).0, &ys);
        let mine = holders(|t, y| ours(&e, 32, t, y).0, &ys);
        assert_eq!(ck, mine, "the same threads share each gamma element");
        assert!(mine.values().all(|h| h.len() == groups as usize));
        // Reduced Y: row t / tn, one value per thread, the row's tn lanes replicas (R = [1, tn]).
        let raw = c.reduced();
        let e = raw.encoding();
        let ys = points(&raw.y_lengths());
        for t in 0..64 {
            for w in [32, 64] {
                let (x, d, rs) = ours(&e, w, t, &ys[0]);
                assert_eq!((x, d, rs), (vec![t / c.tn], 0, vec![0, t % c.tn]));
            }
            assert_eq!(raw.xs_of_ck(t, &ys[0]), (vec![t / c.tn], vec![0, t % c.tn]));
        }
    }
}

#[test]
fn a_lane_group_holds_the_same_elements_on_both_warp_sizes() {
    // On a 32-lane warp the 64 threads are two hardware warps; each lane group of tn threads
    // (aligned: tn divides 32) holds what it holds on a 64-lane wave.
    for c in &CONFIGS {
        let raw = c.x();
        let e = raw.encoding();
        let ys = points(&raw.y_lengths());
        for g in 0..64 / c.tn {
            let of = |w: u32| {
                let mut v: Vec<Vec<Index>> = (g * c.tn..(g + 1) * c.tn)
                    .flat_map(|t| ys.iter().map(move |y| (t, y)))
                    .map(|(t, y)| ours(&e, w, t, y).0)
                    .collect();
                v.sort();
                v
            };
            assert_eq!(of(32), of(64), "tn {} group {g}", c.tn);
            assert!(of(32).iter().all(|x| x[0] == g), "group {g} owns row {g}");
        }
    }
}
