//! Checking an encoding: every rule of spec §4.3 and §16, in a fixed order, each violation
//! with where it is and the values its message quotes.

use super::*;

/// Which violations a scan reports.
#[derive(Clone, Copy)]
enum Scope<'a> {
    /// The structural rules: what [`Encoding`]'s derived tables need.
    Structure,
    /// Every error, the target's (warp size, block size, shape) included.
    Errors(&'a Checks),
    /// The warnings.
    Warnings,
}

impl Scope<'_> {
    const fn reports(&self, rule: EncodingRule) -> bool {
        match self {
            Scope::Structure => rule.is_structural(),
            Scope::Errors(_) => !rule.is_warning(),
            Scope::Warnings => rule.is_warning(),
        }
    }
}

impl UncheckedEncoding {
    /// Every error against `checks`, in a fixed order, from one scan.
    pub const fn errors(&self, checks: &Checks) -> Violations {
        self.0.scan(Scope::Errors(checks), usize::MAX)
    }

    /// The first error, if any (the scan stops there: what const evaluation needs).
    pub const fn first_error(&self, checks: &Checks) -> Option<Violation> {
        self.0.scan(Scope::Errors(checks), 1).first()
    }

    /// The warnings (spec §16's warn list for encodings: `r-unowned`, `unclaimed-unit`).
    pub const fn warnings(&self) -> Violations {
        self.0.scan(Scope::Warnings, usize::MAX)
    }

    /// The encoding, if it breaks no structural rule ([`EncodingRule::is_structural`]): the
    /// rules a tile distribution adds (an X and a Y, every component claimed, the target's
    /// warp and block sizes) are [`Encoding::first_error`]'s.
    pub const fn check(&self) -> Result<Encoding, Violation> {
        if let Some(v) = self.0.scan(Scope::Structure, 1).first() {
            return Err(v);
        }
        // The structural rules bound every length, product and count the adaptor takes; it is
        // built once here so that `Encoding::adaptor` cannot fail.
        match self.0.build_adaptor() {
            Ok(_) => Ok(self.0),
            Err(_) => Err(viol(
                EncodingRule::CapacityExceeded,
                Loc::HAll,
                self.0.hidden_dims() as Index,
                crate::adaptor::MAX_HIDDEN as Index,
                0,
                1,
            )),
        }
    }

    /// The encoding as a tile distribution for `checks`, or a panic — a compile error in const
    /// evaluation — with the first error's rule and message.
    pub const fn expect_valid(&self, checks: &Checks) -> Encoding {
        if let Some(v) = self.first_error(checks) {
            panic_with(&v, self);
        }
        match self.check() {
            Ok(e) => e,
            Err(v) => panic_with(&v, self),
        }
    }
}

/// The violations one scan found, in the scan's order: the first [`Violations::CAPACITY`] are
/// kept, [`Violations::found`] counts them all.
///
/// ```
/// use ck_core::encoding::{Checks, EncodingRule, UncheckedEncoding};
/// // H0 = [4, 0] has a zero length, and P0 names X2, which does not exist.
/// let e = UncheckedEncoding::new(&[], &[&[4, 0]], &[&[2]], &[&[0]], &[1, 1], &[0, 1]).unwrap();
/// let errors = e.errors(&Checks::warp(32));
/// let rules: Vec<_> = errors.iter().map(|v| v.rule).collect();
/// assert_eq!(rules, [EncodingRule::LengthNotPositive, EncodingRule::IndexOutOfRange]);
/// ```
#[derive(Clone, Copy)]
pub struct Violations {
    items: [Violation; Violations::CAPACITY],
    found: usize,
}

impl Violations {
    /// How many violations are kept; an encoding within ck-core's capacities that breaks more
    /// rules than this is reported by its first ones (and the count).
    pub const CAPACITY: usize = 64;

    const NONE: Violations = Violations {
        items: [viol(EncodingRule::EmptyX, Loc::Whole, 0, 0, 0, 0); Violations::CAPACITY],
        found: 0,
    };

    const fn push(&mut self, v: Violation) {
        if self.found < Self::CAPACITY {
            self.items[self.found] = v;
        }
        self.found += 1;
    }

    /// The first violation, if any.
    pub const fn first(&self) -> Option<Violation> {
        if self.found == 0 {
            None
        } else {
            Some(self.items[0])
        }
    }

    /// How many violations the scan found (kept or not).
    pub const fn found(&self) -> usize {
        self.found
    }

    /// True if there are none.
    pub const fn is_empty(&self) -> bool {
        self.found == 0
    }

    /// The kept violations.
    pub const fn as_slice(&self) -> &[Violation] {
        let kept = if self.found < Self::CAPACITY {
            self.found
        } else {
            Self::CAPACITY
        };
        self.items.split_at(kept).0
    }

    /// The kept violations, in order.
    pub fn iter(&self) -> core::slice::Iter<'_, Violation> {
        self.as_slice().iter()
    }
}

impl core::fmt::Debug for Violations {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Violations")
            .field("kept", &self.as_slice())
            .field("found", &self.found)
            .finish()
    }
}

impl<'a> IntoIterator for &'a Violations {
    type Item = &'a Violation;
    type IntoIter = core::slice::Iter<'a, Violation>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

const fn panic_with(v: &Violation, e: &UncheckedEncoding) -> ! {
    let m = crate::msg::MsgBuf::<512>::new()
        .push_str("error[")
        .push_str(v.rule.name())
        .push_str("]: ")
        .push_str(v.message(e).as_str());
    panic!("{}", m.as_str());
}

impl Encoding {
    /// Every error against `checks` (only the rules that are not structural can apply: see
    /// [`UncheckedEncoding::errors`]).
    pub const fn errors(&self, checks: &Checks) -> Violations {
        self.scan(Scope::Errors(checks), usize::MAX)
    }

    /// The first error against `checks`, if any: `None` means this encoding is a tile
    /// distribution for that target.
    pub const fn first_error(&self, checks: &Checks) -> Option<Violation> {
        self.scan(Scope::Errors(checks), 1).first()
    }

    /// The warnings.
    pub const fn warnings(&self) -> Violations {
        self.scan(Scope::Warnings, usize::MAX)
    }

    /// Dims and components the adaptor numbers: X dims, R and H components, one per P.
    const fn hidden_dims(&self) -> usize {
        let mut n = self.nx + self.r.len() + self.np_major;
        let mut x = 0;
        while x < self.nx {
            n += self.h[x].len();
            x += 1;
        }
        n
    }

    /// Claim of component `(major, minor)`: `Some(loc)` of the first claimant.
    const fn claim_of(&self, major: Index, minor: Index) -> Option<Loc> {
        let mut p = 0;
        while p < self.np_major && p < self.np_minor {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            let mut k = 0;
            while k < ma.len() && k < mi.len() {
                if ma.get(k) == major && mi.get(k) == minor {
                    return Some(Loc::PMinor(p as u8, k as u8));
                }
                k += 1;
            }
            p += 1;
        }
        let mut y = 0;
        while y < self.y_major.len() && y < self.y_minor.len() {
            if self.y_major.get(y) == major && self.y_minor.get(y) == minor {
                return Some(Loc::YMinor(y as u8));
            }
            y += 1;
        }
        None
    }

    /// True if every P and Y reference exists and the lists line up.
    const fn references_ok(&self) -> bool {
        if self.np_major != self.np_minor || self.y_major.len() != self.y_minor.len() {
            return false;
        }
        let mut p = 0;
        while p < self.np_major {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            if ma.len() != mi.len() || ma.is_empty() {
                return false;
            }
            let mut k = 0;
            while k < ma.len() {
                if self.component_length(ma.get(k), mi.get(k)).is_none() {
                    return false;
                }
                k += 1;
            }
            p += 1;
        }
        let mut y = 0;
        while y < self.y_major.len() {
            if self.y_major.get(y) == 0
                || self
                    .component_length(self.y_major.get(y), self.y_minor.get(y))
                    .is_none()
            {
                return false;
            }
            y += 1;
        }
        true
    }

    /// Product of the lengths of P dim `p`'s components (assumes valid references).
    pub const fn p_length(&self, p: usize) -> Index {
        let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
        let mut prod = 1;
        let mut k = 0;
        while k < ma.len() {
            if let Some(l) = self.component_length(ma.get(k), mi.get(k)) {
                prod *= l;
            }
            k += 1;
        }
        prod
    }

    /// Positive lengths whose products all fit in an `Index`: what the length-dependent checks
    /// and the derived tables need.
    const fn sized(&self) -> bool {
        self.lengths_ok() && self.total_elements() <= Index::MAX as i64
    }

    /// Π of every R and H length, in 64 bits, saturating once past `Index::MAX`.
    const fn total_elements(&self) -> i64 {
        let mut total: i64 = 1;
        let mut j = 0;
        while j < self.r.len() {
            total = saturate(total * self.r.get(j) as i64);
            j += 1;
        }
        let mut x = 0;
        while x < self.nx {
            j = 0;
            while j < self.h[x].len() {
                total = saturate(total * self.h[x].get(j) as i64);
                j += 1;
            }
            x += 1;
        }
        total
    }

    const fn lengths_ok(&self) -> bool {
        let mut j = 0;
        while j < self.r.len() {
            if self.r.get(j) < 1 {
                return false;
            }
            j += 1;
        }
        let mut x = 0;
        while x < self.nx {
            let mut j = 0;
            while j < self.h[x].len() {
                if self.h[x].get(j) < 1 {
                    return false;
                }
                j += 1;
            }
            x += 1;
        }
        true
    }

    /// One pass over the rules in `scope`, stopping once `limit` violations are found.
    const fn scan(&self, scope: Scope, limit: usize) -> Violations {
        let mut out = Violations::NONE;
        macro_rules! report {
            ($v:expr) => {{
                let v = $v;
                if scope.reports(v.rule) {
                    out.push(v);
                    if out.found() >= limit {
                        return out;
                    }
                }
            }};
        }
        use EncodingRule as R;
        if let Scope::Warnings = scope {
            let mut j = 0;
            while j < self.r.len() {
                let l = self.r.get(j);
                if l > 1 && self.claim_of(0, j as Index).is_none() {
                    report!(viol(R::RUnowned, Loc::R(j as u8), l, 0, 0, 0));
                }
                j += 1;
            }
            let mut x = 0;
            while x < self.nx {
                let mut j = 0;
                while j < self.h[x].len() {
                    if self.h[x].get(j) == 1 && self.claim_of(x as Index + 1, j as Index).is_none()
                    {
                        report!(viol(R::UnclaimedUnit, Loc::H(x as u8, j as u8), 1, 0, 0, 0));
                    }
                    j += 1;
                }
                x += 1;
            }
            return out;
        }
        // Shape of the lists.
        if self.nx == 0 {
            report!(viol(R::EmptyX, Loc::HAll, 0, 0, 0, 0));
        }
        let mut x = 0;
        while x < self.nx {
            if self.h[x].is_empty() {
                report!(viol(R::EmptyH, Loc::HList(x as u8), x as Index, 0, 0, 0));
            }
            x += 1;
        }
        let mut j = 0;
        while j < self.r.len() {
            if self.r.get(j) < 1 {
                report!(viol(
                    R::LengthNotPositive,
                    Loc::R(j as u8),
                    self.r.get(j),
                    0,
                    0,
                    0
                ));
            }
            j += 1;
        }
        x = 0;
        while x < self.nx {
            j = 0;
            while j < self.h[x].len() {
                if self.h[x].get(j) < 1 {
                    report!(viol(
                        R::LengthNotPositive,
                        Loc::H(x as u8, j as u8),
                        self.h[x].get(j),
                        0,
                        0,
                        0
                    ));
                }
                j += 1;
            }
            x += 1;
        }
        // Every product the derived tables take (X lengths, P lengths, the block and register
        // counts) divides this one: in range, none of them overflows.
        if self.lengths_ok() && !self.sized() {
            report!(viol(R::TileTooLarge, Loc::Whole, 0, 0, 0, 0));
        }
        if self.np_major != self.np_minor {
            report!(viol(
                R::ListLengthMismatch,
                Loc::PMinorAll,
                self.np_minor as Index,
                self.np_major as Index,
                0,
                0
            ));
        }
        let mut p = 0;
        while p < self.np_major && p < self.np_minor {
            let (a, b) = (self.p_major[p].len(), self.p_minor[p].len());
            if a != b {
                report!(viol(
                    R::ListLengthMismatch,
                    Loc::PMinorList(p as u8),
                    b as Index,
                    a as Index,
                    p as Index,
                    0
                ));
            }
            p += 1;
        }
        if self.y_major.len() != self.y_minor.len() {
            report!(viol(
                R::ListLengthMismatch,
                Loc::YMinorAll,
                self.y_minor.len() as Index,
                self.y_major.len() as Index,
                0,
                0
            ));
        }
        if self.np_major != 1 && self.np_major != 2 {
            report!(viol(
                R::PCount,
                Loc::PMajorAll,
                self.np_major as Index,
                0,
                0,
                0
            ));
        }
        p = 0;
        while p < self.np_major {
            if self.p_major[p].is_empty() {
                report!(viol(
                    R::EmptyP,
                    Loc::PMajorList(p as u8),
                    p as Index,
                    0,
                    0,
                    0
                ));
            }
            p += 1;
        }
        if self.y_major.is_empty() {
            report!(viol(R::NoY, Loc::YMajorAll, 0, 0, 0, 0));
        }
        // References.
        p = 0;
        while p < self.np_major && p < self.np_minor {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            let mut k = 0;
            while k < ma.len() && k < mi.len() {
                let (major, minor) = (ma.get(k), mi.get(k));
                let nmin = self.components(major);
                if nmin < 0 {
                    report!(viol(
                        R::IndexOutOfRange,
                        Loc::PMajor(p as u8, k as u8),
                        major,
                        self.nx as Index,
                        -1,
                        0
                    ));
                } else if minor < 0 || minor >= nmin {
                    report!(viol(
                        R::IndexOutOfRange,
                        Loc::PMinor(p as u8, k as u8),
                        minor,
                        nmin,
                        major,
                        0
                    ));
                }
                k += 1;
            }
            p += 1;
        }
        let mut y = 0;
        while y < self.y_major.len() && y < self.y_minor.len() {
            let (major, minor) = (self.y_major.get(y), self.y_minor.get(y));
            let nmin = self.components(major);
            if nmin < 0 {
                report!(viol(
                    R::IndexOutOfRange,
                    Loc::YMajor(y as u8),
                    major,
                    self.nx as Index,
                    -1,
                    0
                ));
            } else if major == 0 {
                report!(viol(R::YMapsToR, Loc::YMajor(y as u8), minor, 0, 0, 0));
            } else if minor < 0 || minor >= nmin {
                report!(viol(
                    R::IndexOutOfRange,
                    Loc::YMinor(y as u8),
                    minor,
                    nmin,
                    major,
                    0
                ));
            }
            y += 1;
        }
        // Claims: in order P0, P1, .., Y; every later claim of a claimed component is reported.
        p = 0;
        while p < self.np_major && p < self.np_minor {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            let mut k = 0;
            while k < ma.len() && k < mi.len() {
                if self.component_length(ma.get(k), mi.get(k)).is_some() {
                    let here = Loc::PMinor(p as u8, k as u8);
                    if let Some(first) = self.claim_of(ma.get(k), mi.get(k)) {
                        if !loc_eq(first, here) {
                            report!(Violation {
                                rule: R::ClaimedTwice,
                                loc: here,
                                other: first,
                                values: [ma.get(k), mi.get(k), 0, 0],
                            });
                        }
                    }
                }
                k += 1;
            }
            p += 1;
        }
        y = 0;
        while y < self.y_major.len() && y < self.y_minor.len() {
            let (major, minor) = (self.y_major.get(y), self.y_minor.get(y));
            if major != 0 && self.component_length(major, minor).is_some() {
                let here = Loc::YMinor(y as u8);
                if let Some(first) = self.claim_of(major, minor) {
                    if !loc_eq(first, here) {
                        report!(Violation {
                            rule: R::ClaimedTwice,
                            loc: here,
                            other: first,
                            values: [major, minor, 0, 0],
                        });
                    }
                }
            }
            y += 1;
        }
        x = 0;
        while x < self.nx && self.sized() {
            j = 0;
            let xlen = self.h[x].product();
            while j < self.h[x].len() {
                let l = self.h[x].get(j);
                if l > 1 && self.claim_of(x as Index + 1, j as Index).is_none() {
                    report!(viol(
                        R::Unclaimed,
                        Loc::H(x as u8, j as u8),
                        l,
                        xlen,
                        xlen - xlen / l,
                        0
                    ));
                }
                j += 1;
            }
            x += 1;
        }
        if self.hidden_dims() > crate::adaptor::MAX_HIDDEN {
            report!(viol(
                R::CapacityExceeded,
                Loc::HAll,
                self.hidden_dims() as Index,
                crate::adaptor::MAX_HIDDEN as Index,
                0,
                1
            ));
        }
        // The target: threads and the declared shape.
        let checks = match scope {
            Scope::Errors(checks) => checks,
            _ => return out,
        };
        let w = checks.warp_size as Index;
        if w != 32 && w != 64 {
            report!(viol(R::WarpSizeMismatch, Loc::WarpSize, w, 0, 0, 1));
        } else if self.references_ok() && self.sized() && (self.np_major == 1 || self.np_major == 2)
        {
            // With two P dims the lane dim may span a lane group: a divisor of the warp.
            let lane_p = self.np_major - 1;
            let lanes = self.p_length(lane_p);
            let fits = if self.np_major == 2 {
                lanes <= w && w % lanes == 0
            } else {
                lanes == w
            };
            if !fits {
                report!(viol(
                    R::WarpSizeMismatch,
                    Loc::PMajorList(lane_p as u8),
                    lanes,
                    w,
                    lane_p as Index,
                    self.np_major as Index * 2
                ));
            }
            let b = checks.block_size as Index;
            if b != 0 {
                if self.np_major == 2 {
                    let groups = self.p_length(0);
                    if groups * lanes != b {
                        report!(viol(
                            R::BlockSizeMismatch,
                            Loc::BlockSize,
                            b,
                            groups,
                            lanes,
                            2
                        ));
                    }
                } else if b != lanes {
                    report!(viol(R::BlockSizeMismatch, Loc::BlockSize, b, lanes, w, 1));
                }
            }
        }
        if !checks.shape.is_empty() {
            if checks.shape.len() != self.nx {
                report!(viol(
                    R::ShapeMismatch,
                    Loc::ShapeAll,
                    checks.shape.len() as Index,
                    self.nx as Index,
                    0,
                    1
                ));
            } else if self.sized() {
                x = 0;
                while x < self.nx {
                    if checks.shape.get(x) != self.h[x].product() {
                        report!(viol(
                            R::ShapeMismatch,
                            Loc::Shape(x as u8),
                            checks.shape.get(x),
                            self.h[x].product(),
                            x as Index,
                            0
                        ));
                    }
                    x += 1;
                }
            }
        }
        out
    }
}
