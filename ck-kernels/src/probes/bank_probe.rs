//! `bank_probe`: one block of 128 threads; thread (warp `w`, lane `l`) stores `W` bytes to shared
//! memory at byte address `w·8192 + l·S·W`, waits at a barrier, loads the same bytes back and
//! writes them to global memory. Its shared-memory wavefronts are known in closed form (see
//! [`ck_core::bank`]), so it checks the emulator's profiler against the GPU's counters.
//!
//! The stored words are derived from their address, so threads whose ranges coincide (large
//! strides wrap into the next warp's 8 KiB) store identical values: a benign race, and the
//! output does not depend on the order in which warps run.

use ck_core::device::*;
use ck_macros::tile_kernel;

/// Threads of the probe's single block.
pub const THREADS: u32 = 128;
/// Bytes between the regions of consecutive warps.
pub const WARP_REGION: u32 = 8192;
/// Shared words the probe needs for any stride ≤ 33 and width ≤ 16.
pub const SHARED_WORDS: usize = 10240;

/// Byte address of thread `t`'s access.
pub const fn address(t: u32, stride: u32, width: u32) -> u32 {
    (t / 32) * WARP_REGION + (t % 32) * stride * width
}

/// The probe kernel. `width` ∈ {4, 8, 16} bytes; `output` holds `THREADS · width / 4` words.
#[tile_kernel(block = 128)]
pub fn bank_probe(output: GlobalMut<u32>, stride: u32, width: u32) {
    let smem = shared!(u32; SHARED_WORDS);
    let t = thread_idx();
    let word = address(t, stride, width) / 4;
    let out = t * width / 4;
    match width {
        4 => {
            smem.store(word, word);
            block_sync();
            let v = smem.load(word);
            output.store(out, v);
        }
        8 => {
            smem.store_vec::<2>(word, [word, word + 1]);
            block_sync();
            let v = smem.load_vec::<2>(word);
            output.store_vec::<2>(out, v);
        }
        _ => {
            smem.store_vec::<4>(word, [word, word + 1, word + 2, word + 3]);
            block_sync();
            let v = smem.load_vec::<4>(word);
            output.store_vec::<4>(out, v);
        }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
/// What the probe writes: for each thread, the word indices of its shared-memory access.
pub fn reference(stride: u32, width: u32) -> Vec<u32> {
    (0..THREADS)
        .flat_map(|t| {
            let w = address(t, stride, width) / 4;
            (0..width / 4).map(move |k| w + k)
        })
        .collect()
}

#[cfg(not(target_arch = "nvptx64"))]
/// Validates the probe's parameters.
pub fn check_parameters(stride: u32, width: u32) -> Result<(), String> {
    if ![4, 8, 16].contains(&width) {
        return Err(format!(
            "--width {width}: the probe moves 4, 8 or 16 bytes per thread"
        ));
    }
    if stride == 0 || stride > 33 {
        return Err(format!("--stride {stride}: the probe supports strides 1..=33 (its shared array is sized for that)"));
    }
    Ok(())
}
