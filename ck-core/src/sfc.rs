//! Space-filling curves: the order in which a tile's accesses are issued (spec §7).
//!
//! A curve over tensor lengths `L` with `S` scalars per access visits the *access grid*
//! `A = L / S` (every `L[i]` must be divisible by `S[i]`; CK rejects partial accesses) in the
//! dimension order `O` (`O[0]` slowest). With `snake`, a dimension runs backwards whenever the
//! un-snaked linear index of all slower dimensions is odd, so consecutive accesses are always
//! neighbours:
//!
//! ```text
//!   4×3, order (0,1), snake:          access t:  0 1 2      (row 0 forwards)
//!                                                5 4 3      (row 1 backwards)
//!                                                6 7 8
//!                                               11 10 9
//! ```
//! ```
//! use ck_core::SpaceFillingCurve;
//! let c = SpaceFillingCurve::new(&[4, 3], &[0, 1], &[1, 1], true).unwrap();
//! assert_eq!(c.num_access(), 12);
//! assert_eq!(c.index(4).as_slice(), &[1, 1]);
//! assert_eq!(c.forward_step(2).as_slice(), &[1, 0]); // (0,2) -> (1,2)
//! let e = SpaceFillingCurve::new(&[5, 7], &[0, 1], &[2, 3], false).unwrap_err();
//! assert_eq!(e.rule.name(), "sfc-not-divisible");
//! ```

use crate::dims::{Dims, MAX_DIMS};
use crate::error::{Error, Rule};
use crate::Index;

/// A checked space-filling curve. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpaceFillingCurve {
    lengths: Dims,
    order: Dims,
    scalars: Dims,
    snake: bool,
    access_lengths: Dims,
    ordered_access_lengths: Dims,
    num_access: Index,
}

const fn to_dims(what: &'static str, s: &[Index]) -> Result<Dims, Error> {
    match Dims::try_from_slice(s) {
        Some(d) => Ok(d),
        None => {
            Err(Error::new(Rule::CapacityExceeded, what)
                .values(s.len() as Index, MAX_DIMS as Index))
        }
    }
}

impl SpaceFillingCurve {
    /// Checks the parameters and derives the access grid.
    pub const fn new(
        lengths: &[Index],
        order: &[Index],
        scalars_per_access: &[Index],
        snake: bool,
    ) -> Result<SpaceFillingCurve, Error> {
        let n = lengths.len();
        if n == 0 {
            return Err(Error::new(Rule::EmptyList, "lengths"));
        }
        if order.len() != n {
            return Err(Error::new(Rule::ListLengthMismatch, "order")
                .values(order.len() as Index, n as Index));
        }
        if scalars_per_access.len() != n {
            return Err(Error::new(Rule::ListLengthMismatch, "scalars per access")
                .values(scalars_per_access.len() as Index, n as Index));
        }
        let lengths_d = match to_dims("lengths", lengths) {
            Ok(d) => d,
            Err(e) => return Err(e),
        };
        let order_d = Dims::from_slice(order);
        let scalars_d = Dims::from_slice(scalars_per_access);
        let mut product: i64 = 1;
        let mut i = 0;
        while i < n {
            if lengths[i] < 1 {
                return Err(Error::new(Rule::LengthNotPositive, "lengths")
                    .at(i)
                    .values(lengths[i], 0));
            }
            if scalars_per_access[i] < 1 {
                return Err(Error::new(Rule::LengthNotPositive, "scalars per access")
                    .at(i)
                    .values(scalars_per_access[i], 0));
            }
            product *= lengths[i] as i64;
            if product > Index::MAX as i64 {
                return Err(Error::new(Rule::IndexOverflow, "lengths").values(Index::MAX, 0));
            }
            i += 1;
        }
        if !order_d.is_permutation() {
            return Err(Error::new(Rule::SfcOrderNotPermutation, "order").values(n as Index, 0));
        }
        let mut access = Dims::splat(n, 0);
        i = 0;
        while i < n {
            if lengths[i] % scalars_per_access[i] != 0 {
                return Err(Error::new(Rule::SfcNotDivisible, "lengths")
                    .at(i)
                    .values(lengths[i], scalars_per_access[i]));
            }
            access.set(i, lengths[i] / scalars_per_access[i]);
            i += 1;
        }
        let mut ordered = Dims::splat(n, 0);
        i = 0;
        while i < n {
            ordered.set(i, access.get(order[i] as usize));
            i += 1;
        }
        Ok(SpaceFillingCurve {
            lengths: lengths_d,
            order: order_d,
            scalars: scalars_d,
            snake,
            access_lengths: access,
            ordered_access_lengths: ordered,
            num_access: access.product(),
        })
    }

    /// Tensor lengths.
    pub const fn lengths(&self) -> Dims {
        self.lengths
    }

    /// Dimension order (`order[0]` slowest).
    pub const fn order(&self) -> Dims {
        self.order
    }

    /// Scalars per access along each dim.
    pub const fn scalars_per_access(&self) -> Dims {
        self.scalars
    }

    /// Whether the curve snakes.
    pub const fn is_snake(&self) -> bool {
        self.snake
    }

    /// Accesses along each tensor dim: `lengths[i] / scalars[i]`.
    pub const fn access_lengths(&self) -> Dims {
        self.access_lengths
    }

    /// Total number of accesses.
    pub const fn num_access(&self) -> Index {
        self.num_access
    }

    /// The tensor index (first scalar) of access `t`, or an error if `t ∉ 0..num_access`.
    pub const fn try_index(&self, t: Index) -> Result<Dims, Error> {
        if t < 0 || t >= self.num_access {
            return Err(Error::new(Rule::IndexOutOfRange, "access").values(t, self.num_access));
        }
        let b = &self.ordered_access_lengths;
        let n = b.len();
        let strides = b.reverse_exclusive_scan();
        let mut out = Dims::splat(n, 0);
        let mut rest = t;
        let mut prefix: Index = 0; // un-snaked linear index of the slower dims
        let mut k = 0;
        while k < n {
            let c = rest / strides.get(k);
            rest -= c * strides.get(k);
            let forward = prefix % 2 == 0;
            let o = if self.snake && !forward {
                b.get(k) - 1 - c
            } else {
                c
            };
            let dim = self.order.get(k) as usize;
            out.set(dim, o * self.scalars.get(dim));
            prefix = prefix * b.get(k) + c;
            k += 1;
        }
        Ok(out)
    }

    /// The tensor index of access `t`. Panics if `t` is out of range; see [`Self::try_index`].
    pub const fn index(&self, t: Index) -> Dims {
        match self.try_index(t) {
            Ok(d) => d,
            Err(_) => panic!("access number out of range"),
        }
    }

    /// `index(b) − index(a)`.
    pub const fn try_step_between(&self, a: Index, b: Index) -> Result<Dims, Error> {
        let ia = match self.try_index(a) {
            Ok(d) => d,
            Err(e) => return Err(e),
        };
        match self.try_index(b) {
            Ok(ib) => Ok(ib.sub(&ia)),
            Err(e) => Err(e),
        }
    }

    /// `index(b) − index(a)`; panics if either is out of range.
    pub const fn step_between(&self, a: Index, b: Index) -> Dims {
        self.index(b).sub(&self.index(a))
    }

    /// `index(t + 1) − index(t)`; panics unless `t + 1 < num_access`.
    pub const fn forward_step(&self, t: Index) -> Dims {
        self.step_between(t, t + 1)
    }

    /// `index(t − 1) − index(t)`; panics unless `t > 0`.
    pub const fn backward_step(&self, t: Index) -> Dims {
        self.step_between(t, t - 1)
    }
}
