//! Every exercise kernel on the emulator and on the GPU, bit for bit. Skips (and says so) where
//! there is no GPU; `scripts/gpu-check.sh` runs the same comparison (`ck cross-check`) on the
//! GPU machine.

use ck_core::host::Device;
use ck_kernels::checks::cross_check;

#[test]
fn emulator_and_gpu_agree() {
    let gpu = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skipping the cross-backend test: {e}");
            return;
        }
    };
    let results = cross_check(&Device::emulator(), &gpu).unwrap();
    for r in &results {
        assert!(
            r.identical && r.problems.is_empty(),
            "{}: identical = {}, {:?}",
            r.case,
            r.identical,
            r.problems
        );
    }
}
