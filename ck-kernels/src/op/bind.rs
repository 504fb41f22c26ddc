//! [`bind`]: an operator's [`Sizes`] from its tensors' shapes, every shape checked against its
//! rule.
//!
//! Binding walks the tensors in the operator's order; the first tensor that names a symbol sets
//! it and every later one must agree. For RMSNorm (`x: [Rows, N]`, `gamma: [N]`, `y: [Rows, N]`)
//! and `x` of shape `[2, 3, 8]`: `Rows` takes `[2, 3]` (so `M = 6`) and `N = 8`; a `gamma` of
//! `[4]` is then refused with "`gamma` has shape \[4\]; it must be \[8\] (N = 8, from `x`)
//! (`gamma`: gamma, \[N\])", the tensor's description last (its rule in words).
//! Last come the relations no single rule states ([`Op::constraints`]: attention's key/value
//! heads divide its query heads).

use super::{Dim, Op, Param, Role, ScalarRule, Sizes};
use ck_core::host::LaunchError;
use ck_core::rules;

fn shape_error(message: String) -> LaunchError {
    LaunchError::invalid(rules::SHAPE_MISMATCH, message)
}

/// A shape error of tensor `p`, ending with what `p` is (its rule in words: the fix).
fn tensor_error(p: &Param, message: String) -> LaunchError {
    shape_error(format!("{message} (`{}`: {})", p.name, p.doc))
}

/// A rule as text: `[..., N]`.
fn rule_text(dims: &[Dim]) -> String {
    let dims: Vec<String> = dims.iter().map(Dim::text).collect();
    format!("[{}]", dims.join(", "))
}

/// The sizes of `op` for the tensors' `shapes` (by name; an optional output may be absent, and
/// every output when `outputs` is false; every other tensor must be there) and its `scalars`
/// (in its order, already checked; a flag that is on is on in the sizes), or the first rule a
/// shape breaks.
pub fn bind(
    op: &Op,
    shapes: &[(&str, &[usize])],
    scalars: &[f32],
    outputs: bool,
) -> Result<Sizes, LaunchError> {
    if let Some((name, _)) = shapes.iter().find(|(n, _)| op.param(n).is_none()) {
        let known: Vec<&str> = op.params.iter().map(|p| p.name).collect();
        return Err(LaunchError::invalid(
            rules::UNKNOWN_ARGUMENT,
            format!(
                "{} has no tensor `{name}`; its tensors are {}",
                op.name,
                known.join(", ")
            ),
        ));
    }
    let mut sizes = Sizes::default();
    for (s, &v) in op.scalars.iter().zip(scalars) {
        match s.rule {
            ScalarRule::Flag if v != 0.0 => sizes = sizes.with_flag(s.name),
            ScalarRule::Count(symbol) => sizes.set(symbol, v as usize, s.name),
            _ => {}
        }
    }
    let mut lead_from: Option<&str> = None;
    for p in op.params.iter().filter(|p| p.role != Role::Scratch) {
        let dims = sizes.rule_of(p);
        let Some(&(_, shape)) = shapes.iter().find(|(n, _)| *n == p.name) else {
            if p.role.is_optional() || (!outputs && !p.role.is_input()) {
                continue;
            }
            return Err(LaunchError::invalid(
                rules::UNKNOWN_ARGUMENT,
                format!(
                    "{} needs the tensor `{}` {}",
                    op.name,
                    p.name,
                    rule_text(dims)
                ),
            ));
        };
        let fixed = dims.iter().filter(|d| **d != Dim::Rows).count();
        let has_rows = dims.first() == Some(&Dim::Rows);
        if shape.len() < fixed || (!has_rows && shape.len() != fixed) {
            return Err(tensor_error(
                p,
                format!(
                    "`{}` has shape {shape:?}; give {} {}",
                    p.name,
                    if has_rows {
                        format!("at least {fixed} dimension(s):")
                    } else {
                        format!("{fixed} dimension(s):")
                    },
                    rule_text(dims)
                ),
            ));
        }
        let (lead, rest) = shape.split_at(shape.len() - fixed);
        if has_rows {
            match lead_from {
                None => {
                    sizes.set_rows(lead);
                    lead_from = Some(p.name);
                }
                Some(first) if sizes.leading() != lead => {
                    return Err(tensor_error(
                        p,
                        format!(
                            "`{}` has shape {shape:?}; it must be {:?} (its rows as `{first}`'s)",
                            p.name,
                            sizes.shape_of(p)
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        for ((name, times), &given) in dims.iter().filter_map(Dim::symbol).zip(rest) {
            if given % times != 0 {
                return Err(tensor_error(
                    p,
                    format!(
                    "`{}` has shape {shape:?}; it must be {}: {given} is not a multiple of {times}",
                    p.name,
                    rule_text(dims)
                ),
                ));
            }
            let extent = given / times;
            match sizes.sym(name) {
                None => {
                    sizes.set(name, extent, p.name);
                }
                Some(v) if v != extent => {
                    let first = sizes.set_from(name);
                    return Err(tensor_error(
                        p,
                        format!(
                            "`{}` has shape {shape:?}; it must be {:?} ({name} = {v}, from `{}`)",
                            p.name,
                            wanted(&sizes, dims, shape),
                            first.unwrap_or("?")
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    (op.constraints)(&mut sizes)?;
    check_limits(op, &sizes)?;
    // A scratch given must have the length the operator derived.
    for p in op.params.iter().filter(|p| p.role == Role::Scratch) {
        let Some(&(_, shape)) = shapes.iter().find(|(n, _)| *n == p.name) else {
            continue;
        };
        let want = sizes.shape_of(p);
        if shape != want.as_slice() {
            return Err(shape_error(format!(
                "`{}` has shape {shape:?}; {}'s scratch must be {want:?}",
                p.name, op.name
            )));
        }
    }
    Ok(sizes)
}

/// The shape a tensor of rule `dims` given as `shape` must have: each bound symbol's extent,
/// the given one where the tensor is the first to name its symbol (a later dimension of the
/// tensor whose error is being written), and the rows as bound.
fn wanted(sizes: &Sizes, dims: &[Dim], shape: &[usize]) -> Vec<usize> {
    let fixed = dims.iter().filter(|d| **d != Dim::Rows).count();
    let rest = &shape[shape.len() - fixed..];
    let mut want = Vec::with_capacity(shape.len());
    if dims.first() == Some(&Dim::Rows) {
        want.extend_from_slice(sizes.leading());
    }
    for ((name, times), &given) in dims.iter().filter_map(Dim::symbol).zip(rest) {
        want.push(sizes.sym(name).map_or(given, |v| v * times));
    }
    want
}

/// Every symbol and `M` fits the u32 kernels index with, every tensor the i32 of their views.
fn check_limits(op: &Op, sizes: &Sizes) -> Result<(), LaunchError> {
    let too_large = |what: String| {
        LaunchError::invalid(
            rules::ARGUMENT_SIZE,
            format!("{what}; kernels index with 32 bits: split the problem"),
        )
    };
    let m = sizes.get("M");
    if m > u32::MAX as usize {
        return Err(too_large(format!("there are {m} rows")));
    }
    if let Some((name, v)) = sizes.symbols().iter().find(|(_, v)| *v > u32::MAX as usize) {
        return Err(too_large(format!("{name} is {v}")));
    }
    for p in op.params {
        let len: usize = sizes.shape_of(p).iter().product();
        if len > i32::MAX as usize {
            return Err(too_large(format!("`{}` has {len} elements", p.name)));
        }
    }
    Ok(())
}
