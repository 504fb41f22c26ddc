//! Lower: a checked literal encoding → the tables the emitted code is made of, all computed by
//! `ck_core` (the closed form of each X, P digits, D place values, the Y points in D order and
//! in span order).

use crate::check::Checked;
use ck_core::distribution::for_each_point;
use ck_core::encoding::DigitSource;
use ck_core::Encoding;
use ck_core::Index;

/// One digit of a P coordinate, `(p / divisor) % length` (no `%` for the top digit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PDigit {
    /// Which P dim.
    pub p: usize,
    /// Position of the component in the P dim's list.
    pub k: usize,
    /// Place value inside the P dim.
    pub divisor: Index,
    /// Length of the component.
    pub length: Index,
    /// Most significant component (not reduced).
    pub top: bool,
}

/// A term `source · place` of an X coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Term {
    /// `y[i] · place`.
    Y(usize, Index),
    /// `digit · place`.
    P(PDigit, Index),
}

/// Everything the literal emitter needs.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// Number of P dims.
    pub np: usize,
    /// X lengths.
    pub x_lengths: Vec<Index>,
    /// Y lengths.
    pub y_lengths: Vec<Index>,
    /// R lengths.
    pub r_lengths: Vec<Index>,
    /// Registers per thread.
    pub thread_buffer_size: usize,
    /// Threads per warp.
    pub warp_size: u32,
    /// Threads per lane group: what the lane dim spans (the warp, or a divisor of it).
    pub lanes: u32,
    /// Threads per block.
    pub block_size: u32,
    /// Closed form of each X (terms with a zero digit dropped).
    pub x_terms: Vec<Vec<Term>>,
    /// Place value of each Y in D.
    pub d_places: Vec<Index>,
    /// The P digit each R component gets (None: owned by no P, always 0).
    pub rs_digits: Vec<Option<PDigit>>,
    /// Y points in D order.
    pub y_d_order: Vec<Vec<Index>>,
    /// `(y, d)` in span (sweep) order.
    pub y_span_order: Vec<(Vec<Index>, usize)>,
}

/// The P digit of component `(major, minor)`, if a P claims it.
fn p_digit(e: &ck_core::Encoding, major: Index, minor: Index) -> Option<PDigit> {
    (0..e.np()).find_map(|p| {
        let (ma, mi) = (e.p_major(p), e.p_minor(p));
        let k = (0..ma.len()).find(|&k| ma.get(k) == major && mi.get(k) == minor)?;
        match e.digit_source(major, minor) {
            DigitSource::P {
                divisor,
                length,
                top,
                ..
            } => Some(PDigit {
                p,
                k,
                divisor,
                length,
                top,
            }),
            _ => None,
        }
    })
}

/// Lowers a checked definition with literal lengths, whose encoding is `e`.
pub fn lower(c: &Checked, e: &Encoding) -> Lowered {
    let x_terms = (0..e.nx())
        .map(|x| {
            let n = e.h_lengths(x).len();
            e.x_terms(x)[..n]
                .iter()
                .enumerate()
                .filter_map(|(j, t)| match t.source {
                    DigitSource::Zero => None,
                    DigitSource::Y(i) => Some(Term::Y(i as usize, t.place)),
                    DigitSource::P { .. } => {
                        p_digit(e, x as Index + 1, j as Index).map(|d| Term::P(d, t.place))
                    }
                })
                .collect()
        })
        .collect();
    let mut y_d_order = Vec::new();
    for_each_point(&e.y_lengths(), |y| y_d_order.push(y.as_slice().to_vec()));
    let mut y_span_order = Vec::new();
    for_each_point(&e.span_box(), |s| {
        let y = e.y_from_span_index(s);
        y_span_order.push((y.as_slice().to_vec(), e.d_index(&y) as usize));
    });
    Lowered {
        np: e.np(),
        x_lengths: e.x_lengths().as_slice().to_vec(),
        y_lengths: e.y_lengths().as_slice().to_vec(),
        r_lengths: e.r_lengths().as_slice().to_vec(),
        thread_buffer_size: e.thread_buffer_size() as usize,
        warp_size: c.warp_size.unwrap_or(32),
        lanes: e.lanes() as u32,
        block_size: c.block_size.unwrap_or(0),
        x_terms,
        d_places: e.y_lengths().reverse_exclusive_scan().as_slice().to_vec(),
        rs_digits: (0..e.nr()).map(|j| p_digit(e, 0, j as Index)).collect(),
        y_d_order,
        y_span_order,
    }
}
