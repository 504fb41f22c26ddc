//! The tables derived from an encoding (spec §4.2, §5): lengths, partition and Y indices, the
//! X coordinate of a (P, Y) pair and its closed form, spans.
//!
//! They are total because every [`Encoding`] passed the structural rules: each component a
//! P or Y names exists (`component_length` is `Some`) and the adaptor builds. The panics below
//! state that invariant; none can be reached from outside this module.

use super::*;

impl Encoding {
    /// `[Π H[x]]`: the tile's lengths.
    pub const fn x_lengths(&self) -> Dims {
        let mut d = Dims::splat(self.nx, 0);
        let mut x = 0;
        while x < self.nx {
            d.set(x, self.h[x].product());
            x += 1;
        }
        d
    }

    /// Length of each Y dim.
    pub const fn y_lengths(&self) -> Dims {
        let mut d = Dims::splat(self.ny(), 0);
        let mut y = 0;
        while y < self.ny() {
            match self.component_length(self.y_major.get(y), self.y_minor.get(y)) {
                Some(l) => d.set(y, l),
                None => panic!("unreachable: a checked encoding's references exist"),
            }
            y += 1;
        }
        d
    }

    /// Registers per thread: `Π Y lengths`.
    pub const fn thread_buffer_size(&self) -> Index {
        self.y_lengths().product()
    }

    /// Threads per block: `Π P0 · Π P1` (NP = 2) or `Π P0` (NP = 1).
    pub const fn block_size(&self) -> Index {
        let mut b = 1;
        let mut p = 0;
        while p < self.np_major {
            b *= self.p_length(p);
            p += 1;
        }
        b
    }

    /// Threads of one lane group: what the lane dim (the last P) spans. With NP = 2 it may be
    /// a divisor of the warp size ([lane groups](crate::encoding#lane-groups)); with NP = 1 it
    /// is the warp.
    pub const fn lanes(&self) -> Index {
        self.p_length(self.np_major - 1)
    }

    /// The partition index of a thread: `[group, lane]` with `G = lanes()` threads per group
    /// (NP = 2: `[tid / G, tid % G]`, the warp and its lane where the lane dim spans the warp),
    /// or `[lane]` (NP = 1: `tid % warp_size`).
    pub const fn partition_index(&self, thread_id: u32, warp_size: u32) -> Dims {
        if self.np_major == 2 {
            let g = self.lanes() as u32;
            Dims::EMPTY
                .push((thread_id / g) as Index)
                .push((thread_id % g) as Index)
        } else {
            Dims::EMPTY.push((thread_id % warp_size) as Index)
        }
    }

    /// `D(y) = Σ y_i · scan(Y lengths)_i`: the register slot of a Y index.
    pub const fn d_index(&self, y: &Dims) -> Index {
        y.dot(&self.y_lengths().reverse_exclusive_scan())
    }

    /// The ps_ys_to_xs adaptor of spec §5.1, with its exact hidden-id numbering: X dims
    /// `0..NX` (bottom), then R components, then the H components of each X, then one id per P;
    /// top = `[P_0 .. P_{NP−1}] ++ [component of Y_0, ..]`.
    pub const fn adaptor(&self) -> TensorAdaptor {
        match self.build_adaptor() {
            Ok(a) => a,
            Err(_) => {
                panic!("unreachable: a checked encoding's adaptor was built when it was checked")
            }
        }
    }

    /// The adaptor, or why it cannot be built (what [`UncheckedEncoding::check`] asks).
    pub(super) const fn build_adaptor(&self) -> Result<TensorAdaptor, Error> {
        let nx = self.nx;
        let nr = self.r.len();
        let np = self.np_major;
        let ntr = 1 + nx + np;
        let mut transforms = [Transform::Freeze { value: 0 }; 1 + MAX_X + MAX_P];
        let mut lower = [Dims::EMPTY; 1 + MAX_X + MAX_P];
        let mut upper = [Dims::EMPTY; 1 + MAX_X + MAX_P];
        // Hidden id of each component: rh_id[major][minor].
        let mut rh_id = [[0 as Index; MAX_COMPONENTS]; MAX_X + 1];
        let mut next = nx as Index;
        transforms[0] = tri!(Transform::replicate(self.r.as_slice()));
        let mut j = 0;
        while j < nr {
            rh_id[0][j] = next;
            upper[0] = upper[0].push(next);
            next += 1;
            j += 1;
        }
        let mut x = 0;
        while x < nx {
            transforms[1 + x] = tri!(Transform::unmerge(self.h[x].as_slice()));
            lower[1 + x] = Dims::splat(1, x as Index);
            j = 0;
            while j < self.h[x].len() {
                rh_id[x + 1][j] = next;
                upper[1 + x] = upper[1 + x].push(next);
                next += 1;
                j += 1;
            }
            x += 1;
        }
        let mut top = Dims::EMPTY;
        let mut p = 0;
        while p < np {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            let mut lens = Dims::EMPTY;
            let mut k = 0;
            while k < ma.len() {
                let (major, minor) = (ma.get(k), mi.get(k));
                lens = lens.push(match self.component_length(major, minor) {
                    Some(l) => l,
                    None => panic!("unreachable: a checked encoding's references exist"),
                });
                lower[1 + nx + p] = lower[1 + nx + p].push(rh_id[major as usize][minor as usize]);
                k += 1;
            }
            transforms[1 + nx + p] = tri!(Transform::merge(lens.as_slice()));
            upper[1 + nx + p] = Dims::splat(1, next);
            top = top.push(next);
            next += 1;
            p += 1;
        }
        let mut y = 0;
        while y < self.ny() {
            top = top.push(rh_id[self.y_major.get(y) as usize][self.y_minor.get(y) as usize]);
            y += 1;
        }
        let mut lo: [&[Index]; 1 + MAX_X + MAX_P] = [&[]; 1 + MAX_X + MAX_P];
        let mut up: [&[Index]; 1 + MAX_X + MAX_P] = [&[]; 1 + MAX_X + MAX_P];
        let mut k = 0;
        while k < ntr {
            lo[k] = lower[k].as_slice();
            up[k] = upper[k].as_slice();
            k += 1;
        }
        let bottom = Dims::splat(0, 0);
        let mut b = bottom;
        x = 0;
        while x < nx {
            b = b.push(x as Index);
            x += 1;
        }
        TensorAdaptor::new(
            transforms.split_at(ntr).0,
            lo.split_at(ntr).0,
            up.split_at(ntr).0,
            b.as_slice(),
            top.as_slice(),
        )
    }

    /// The model: `X(P, Y)` by evaluating the ps_ys_to_xs adaptor (the reference the macro's
    /// straight-line code is tested against).
    pub const fn x_index(&self, p: &Dims, y: &Dims) -> Dims {
        let a = self.adaptor();
        let mut top = *p;
        let mut i = 0;
        while i < y.len() {
            top = top.push(y.get(i));
            i += 1;
        }
        a.calculate_bottom_index(&top)
    }

    /// The R index of a thread: the digits its P values give the R components (0 for R
    /// components no P owns), read off the adaptor's hidden values (spec §5.4).
    pub const fn rs_index(&self, p: &Dims) -> Dims {
        let a = self.adaptor();
        let mut top = *p;
        let mut i = 0;
        while i < self.ny() {
            top = top.push(0);
            i += 1;
        }
        let hid = a.calculate_hidden_index(&top);
        let mut rs = Dims::splat(self.r.len(), 0);
        i = 0;
        while i < self.r.len() {
            rs.set(i, hid[self.nx + i]);
            i += 1;
        }
        rs
    }

    /// Place value of component `k` inside P dim `p`: `Π lengths of the components after it`.
    pub const fn p_place(&self, p: usize, k: usize) -> Index {
        let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
        let mut prod = 1;
        let mut i = k + 1;
        while i < ma.len() {
            if let Some(l) = self.component_length(ma.get(i), mi.get(i)) {
                prod *= l;
            }
            i += 1;
        }
        prod
    }

    /// `ps_over_rs_derivative[p][j]`: the place value of `R[j]` inside `P_p`, 0 if not owned.
    pub const fn ps_over_rs_derivative(&self, p: usize, j: usize) -> Index {
        let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
        let mut k = 0;
        while k < ma.len() {
            if ma.get(k) == 0 && mi.get(k) == j as Index {
                return self.p_place(p, k);
            }
            k += 1;
        }
        0
    }

    /// Where the digit of component `(major, minor)` comes from.
    pub const fn digit_source(&self, major: Index, minor: Index) -> DigitSource {
        let mut p = 0;
        while p < self.np_major {
            let (ma, mi) = (&self.p_major[p], &self.p_minor[p]);
            let mut k = 0;
            while k < ma.len() {
                if ma.get(k) == major && mi.get(k) == minor {
                    let length = match self.component_length(major, minor) {
                        Some(l) => l,
                        None => panic!("unreachable: a checked encoding's references exist"),
                    };
                    return DigitSource::P {
                        p: p as u8,
                        divisor: self.p_place(p, k),
                        length,
                        top: k == 0,
                    };
                }
                k += 1;
            }
            p += 1;
        }
        let mut y = 0;
        while y < self.ny() {
            if self.y_major.get(y) == major && self.y_minor.get(y) == minor {
                return DigitSource::Y(y as u8);
            }
            y += 1;
        }
        DigitSource::Zero
    }

    /// The closed form of `X_x`: one term per H component, `X_x = Σ digit · place`.
    pub const fn x_terms(&self, x: usize) -> [XTerm; MAX_COMPONENTS] {
        let mut out = [XTerm {
            source: DigitSource::Zero,
            place: 0,
        }; MAX_COMPONENTS];
        let places = self.h[x].reverse_exclusive_scan();
        let mut j = 0;
        while j < self.h[x].len() {
            out[j] = XTerm {
                source: self.digit_source(x as Index + 1, j as Index),
                place: places.get(j),
            };
            j += 1;
        }
        out
    }

    /// `X(P, Y)` through the closed form (digit division as a merge does it: by magic numbers).
    pub const fn x_index_closed_form(&self, p: &Dims, y: &Dims) -> Dims {
        let mut out = Dims::splat(self.nx, 0);
        let mut x = 0;
        while x < self.nx {
            let terms = self.x_terms(x);
            let mut sum = 0;
            let mut j = 0;
            while j < self.h[x].len() {
                let t = terms[j];
                let digit = match t.source {
                    DigitSource::Zero => 0,
                    DigitSource::Y(i) => y.get(i as usize),
                    DigitSource::P {
                        p: pi,
                        divisor,
                        length,
                        top,
                    } => {
                        let q = crate::magic::magic_div(
                            p.get(pi as usize) as u32,
                            magic(divisor as u32),
                        ) as Index;
                        if top {
                            q
                        } else {
                            q - crate::magic::magic_div(q as u32, magic(length as u32)) as Index
                                * length
                        }
                    }
                };
                sum += digit * t.place;
                j += 1;
            }
            out.set(x, sum);
            x += 1;
        }
        out
    }

    /// `span(x)`: lengths of X_x's Y-claimed H components in increasing minor order.
    pub const fn span(&self, x: usize) -> Dims {
        let mut d = Dims::EMPTY;
        let mut j = 0;
        while j < self.h[x].len() {
            if let DigitSource::Y(_) = self.digit_source(x as Index + 1, j as Index) {
                d = d.push(self.h[x].get(j));
            }
            j += 1;
        }
        d
    }

    /// `(span_major, span_minor)` of Y dim `y`: its X, and its rank among that X's Y-claimed
    /// components (in minor order).
    pub const fn y_to_span(&self, y: usize) -> (usize, usize) {
        let major = self.y_major.get(y);
        let minor = self.y_minor.get(y);
        let mut rank = 0;
        let mut j = 0;
        while j < minor {
            if let DigitSource::Y(_) = self.digit_source(major, j) {
                rank += 1;
            }
            j += 1;
        }
        (major as usize - 1, rank)
    }

    /// The Y index of a distributed (span) index: `y_i = span_idx[span_major_i][span_minor_i]`.
    /// `span_idx` is the concatenation of every X's span coordinates, X0 first.
    pub const fn y_from_span_index(&self, span_idx: &Dims) -> Dims {
        let mut offsets = [0usize; MAX_X];
        let mut x = 1;
        while x < self.nx {
            offsets[x] = offsets[x - 1] + self.span(x - 1).len();
            x += 1;
        }
        let mut y = Dims::splat(self.ny(), 0);
        let mut i = 0;
        while i < self.ny() {
            let (sx, sm) = self.y_to_span(i);
            y.set(i, span_idx.get(offsets[sx] + sm));
            i += 1;
        }
        y
    }

    /// All span lengths concatenated (X0's first): the box a sweep visits row-major.
    pub const fn span_box(&self) -> Dims {
        let mut d = Dims::EMPTY;
        let mut x = 0;
        while x < self.nx {
            let s = self.span(x);
            let mut j = 0;
            while j < s.len() {
                d = d.push(s.get(j));
                j += 1;
            }
            x += 1;
        }
        d
    }
}
