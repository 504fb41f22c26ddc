//! The gated units' fp64 references (`glu::host`): the module doc's worked example, and the
//! activations' slopes that the backward uses against central differences and the kernels'
//! f32 ones.

use ck_kernels::gemm::epilogue::Activation;
use ck_kernels::glu::host::*;

#[test]
fn the_worked_example_of_the_module_doc() {
    let y = reference(Activation::Silu, &[1.0, 2.0], 1);
    assert!((y[0] - 1.462_117).abs() < 1e-6, "{y:?}");
    let dgu = reference_backward(Activation::Silu, &[1.0], &[1.0, 2.0], 1);
    assert!(
        (dgu[0] - 1.855_3).abs() < 1e-4 && (dgu[1] - 0.731_059).abs() < 1e-6,
        "{dgu:?}"
    );
}

#[test]
fn the_slopes_are_the_activations_derivatives() {
    let h = 1e-6;
    for act in [Activation::Silu, Activation::Gelu] {
        for i in -40..=40 {
            let x = i as f64 / 8.0;
            let numeric = (act_and_slope(act, x + h).0 - act_and_slope(act, x - h).0) / (2.0 * h);
            let slope = act_and_slope(act, x).1;
            assert!(
                (numeric - slope).abs() < 1e-8,
                "{act:?} at {x}: {numeric} vs {slope}"
            );
            // The kernels' f32 slope, against the f64 one.
            let device = Activation::slope(act.code(), x as f32) as f64;
            assert!(
                (device - slope).abs() < 1e-5,
                "{act:?}' at {x}: {device} vs {slope}"
            );
        }
    }
}
