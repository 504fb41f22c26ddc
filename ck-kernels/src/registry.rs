//! Every operator of the library, by family: what `ck run`, `ck cross-check`, `ck bench`, the
//! Python package and the tests iterate. A family lists its operators in its folder (`OPS` in
//! its `mod.rs`); a new family adds one line here.

use crate::op::Op;

/// Every operator, family by family.
pub fn operators() -> impl Iterator<Item = &'static Op> {
    let families = [
        crate::rows::OPS,
        crate::glu::OPS,
        crate::gemm::describe::OPS,
        crate::attention::OPS,
        crate::rope::describe::OPS,
    ];
    families.into_iter().flatten().copied()
}

/// The operator `name` (`add_rmsnorm`, or `ck run`'s `add-rmsnorm`).
pub fn find(name: &str) -> Option<&'static Op> {
    operators().find(|op| op.name == name).or_else(|| {
        let name = name.replace('-', "_");
        operators().find(|op| op.name == name)
    })
}
