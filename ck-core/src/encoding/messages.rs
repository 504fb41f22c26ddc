//! Messages for encoding violations: what is wrong, where, and what to change. Built in `const
//! fn` so const evaluation can panic with the same text the macro reports at expansion time.

use super::{Encoding, EncodingRule, Loc, UncheckedEncoding, Violation};
use crate::msg::MsgBuf;
use crate::Index;

/// Message buffer size.
pub const MSG_LEN: usize = 400;
type Msg = MsgBuf<MSG_LEN>;

/// What messages call an encoding's components: CK's raw spelling (`R[j]`, `H[x][j]`, `H[x]` or
/// `X{x}`) by default, or the names a front end gives them (`` `r.t` ``, `` `m.warp` ``,
/// `` `m` ``): the message builder names each component as it writes it.
#[derive(Clone, Copy, Debug)]
pub struct ComponentNames<'a> {
    /// Each X dim's name (none: the raw spelling).
    pub x: &'a [&'a str],
    /// Each X dim's components' names.
    pub h: &'a [&'a [&'a str]],
    /// The R components' names.
    pub r: &'a [&'a str],
}

impl ComponentNames<'static> {
    /// CK's raw spelling.
    pub const RAW: ComponentNames<'static> = ComponentNames {
        x: &[],
        h: &[],
        r: &[],
    };
}

const fn quoted(m: Msg, prefix: &str, name: &str) -> Msg {
    m.push_str("`")
        .push_str(prefix)
        .push_str(name)
        .push_str("`")
}

/// Component `minor` of R (`major` 0) or of X dim `major − 1`.
const fn component(m: Msg, major: Index, minor: Index, names: &ComponentNames) -> Msg {
    let j = minor as usize;
    if major == 0 {
        if j < names.r.len() {
            return quoted(m, "r.", names.r[j]);
        }
        m.push_str("R[").push_int(minor as i64).push_str("]")
    } else {
        let x = major as usize - 1;
        if x < names.x.len() && x < names.h.len() && j < names.h[x].len() {
            return m
                .push_str("`")
                .push_str(names.x[x])
                .push_str(".")
                .push_str(names.h[x][j])
                .push_str("`");
        }
        m.push_str("H[")
            .push_int(major as i64 - 1)
            .push_str("][")
            .push_int(minor as i64)
            .push_str("]")
    }
}

/// X dim `x`: its name, or `raw` and its index (`H[x]` where the message speaks of its
/// components, `X{x}` of its positions).
const fn x_dim(m: Msg, x: i64, raw: (&str, &str), names: &ComponentNames) -> Msg {
    if x >= 0 && (x as usize) < names.x.len() {
        return quoted(m, "", names.x[x as usize]);
    }
    m.push_str(raw.0).push_int(x).push_str(raw.1)
}

const fn claimant(m: Msg, loc: Loc) -> Msg {
    match loc {
        Loc::PMinor(p, _) | Loc::PMajor(p, _) => m.push_str("P").push_int(p as i64),
        Loc::YMinor(y) | Loc::YMajor(y) => m.push_str("Y").push_int(y as i64),
        _ => m.push_str("?"),
    }
}

impl Violation {
    /// The message (without the `error[rule]:` prefix), components in CK's raw spelling
    /// (`R[j]`, `H[x][j]`).
    pub const fn message(&self, enc: &UncheckedEncoding) -> Msg {
        self.message_named(enc, &ComponentNames::RAW)
    }

    /// The message with components called by `names` (a front end's named spelling).
    pub const fn message_named(&self, enc: &UncheckedEncoding, names: &ComponentNames) -> Msg {
        let enc = &enc.0;
        let m = Msg::new();
        let [a, b, c, _d] = self.values;
        use EncodingRule as R;
        match self.rule {
            R::LengthNotPositive => {
                let m = match self.loc {
                    Loc::R(j) => component(m, 0, j as Index, names),
                    Loc::H(x, j) => component(m, x as Index + 1, j as Index, names),
                    _ => m,
                };
                m.push_str(" has length ")
                    .push_int(a as i64)
                    .push_str("; every length must be at least 1 (use 1 for a level that is not split)")
            }
            R::EmptyX => m.push_str("the encoding has no X dimension; give h at least one list, e.g. [[64]]"),
            R::EmptyH => x_dim(m, a as i64, ("H[", "]"), names)
                .push_str(" has no components; give it at least one length (1 if the dim is not split)"),
            R::NoY => m.push_str(
                "the encoding has no Y dimension, so threads own no elements; claim at least one H \
                 component with a Y",
            ),
            R::ListLengthMismatch => match self.loc {
                Loc::PMinorAll => m
                    .push_str("p_minor has ")
                    .push_int(a as i64)
                    .push_str(" lists but p_major has ")
                    .push_int(b as i64)
                    .push_str("; give one minor list per P"),
                Loc::PMinorList(p) => m
                    .push_str("p_minor[")
                    .push_int(p as i64)
                    .push_str("] has ")
                    .push_int(a as i64)
                    .push_str(" entries but p_major[")
                    .push_int(p as i64)
                    .push_str("] has ")
                    .push_int(b as i64)
                    .push_str("; give one minor per major"),
                _ => m
                    .push_str("y_minor has ")
                    .push_int(a as i64)
                    .push_str(" entries but y_major has ")
                    .push_int(b as i64)
                    .push_str("; give one minor per major"),
            },
            R::IndexOutOfRange => {
                let m = claimant(m, self.loc);
                if c == -1 && b == 0 {
                    m.push_str(" uses major ")
                        .push_int(a as i64)
                        .push_str(", but the encoding has no X dimension, so only major 0 (R) exists")
                } else if c == -1 {
                    let m = m
                        .push_str(" uses major ")
                        .push_int(a as i64)
                        .push_str(", but majors are 0 (R) and 1..=")
                        .push_int(b as i64)
                        .push_str(" (");
                    let m = x_dim(m, 0, ("H[", "]"), names).push_str(".. ");
                    x_dim(m, b as i64 - 1, ("H[", "]"), names).push_str(")")
                } else {
                    let m = m.push_str(" refers to ");
                    let m = component(m, c, a, names);
                    let m = if c == 0 { m.push_str(" but R has ") } else {
                        x_dim(m.push_str(" but "), c as i64 - 1, ("H[", "]"), names).push_str(" has ")
                    };
                    let lens = if c == 0 { enc.r_lengths() } else { enc.h_lengths(c as usize - 1) };
                    m.push_int(b as i64)
                        .push_str(" components (lengths ")
                        .push_list(lens.as_slice())
                        .push_str("); the minor must be below ")
                        .push_int(b as i64)
                }
            }
            R::YMapsToR => {
                let m = claimant(m, self.loc);
                m.push_str(" points at R (major 0); a Y must claim an H component (major 1 or more), \
                            R components are replicated across threads and only P's own them")
            }
            R::EmptyP => m
                .push_str("P")
                .push_int(a as i64)
                .push_str(" lists no component; each P must claim at least one R or H component"),
            R::PCount => m
                .push_str("the encoding has ")
                .push_int(a as i64)
                .push_str(" P dimensions; the partition index supports 1 ([lane]) or 2 ([warp, lane])"),
            R::ClaimedTwice => {
                let m = component(m, a, b, names).push_str(" is claimed by both ");
                let m = claimant(m, self.other).push_str(" and ");
                claimant(m, self.loc).push_str(
                    "; a component belongs to exactly one P or Y — remove this claim or point it at \
                     another component",
                )
            }
            R::Unclaimed => {
                let m = match self.loc {
                    Loc::H(x, j) => component(m, x as Index + 1, j as Index, names),
                    _ => m,
                };
                let x = match self.loc {
                    Loc::H(x, _) => x as i64,
                    _ => 0,
                };
                let m = m
                    .push_str(" (length ")
                    .push_int(a as i64)
                    .push_str(") is claimed by no P and no Y, so it is pinned to 0: ")
                    .push_int(c as i64)
                    .push_str(" of the ")
                    .push_int(b as i64)
                    .push_str(" positions of ");
                x_dim(m, x, ("X", ""), names).push_str(
                    " would never be touched — add it to a P or a Y, or set its length to 1",
                )
            }
            R::WarpSizeMismatch => {
                if self.values[3] == 1 {
                    m.push_str("warp_size is ")
                        .push_int(a as i64)
                        .push_str("; it must be 32 (NVIDIA) or 64 (AMD CDNA)")
                } else {
                    let lens = p_lengths(enc, c as usize);
                    let m = m
                        .push_str("P")
                        .push_int(c as i64)
                        .push_str(" (the lane dim) spans ")
                        .push_int(a as i64)
                        .push_str(" lanes (component lengths ")
                        .push_list(lens.as_slice())
                        .push_str(") but warp_size is ")
                        .push_int(b as i64);
                    if self.values[3] == 4 {
                        // Two P dims: the lane dim may be a lane group, a divisor of the warp.
                        m.push_str("; a lane dim spans the warp or a lane group that divides it \
                                    (1, 2, 4, .., ")
                            .push_int(b as i64)
                            .push_str(" lanes): make its components multiply to ")
                            .push_int(b as i64)
                            .push_str(" or to a power of two below it")
                    } else {
                        m.push_str("; make its components multiply to ")
                            .push_int(b as i64)
                    }
                }
            }
            R::BlockSizeMismatch => {
                if self.values[3] == 2 {
                    m.push_str("block_size ")
                        .push_int(a as i64)
                        .push_str(" does not match P0 (the warp dim): it counts ")
                        .push_int(b as i64)
                        .push_str(" warps (or lane groups) of P1's ")
                        .push_int(c as i64)
                        .push_str(" lanes = ")
                        .push_int((b * c) as i64)
                        .push_str(" threads; set block_size to ")
                        .push_int((b * c) as i64)
                        .push_str(" or change the warp components")
                } else {
                    m.push_str("block_size ")
                        .push_int(a as i64)
                        .push_str(" does not match the single P dim, which spans ")
                        .push_int(b as i64)
                        .push_str(" threads; with one P every warp covers the same tile, so set \
                                   block_size to ")
                        .push_int(b as i64)
                        .push_str(" or add a warp P dim")
                }
            }
            R::ShapeMismatch => {
                if self.values[3] == 1 {
                    m.push_str("shape has ")
                        .push_int(a as i64)
                        .push_str(" entries but the encoding has ")
                        .push_int(b as i64)
                        .push_str(" X dims")
                } else {
                    let m = m
                        .push_str("shape[")
                        .push_int(c as i64)
                        .push_str("] is ")
                        .push_int(a as i64)
                        .push_str(" but ");
                    x_dim(m, c as i64, ("H[", "]"), names)
                        .push_str(" multiplies to ")
                        .push_int(b as i64)
                        .push_str("; fix the shape or the H lengths ")
                        .push_list(enc.h_lengths(c as usize).as_slice())
                }
            }
            R::TileTooLarge => m.push_str(
                "the tile (every R and H length multiplied) has more than 2^31 − 1 elements, past CK's 32-bit index_t; split it into smaller tiles",
            ),
            R::CapacityExceeded if self.values[3] == 1 => m
                .push_str("the encoding has ")
                .push_int(a as i64)
                .push_str(" dims and components in all (X dims, R and H components, P dims); its index adaptor holds at most ")
                .push_int(b as i64)
                .push_str(": split fewer levels"),
            R::CapacityExceeded => m
                .push_str("this list has ")
                .push_int(a as i64)
                .push_str(" entries; at most ")
                .push_int(b as i64)
                .push_str(" are supported"),
            R::SliceThroughP => m
                .push_str("slicing X")
                .push_int(c as i64)
                .push_str(" would shrink a P-claimed digit (length ")
                .push_int(a as i64)
                .push_str(" to ")
                .push_int(b as i64)
                .push_str("), which would change the thread count; slice along Y-claimed digits only"),
            R::SliceNotFactor => m
                .push_str("slice length ")
                .push_int(a as i64)
                .push_str(" of X")
                .push_int(c as i64)
                .push_str(" does not factor through its digit lengths (at a digit of length ")
                .push_int(b as i64)
                .push_str("); choose a length that divides or is a multiple of the trailing digits"),
            R::RUnowned => {
                let m = match self.loc {
                    Loc::R(j) => component(m, 0, j as Index, names),
                    _ => m,
                };
                m.push_str(" (length ")
                    .push_int(a as i64)
                    .push_str(") is owned by no P, so the replication is not realised; add it to a P or \
                               set its length to 1")
            }
            R::UnclaimedUnit => {
                let m = match self.loc {
                    Loc::H(x, j) => component(m, x as Index + 1, j as Index, names),
                    _ => m,
                };
                m.push_str(" (length 1) is claimed by no P and no Y; harmless, but claiming it with a Y \
                            states the intent")
            }
        }
    }
}

const fn p_lengths(enc: &Encoding, p: usize) -> crate::Dims {
    let (ma, mi) = (enc.p_major(p), enc.p_minor(p));
    let mut d = crate::Dims::EMPTY;
    let mut k = 0;
    while k < ma.len() {
        if let Some(l) = enc.component_length(ma.get(k), mi.get(k)) {
            d = d.push(l);
        }
        k += 1;
    }
    d
}
