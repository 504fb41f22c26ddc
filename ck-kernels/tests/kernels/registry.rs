//! Every operator of the registry, each element type, on each of its checked problems on the
//! emulator: its output against its fp64 reference within its tolerance (what `ck run
//! OP-DTYPE` and `ck cross-check` run), and its description consistent with the front ends.

use ck_core::host::Device;
use ck_kernels::op::bind::bind;
use ck_kernels::op::{check, Dim, Role};
use ck_kernels::registry;

#[test]
fn every_operator_matches_its_reference_on_its_cases() {
    let device = Device::emulator();
    for op in registry::operators() {
        for &dtype in op.dtypes {
            for sizes in (op.cases)(None) {
                let o = check(&device, op, dtype, &sizes, 3).unwrap();
                let case = format!("{} {} {sizes:?}", op.name, dtype.name());
                assert!(o.mismatch.is_none(), "{case}: {:?}", o.mismatch);
            }
        }
    }
}

#[test]
fn descriptions_are_well_formed() {
    let mut names = Vec::new();
    for op in registry::operators() {
        assert!(!names.contains(&op.name), "two operators named {}", op.name);
        names.push(op.name);
        assert_eq!(registry::find(&op.command()).map(|o| o.name), Some(op.name));
        // Inputs first, optional ones included (their order is the samples' and Python's
        // positional order).
        let first_output = op.params.iter().position(|p| !p.role.is_input());
        let inputs = op.inputs().count();
        assert_eq!(first_output, Some(inputs), "{}: inputs first", op.name);
        // `Rows` only leads a rule.
        for p in op.params {
            assert!(!p.dims[1..].contains(&Dim::Rows), "{}.{}", op.name, p.name);
        }
        // The inputs (and count scalars) alone give every other tensor's shape: what a caller
        // allocates outputs and scratch from (a symbol no input shows is a count's, or one the
        // constraints derive).
        for sizes in (op.cases)(None) {
            let required = op.params.iter().filter(|p| p.role == Role::Input);
            let shapes: Vec<(&str, Vec<usize>)> =
                required.map(|p| (p.name, sizes.shape_of(p))).collect();
            let named: Vec<(&str, &[usize])> = shapes.iter().map(|(n, s)| (*n, &s[..])).collect();
            let bound = bind(op, &named, &op.scalars_for(&sizes), false).unwrap();
            for p in op.params.iter().filter(|p| !p.role.is_input()) {
                let shape = bound.shape_of(p); // panics on a symbol nothing sets
                if p.role != Role::Scratch {
                    assert_eq!(shape, sizes.shape_of(p), "{}.{}", op.name, p.name);
                }
            }
        }
        assert!(!op.dtypes.is_empty() && !op.summary.is_empty());
    }
}

#[test]
fn a_stacked_extent_binds_to_half_and_refuses_an_odd_one() {
    let op = registry::find("swiglu").unwrap();
    let sizes = ck_kernels::op::bind::bind(op, &[("gu", &[3, 4, 10])], &[], false).unwrap();
    assert_eq!((sizes.get("M"), sizes.get("F")), (12, 5));
    assert_eq!(sizes.shape_of(op.param("y").unwrap()), [3, 4, 5]);
    let odd = ck_kernels::op::bind::bind(op, &[("gu", &[3, 9])], &[], false).unwrap_err();
    assert!(
        odd.to_string()
            .contains("[..., 2*F]: 9 is not a multiple of 2"),
        "{odd}"
    );
    let y = ck_kernels::op::bind::bind(op, &[("gu", &[3, 10]), ("y", &[3, 10])], &[], true)
        .unwrap_err();
    assert!(
        y.to_string()
            .contains("it must be [3, 5] (F = 5, from `gu`)"),
        "{y}"
    );
}

#[test]
fn a_flag_switches_a_layout_and_constraints_are_checked_after_the_rules() {
    use ck_kernels::op::bind::bind;
    let op = registry::find("attention").unwrap();
    let (q, kv): (&[usize], &[usize]) = (&[2, 4, 3, 64], &[2, 1, 5, 64]);
    let shapes = [("q", q), ("k", kv), ("v", kv)];
    // Scalars in order: scale (NaN: derived), causal, o_seq_first.
    let seq_first = bind(op, &shapes, &[f32::NAN, 0.0, 1.0], false).unwrap();
    assert!(seq_first.flag("o_seq_first") && !seq_first.flag("causal"));
    assert_eq!(seq_first.shape_of(op.param("o").unwrap()), [2, 3, 4, 64]);
    let heads_first = bind(op, &shapes, &[f32::NAN, 0.0, 0.0], false).unwrap();
    assert_eq!(heads_first.shape_of(op.param("o").unwrap()), [2, 4, 3, 64]);
    // An `o` of the other layout is refused under the flag's rule.
    let o = [("o", &[2usize, 4, 3, 64][..])];
    let all: Vec<_> = shapes.iter().copied().chain(o).collect();
    let e = bind(op, &all, &[f32::NAN, 0.0, 1.0], true).unwrap_err();
    assert!(e.to_string().contains("it must be [2, 3, 4, 64]"), "{e}");
    // 4 query heads on 3 key/value heads: every rule holds, the relation does not.
    let kv3: &[usize] = &[2, 3, 5, 64];
    let e = bind(
        op,
        &[("q", q), ("k", kv3), ("v", kv3)],
        &[f32::NAN, 0.0, 0.0],
        false,
    );
    assert_eq!(e.unwrap_err().rule(), ck_core::rules::GQA_HEADS);
}

#[test]
fn a_count_scalar_sets_its_symbol_and_the_stacked_heads_must_add_up() {
    use ck_kernels::op::bind::bind;
    let op = registry::find("attention_qkv").unwrap();
    let qkv: &[usize] = &[1, 5, 8, 64]; // 4 + 2·2 heads
                                        // Scalars in order: heads, kv_heads, scale (NaN: derived), causal.
    let sizes = bind(op, &[("qkv", qkv)], &[4.0, 2.0, f32::NAN, 1.0], false).unwrap();
    assert_eq!(sizes.shape_of(op.param("o").unwrap()), [1, 5, 4, 64]);
    assert_eq!(sizes.shape_of(op.param("lse").unwrap()), [1, 4, 5]);
    let e = bind(op, &[("qkv", qkv)], &[4.0, 1.0, f32::NAN, 0.0], false).unwrap_err();
    assert!(
        e.to_string()
            .contains("`qkv` stacks 8 heads; heads + 2·kv_heads is 6"),
        "{e}"
    );
    // An `o` of the wrong head count names the scalar that set H.
    let o: &[usize] = &[1, 5, 2, 64];
    let e = bind(
        op,
        &[("qkv", qkv), ("o", o)],
        &[4.0, 2.0, f32::NAN, 0.0],
        true,
    )
    .unwrap_err();
    assert!(e.to_string().contains("(H = 4, from `heads`)"), "{e}");
}

/// A backward over no rows still writes its parameter gradients: sums over no row, zeros (a
/// problem is skipped only when no output has an element).
#[test]
fn no_rows_give_zero_parameter_gradients() {
    let device = Device::emulator();
    for name in [
        "rmsnorm_backward",
        "add_rmsnorm_backward",
        "layernorm_backward",
    ] {
        let op = registry::find(name).unwrap();
        let mut call = ck_kernels::op::HostCall::new(op).all_outputs();
        let ones = [1.0f32; 8];
        for p in op.inputs() {
            let shape: &[usize] = match p.dims {
                [Dim::Rows] => &[0],
                [Dim::Rows, _] => &[0, 8],
                _ => &[8],
            };
            let values: &[f32] = if shape[0] == 0 { &[] } else { &ones };
            call = call.input(p.name, values, shape);
        }
        let out = call.run(&device).unwrap();
        for p in op.outputs().filter(|p| p.dims == [Dim::Sym("N")]) {
            assert_eq!(out.output(p.name), Some(&[0.0; 8][..]), "{name}.{}", p.name);
        }
    }
}

/// A count scalar has no default: left out, the call names it instead of binding zero heads.
/// A tensor that disagrees on a symbol before naming its own new one: the error shows the shape
/// it must have, its own extents where it sets them.
#[test]
fn a_mismatch_before_a_new_symbol_names_the_whole_shape() {
    let op = registry::find("gemm_a_km").unwrap(); // a_km [K, M], b [K, N]
    let shapes: [(&str, &[usize]); 2] = [("a_km", &[16, 8]), ("b", &[4, 24])];
    let e = bind(op, &shapes, &op.scalars_for(&Default::default()), false).unwrap_err();
    assert_eq!(e.rule(), ck_core::rules::SHAPE_MISMATCH);
    let want = "`b` has shape [4, 24]; it must be [16, 24] (K = 16, from `a_km`)";
    assert!(e.to_string().contains(want), "{e}");
}

#[test]
fn a_count_left_out_is_named() {
    let op = registry::find("attention_qkv").unwrap();
    let qkv = [0.0f32; 8 * 64];
    let call = ck_kernels::op::HostCall::new(op).input("qkv", &qkv, &[1, 1, 8, 64]);
    let Err(e) = call.scalar("kv_heads", 2.0).run(&Device::emulator()) else {
        panic!("attention_qkv ran without `heads`");
    };
    assert_eq!(e.rule(), ck_core::rules::UNKNOWN_ARGUMENT);
    assert!(e.to_string().contains("needs the scalar `heads`"), "{e}");
}

#[test]
fn optional_inputs_join_the_epilogue_and_a_choice_is_named() {
    use ck_kernels::gemm::describe::LINEAR;
    use ck_kernels::op::HostCall;
    let device = Device::emulator();
    // x = [1, 2] (one row), W = [[1, 0], [0, 1], [1, 1]]: x·Wᵀ = [1, 2, 3]; residual [−4, 0, 1]
    // with beta 0.5 and bias [0, 1, 0]: [1 − 2, 2 + 1, 3 + 0.5] = [−1, 3, 3.5]; relu: [0, 3, 3.5].
    let (x, w) = ([1.0, 2.0], [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let call = || {
        HostCall::new(&LINEAR)
            .input("x", &x, &[1, 2])
            .input("weight", &w, &[3, 2])
    };
    let plain = call().run(&device).unwrap();
    assert_eq!(plain.output("c").unwrap(), &[1.0, 2.0, 3.0]);
    let fused = call()
        .input("residual", &[-4.0, 0.0, 1.0], &[1, 3])
        .input("bias", &[0.0, 1.0, 0.0], &[3])
        .scalar("beta", 0.5)
        .scalar("activation", 1.0)
        .run(&device)
        .unwrap();
    assert_eq!(fused.output("c").unwrap(), &[0.0, 3.0, 3.5]);
    // A choice is an index into its names; another value is refused with them.
    let err = call().scalar("activation", 4.0).run(&device).err().unwrap();
    assert!(
        err.to_string()
            .contains("give one of none, relu, gelu, silu"),
        "{err}"
    );
    // By name: relu is the index the fused call above gave (its result is relu's).
    use ck_kernels::op::host::choice_index;
    assert_eq!(choice_index(&LINEAR, "activation", "relu").unwrap(), 1);
    let err = choice_index(&LINEAR, "activation", "tanh").unwrap_err();
    assert_eq!(err.rule(), ck_core::rules::UNKNOWN_ARGUMENT);
    assert!(
        err.to_string()
            .contains("activation 'tanh'; use one of none, relu, gelu, silu"),
        "{err}"
    );
    let err = choice_index(&LINEAR, "beta", "one").unwrap_err();
    assert!(
        err.to_string()
            .contains("has no choice `beta`; its choices are [activation]"),
        "{err}"
    );
    // Any finite alpha (negative too); an infinite one is refused.
    let negated = call().scalar("alpha", -1.0).run(&device).unwrap();
    assert_eq!(negated.output("c").unwrap(), &[-1.0, -2.0, -3.0]);
    let err = call()
        .scalar("alpha", f32::INFINITY)
        .run(&device)
        .err()
        .unwrap();
    assert!(err.to_string().contains("give a finite number"), "{err}");
}

/// The error measures every operator's check uses (`op::verify`).
mod measures {
    use ck_kernels::op::verify::*;

    #[test]
    fn an_element_never_written_fails_every_measure() {
        let want = [1.0, 2.0];
        assert!(max_relative_error(&[1.0, f32::NAN], &want).is_nan());
        assert!(norm_relative_error(&[f32::NAN, 2.0], &want).is_nan());
        assert!(worst(0.5, f64::NAN).is_nan() && worst(f64::NAN, 0.5).is_nan());
        assert_eq!(max_relative_error(&[1.0, 2.5], &want), 0.25);
        // An output left out (an empty slice) is not a perfect one.
        assert!(max_relative_error(&[], &want).is_nan());
        assert!(norm_relative_error(&[1.0], &want).is_nan());
        assert!(norm_error_relative_to(&[], &want, &want).is_nan());
        // (1 − 1)² + (2.5 − 2)² over 3² + 4²: 0.5 / 5.
        assert_eq!(norm_error_relative_to(&[1.0, 2.5], &want, &[3.0, 4.0]), 0.1);
    }
}
