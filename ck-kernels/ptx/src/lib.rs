#![feature(stdarch_nvptx)]
//! Links every `#[tile_kernel]` entry point of ck-kernels into one PTX module.
#![no_std]

pub use ck_kernels::*;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; nothing runs after it.
    unsafe { core::arch::nvptx::trap() }
}
