//! Which kernel each row operator runs for a row length: `Instance::pick` over every operator's
//! instance table, against the rule written out here (the tiles are 1024, 4096 and 8192 columns
//! wide; a row of exactly a tile's width runs its `Full` kernel where the operator has one; rows
//! longer than 8192 run the `Long` kernel where it has one).

use ck_core::device::Bf16;
use ck_kernels::op::OpElement;
use ck_kernels::rows::plan::{Instance, RowTile, Variant};
use ck_kernels::rows::{add_rmsnorm, layernorm, rmsnorm, softmax};

/// Row lengths around every boundary of the rule.
fn lengths() -> Vec<u32> {
    let mut n: Vec<u32> = (1..=40).collect();
    for edge in [1024u32, 4096, 8192, 16384] {
        n.extend(edge - 2..=edge + 2);
    }
    n.extend([20000, 65536, 100_003]);
    n
}

/// The tile for `n` columns, written out: up to 1024, up to 4096, else 8192.
fn tile(n: u32) -> RowTile {
    match n {
        0..=1024 => RowTile::Rows,
        1025..=4096 => RowTile::Row4096,
        _ => RowTile::Row8192,
    }
}

/// Checks `pick` for type `T` with an operator whose table has `Full` kernels (`full`) and
/// `Long` ones (`long`).
fn check<T: OpElement>(op: &str, instances: &[Instance], full: bool, long: bool) {
    for n in lengths() {
        let want = Instance {
            tile: tile(n),
            variant: if full && [1024, 4096, 8192].contains(&n) {
                Variant::Full
            } else if long && n > 8192 {
                Variant::Long
            } else {
                Variant::Padded
            },
        };
        let got = Instance::pick(n, T::DTYPE, instances);
        assert_eq!(got, want, "{op} {:?} n = {n}", T::DTYPE);
        assert!(
            instances.contains(&got),
            "{op} {:?} has no kernel for {got:?}",
            T::DTYPE
        );
    }
}

#[test]
fn every_operator_runs_the_kernel_the_rule_gives() {
    check::<f32>(
        "rmsnorm",
        <f32 as rmsnorm::Kernels>::INSTANCES,
        false,
        false,
    );
    check::<Bf16>(
        "rmsnorm",
        <Bf16 as rmsnorm::Kernels>::INSTANCES,
        true,
        false,
    );
    check::<f32>(
        "add_rmsnorm",
        <f32 as add_rmsnorm::Kernels>::INSTANCES,
        false,
        false,
    );
    check::<Bf16>(
        "add_rmsnorm",
        <Bf16 as add_rmsnorm::Kernels>::INSTANCES,
        true,
        false,
    );
    check::<f32>(
        "layernorm",
        <f32 as layernorm::Kernels>::INSTANCES,
        true,
        true,
    );
    check::<Bf16>(
        "layernorm",
        <Bf16 as layernorm::Kernels>::INSTANCES,
        true,
        true,
    );
    check::<f32>("softmax", <f32 as softmax::Kernels>::INSTANCES, false, true);
    check::<Bf16>(
        "softmax",
        <Bf16 as softmax::Kernels>::INSTANCES,
        false,
        true,
    );
}

#[test]
fn the_tiles_are_as_wide_as_the_rule_says() {
    for dtype in [<f32 as OpElement>::DTYPE, <Bf16 as OpElement>::DTYPE] {
        assert_eq!(RowTile::Rows.columns(dtype), 1024);
        assert_eq!(RowTile::Row4096.columns(dtype), 4096);
        assert_eq!(RowTile::Row8192.columns(dtype), 8192);
    }
}
