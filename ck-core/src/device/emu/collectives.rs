//! The data of the warp-wide instructions the scheduler completes at a rendezvous: `mma.sync`
//! `ldmatrix` and `stmatrix`, lane by lane as the PTX ISA lays out their fragments.

use std::prelude::rust_2021::*;

use super::state::{self, BlockState, Site};
use super::{Payload, Reply};
use crate::report::Fault;

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` over a warp's fragments (PTX ISA
/// layouts; g = lane / 4, t = lane % 4): A regs hold rows {g, g + 8} × cols {2t, 2t + 1} and
/// {2t + 8, 2t + 9}; B regs k {2t, 2t + 1} and {2t + 8, 2t + 9} × col g; C/D rows {g, g + 8} ×
/// cols {2t, 2t + 1}. Products of bf16 are exact in f32; the sum is formed in f64 and rounded
/// once (the tensor core's own order differs by a few ulps).
pub(super) fn mma_bf16(p: &[Payload]) -> Vec<Reply> {
    let bf = |bits: u32, hi: bool| {
        f32::from_bits(if hi { bits & 0xffff_0000 } else { bits << 16 }) as f64
    };
    let (mut a, mut b, mut c) = ([[0f64; 16]; 16], [[0f64; 8]; 16], [[0f64; 8]; 16]);
    for (lane, v) in p.iter().enumerate().take(32) {
        let (g, t) = (lane / 4, lane % 4);
        for (r, (row, col)) in [
            (g, 2 * t),
            (g + 8, 2 * t),
            (g, 2 * t + 8),
            (g + 8, 2 * t + 8),
        ]
        .into_iter()
        .enumerate()
        {
            a[row][col] = bf(v[r], false);
            a[row][col + 1] = bf(v[r], true);
        }
        for (r, k) in [2 * t, 2 * t + 8].into_iter().enumerate() {
            b[k][g] = bf(v[4 + r], false);
            b[k + 1][g] = bf(v[4 + r], true);
        }
        for (r, (row, col)) in [
            (g, 2 * t),
            (g, 2 * t + 1),
            (g + 8, 2 * t),
            (g + 8, 2 * t + 1),
        ]
        .into_iter()
        .enumerate()
        {
            c[row][col] = f32::from_bits(v[6 + r]) as f64;
        }
    }
    (0..32)
        .map(|lane| {
            let (g, t) = (lane / 4, lane % 4);
            let d = |row: usize, col: usize| {
                let s: f64 = (0..16).map(|k| a[row][k] * b[k][col]).sum::<f64>() + c[row][col];
                (s as f32).to_bits()
            };
            [
                d(g, 2 * t),
                d(g, 2 * t + 1),
                d(g + 8, 2 * t),
                d(g + 8, 2 * t + 1),
            ]
        })
        .collect()
}

/// `ldmatrix.x4` (`trans`: `.trans`): lanes 8j..8j+8 give the shared byte addresses of the 8
/// rows (16 bytes each) of matrix j; lane l gets, in reg j, elements (l / 4, 2(l % 4) + {0, 1})
/// of matrix j, or with `.trans` elements (2(l % 4) + {0, 1}, l / 4).
pub(super) fn ldmatrix(
    st: &BlockState,
    warp: u32,
    site: Site,
    p: &[Payload],
    trans: bool,
) -> Result<Vec<Reply>, ()> {
    check_rows(st, (warp, site), p, state::Kind::Load, "ldmatrix")?;
    let elem = |matrix: usize, row: usize, col: usize| {
        st.shared.load(p[8 * matrix + row][0] as usize + 2 * col, 2)
    };
    Ok((0..32)
        .map(|lane| {
            let (g, t) = (lane / 4, lane % 4);
            let mut r = [0u32; 4];
            for (j, reg) in r.iter_mut().enumerate() {
                *reg = if trans {
                    elem(j, 2 * t, g) | (elem(j, 2 * t + 1, g) << 16)
                } else {
                    elem(j, g, 2 * t) | (elem(j, g, 2 * t + 1) << 16)
                };
            }
            r
        })
        .collect())
}

/// `stmatrix.x4` (`trans`: `.trans`): lanes 8j..8j+8 give the shared byte addresses of the 8
/// rows (16 bytes each) of matrix j (word 0); lane l's reg j (word 1 + j) holds elements
/// (l / 4, 2(l % 4) + {0, 1}) of matrix j, low half first — with `.trans` stored as elements
/// (2(l % 4) + {0, 1}, l / 4).
pub(super) fn stmatrix(
    st: &BlockState,
    warp: u32,
    site: Site,
    p: &[Payload],
    trans: bool,
) -> Result<Vec<Reply>, ()> {
    check_rows(st, (warp, site), p, state::Kind::Store, "stmatrix")?;
    for (lane, v) in p.iter().enumerate().take(32) {
        st.note_generic_write(warp * 32 + lane as u32, site, v[0] as usize, 16);
        let (g, t) = (lane / 4, lane % 4);
        for j in 0..4 {
            let (lo, hi) = (v[1 + j] & 0xffff, v[1 + j] >> 16);
            if trans {
                st.shared.store(p[8 * j + 2 * t][0] as usize + 2 * g, 2, lo);
                st.shared
                    .store(p[8 * j + 2 * t + 1][0] as usize + 2 * g, 2, hi);
            } else {
                let row = p[8 * j + g][0] as usize;
                st.shared.store(row + 4 * t, 2, lo);
                st.shared.store(row + 4 * t + 2, 2, hi);
            }
        }
    }
    Ok(vec![[0; 4]; 32])
}

/// Each lane's row of an `ldmatrix` or `stmatrix` (`what`): 16-byte aligned inside shared
/// memory, checked for races and counted by the bank profiler.
fn check_rows(
    st: &BlockState,
    (warp, site): (u32, Site),
    p: &[Payload],
    kind: state::Kind,
    what: &str,
) -> Result<(), ()> {
    let size = st.shared.bytes();
    for (lane, v) in p.iter().enumerate().take(32) {
        let tid = warp * 32 + lane as u32;
        let addr = v[0] as usize;
        if !addr.is_multiple_of(16) || addr + 16 > size {
            st.fault(
                Fault::OutOfBounds,
                vec![tid],
                Some(addr as u64),
                format!("thread {tid}: {what} row at shared byte {addr} (at {site}) is not a 16-byte aligned row inside the {size} bytes of shared memory"),
            );
            return Err(());
        }
        st.check_race(tid, site, kind, addr, 16, false);
        if st.error.borrow().is_some() {
            return Err(());
        }
        st.profile(tid, site, kind, false, st.shared.address(addr), 16);
    }
    Ok(())
}
