use ck_core::device::*;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig};
use ck_macros::tile_kernel;

// A kernel with a mistake in its options: the only error is that one. The kernel still
// defines its function and its launcher, so the code that launches it type-checks (no
// secondary "cannot find `Fill`" or shared!-outside-a-kernel errors).
#[tile_kernel(block = 2000)]
fn fill(output: GlobalMut<u32>, value: u32) {
    let s = shared!(u32; 64);
    s.store(thread_idx() % 64, value);
    output.store(thread_idx(), s.load(thread_idx() % 64));
}

fn main() {
    let device = Device::emulator();
    let mut out = DeviceBuffer::<u32>::zeros(&device, 64).unwrap();
    let _ = Fill::launch(&device, LaunchConfig::new(1, 64), &mut out, 7);
}
