//! The emulator as a sanitizer: each seeded bug is caught with the right diagnosis (kernel,
//! block, threads), the same kernel without the bug passes, and bad launches are refused before
//! running. Nothing hangs or crashes.

use ck_core::device::*;
use ck_core::host::{Device, DeviceBuffer, Fault, KernelSpec, LaunchConfig, LaunchError};
use ck_core::wgmma::{swizzle_128b, SmemMatrix};
use ck_macros::tile_kernel;

/// Neighbour exchange through shared memory; `sync = 0` drops the barrier (a race).
#[tile_kernel(block = 64)]
fn neighbour(output: GlobalMut<u32>, sync: u32) {
    let s = shared!(u32; 64);
    let t = thread_idx();
    s.store(t, t * 10);
    if sync != 0 {
        block_sync();
    }
    output.store(t, s.load((t + 1) % 64));
}

/// Writes `output[t + shift]`; `shift = 1` makes the last thread store out of bounds.
#[tile_kernel(block = 32)]
fn shifted_store(output: GlobalMut<u32>, shift: u32) {
    let t = thread_idx();
    output.store(t + shift, t);
}

/// Reads an absent optional input (`Global::empty()`) when `read = 1`.
#[tile_kernel(block = 32)]
fn absent_input(output: GlobalMut<u32>, read: u32) {
    let none = Global::<u32>::empty();
    let t = thread_idx();
    output.store(
        t,
        if read != 0 {
            none.load(t)
        } else {
            none.len() + t
        },
    );
}

/// A barrier inside a branch only some threads take (`divergent = 1`).
#[tile_kernel(block = 64)]
fn branchy_barrier(output: GlobalMut<u32>, divergent: u32) {
    let t = thread_idx();
    if divergent == 0 || t < 32 {
        block_sync();
    }
    output.store(t, t);
}

/// Warp 0 waits in a shuffle for lane 31, which waits at a barrier for everyone (`bug = 1`).
#[tile_kernel(block = 64)]
fn shuffle_vs_barrier(output: GlobalMut<u32>, bug: u32) {
    let t = thread_idx();
    let v = if bug != 0 && t == 31 {
        block_sync();
        0
    } else {
        shfl_xor(t, 1)
    };
    if bug == 0 || t != 31 {
        block_sync();
    }
    output.store(t, v);
}

/// Each thread copies its 16 bytes into shared memory with `cp.async` and reads its
/// neighbour's; `wait = 0` drops the `cp_async_wait` (the neighbour's bytes may not have landed).
#[tile_kernel(block = 64)]
fn async_neighbour(input: Global<u32>, output: GlobalMut<u32>, wait: u32) {
    let s = shared!(u32; 256);
    let t = thread_idx();
    cp_async_16(&s, 4 * t, &input, 4 * t, true);
    cp_async_commit();
    if wait != 0 {
        cp_async_wait::<0>();
    }
    block_sync();
    output.store(t, s.load((4 * t + 4) % 256));
}

/// Two groups in flight (the newer one zero-fills for threads 16..32). Mode 0: wait for all but
/// one group, read the older; mode 1: the same wait, read the newer — not landed, even for the
/// issuing thread; mode 2: wait for all, read the newer.
#[tile_kernel(block = 32)]
fn async_groups(input: Global<u32>, output: GlobalMut<u32>, mode: u32) {
    let s = shared!(u32; 256);
    let t = thread_idx();
    cp_async_16(&s, 4 * t, &input, 4 * t, true);
    cp_async_commit();
    cp_async_16(&s, 128 + 4 * t, &input, 128 + 4 * t, t < 16);
    cp_async_commit();
    if mode == 2 {
        cp_async_wait::<0>();
    } else {
        cp_async_wait::<1>();
    }
    output.store(t, s.load(4 * t + if mode == 0 { 0 } else { 128 }));
}

/// A wgmma whose A descriptor asks for the 64-byte swizzle (`mode` 2), or issued by threads
/// that are not a whole warpgroup (`block = 64` below).
#[tile_kernel(block = 128)]
fn wgmma_swizzle64(output: GlobalMut<f32>, mode: u32) {
    // Zeroed operands for descriptors with start 0 and strides 0.
    let _operands = shared!(u32; 64);
    let mut acc = [0f32; 64];
    wgmma_bf16(&mut acc, (mode as u64) << 62, 0, false);
    output.store(thread_idx(), acc[0]);
}

#[tile_kernel(block = 64)]
fn wgmma_half_warpgroup(output: GlobalMut<f32>) {
    let mut acc = [0f32; 64];
    wgmma_bf16(&mut acc, 0, 0, false);
    output.store(thread_idx(), acc[0]);
}

/// Threads 0..64 store row t of A (64 × 16 ones), threads 64..128 row t − 64 of B (64 × 16
/// ones, K-major), then the warpgroup multiplies: each element of C is 16. `mode` 1 leaves out
/// the barrier between the stores and the MMA; 2 has thread 100 store into A's first element
/// after the MMA (the other threads' MMAs read it, and nothing orders the two); 3 points B's
/// descriptor past the end of shared memory.
#[tile_kernel(block = 128)]
fn mma_after_stores(output: GlobalMut<f32>, mode: u32) {
    let smem = shared!(Bf16; 64 * 64 * 2 + 512);
    let first = (1024 - smem.shared_address(0) % 1024) % 1024 / 2;
    let t = thread_idx();
    let (m, row) = (t / 64, t % 64);
    for k in 0..16 {
        let at = first + m * 4096 + swizzle_128b(row * 128 + k * 2) / 2;
        smem.store(at, Bf16(0x3F80));
    }
    fence_proxy_async();
    if mode != 1 {
        block_sync();
    }
    let desc = |m: u32| {
        let start = smem.shared_address(first + m * 4096);
        SmemMatrix::k_major_128b(start).descriptor()
    };
    let mut acc = [0f32; 32];
    wgmma_fence();
    wgmma_bf16_b_kmajor(
        &mut acc,
        desc(0),
        desc(if mode == 3 { 2 } else { 1 }),
        false,
    );
    wgmma_commit();
    wgmma_wait::<0>(&mut acc);
    if mode == 2 && t == 100 {
        smem.store(first, Bf16(0x4000));
    }
    output.store(t, acc[0]);
}

/// Each of 64 threads writes `thread + 1` into shared memory, then thread 0 has the copy engine
/// add the 64 floats to `output` twice (one group each). `mode` 1 leaves out the writers'
/// `fence_proxy_async`; 2, the issuer's wait before the block ends.
#[tile_kernel(block = 64)]
fn bulk_add_twice(output: GlobalMut<f32>, mode: u32) {
    let s = shared!(f32; 64);
    s.store(thread_idx(), (thread_idx() + 1) as f32);
    if mode != 1 {
        fence_proxy_async();
    }
    block_sync();
    if thread_idx() == 0 {
        for _ in 0..2 {
            output.bulk_add_from_shared(0, &s, 0, 64);
            bulk_commit_group();
        }
        if mode != 2 {
            bulk_wait_group::<0>();
        }
    }
}

/// A handle smuggled past its launch: set by the test, read by `stale_read`.
static SMUGGLED: std::sync::Mutex<Option<Global<u32>>> = std::sync::Mutex::new(None);

/// Reads through the smuggled handle instead of its argument.
#[tile_kernel(block = 32)]
fn stale_read(output: GlobalMut<u32>) {
    let stale = SMUGGLED.lock().unwrap().expect("set by the test");
    output.store(thread_idx(), stale.load(thread_idx()));
}

/// A 4 × 4 view over a buffer of `len` elements; one thread reads its last element.
#[tile_kernel(block = 32)]
fn oversized_view(x: Global<u32>, output: GlobalMut<u32>) {
    let v = ck_core::tile::View2::<_, u32, 1>::new(x, 4, 4, 4);
    let t = ck_core::tile::make_tile_window::<One, _>(v, [3, 3]).load::<u32>();
    if thread_idx() == 0 {
        output.store(0, t.get(0));
    }
}

ck_macros::tile_distribution! {
    /// One element per thread, every thread the same (for `oversized_view`).
    struct One {
        warp_size: 32, block_size: 32,
        r: [lane: 32],
        h: { i: [one: 1], j: [one: 1] },
        p: [[r.lane]],
        y: [i.one, j.one],
    }
}

/// Thread `t` copies element `t` of `x.slice(start, len)` (if inside it); `unchecked = 1` has
/// thread 0 issue an unchecked `cp.async` from one vector past the slice's end instead.
#[tile_kernel(block = 32)]
fn sliced(x: Global<u32>, output: GlobalMut<u32>, start: u32, len: u32, unchecked: u32) {
    let part = x.slice(start, len);
    let t = thread_idx();
    if unchecked != 0 {
        let s = shared!(u32; 4);
        if t == 0 {
            // SAFETY: deliberately broken (the emulator must report it): the source lies
            // outside `part`.
            unsafe { cp_async_16_unchecked(&s, 0, &part, len, true) };
        }
        cp_async_commit();
        cp_async_wait::<0>();
    } else if t < len {
        output.store(t, part.load(t));
    }
}

fn device() -> Device {
    Device::emulator()
}

fn kernel_error(r: Result<ck_core::host::LaunchStats, LaunchError>) -> ck_core::host::KernelError {
    match r {
        Err(LaunchError::Kernel(e)) => e,
        other => panic!("expected a kernel error, got {other:?}"),
    }
}

#[test]
fn a_race_is_caught_and_the_synchronised_kernel_passes() {
    let d = device();
    let mut out = DeviceBuffer::zeros(&d, 64).unwrap();
    let e = kernel_error(Neighbour::launch(&d, LaunchConfig::new(2, 64), &mut out, 0));
    assert_eq!(e.fault, Fault::SharedRace);
    assert_eq!(e.kernel, "neighbour");
    assert_eq!(e.block, 0);
    assert_eq!(e.threads.len(), 2);
    let msg = e.to_string();
    assert!(
        msg.starts_with("shared-race in kernel `neighbour`, block 0:"),
        "{msg}"
    );
    assert!(
        msg.contains("sanitizer.rs"),
        "the message names the source lines: {msg}"
    );
    Neighbour::launch(&d, LaunchConfig::new(2, 64), &mut out, 1).unwrap();
    let expect: Vec<u32> = (0..64).map(|t| ((t + 1) % 64) * 10).collect();
    assert_eq!(out.to_vec().unwrap(), expect);
}

#[test]
fn an_out_of_bounds_store_is_caught() {
    let d = device();
    let mut out = DeviceBuffer::zeros(&d, 32).unwrap();
    let e = kernel_error(ShiftedStore::launch(
        &d,
        LaunchConfig::new(1, 32),
        &mut out,
        1,
    ));
    assert_eq!(e.fault, Fault::OutOfBounds);
    assert_eq!(e.threads, [31]);
    assert_eq!(e.address, Some(32));
    assert!(
        e.message.contains("element 32") && e.message.contains("32 elements"),
        "{}",
        e.message
    );
    ShiftedStore::launch(&d, LaunchConfig::new(1, 32), &mut out, 0).unwrap();
    assert_eq!(out.to_vec().unwrap(), (0..32).collect::<Vec<u32>>());
}

#[test]
fn an_access_through_an_empty_handle_is_out_of_bounds() {
    let d = device();
    let mut out = DeviceBuffer::zeros(&d, 32).unwrap();
    let e = kernel_error(AbsentInput::launch(
        &d,
        LaunchConfig::new(1, 32),
        &mut out,
        1,
    ));
    assert_eq!(e.fault, Fault::OutOfBounds, "{e}");
    assert!(e.message.contains("Global::empty()"), "{e}");
    AbsentInput::launch(&d, LaunchConfig::new(1, 32), &mut out, 0).unwrap();
    assert_eq!(out.to_vec().unwrap(), (0..32).collect::<Vec<u32>>());
}

#[test]
fn a_barrier_in_a_divergent_branch_is_caught() {
    let d = device();
    let mut out = DeviceBuffer::zeros(&d, 64).unwrap();
    let e = kernel_error(BranchyBarrier::launch(
        &d,
        LaunchConfig::new(1, 64),
        &mut out,
        1,
    ));
    assert_eq!(e.fault, Fault::BarrierDivergence);
    assert_eq!(e.threads, (32..64).collect::<Vec<u32>>());
    assert!(
        e.message.contains("threads 32..=63 exited"),
        "{}",
        e.message
    );
    BranchyBarrier::launch(&d, LaunchConfig::new(1, 64), &mut out, 0).unwrap();
}

#[test]
fn a_deadlock_is_reported_not_hung() {
    let d = device();
    let mut out = DeviceBuffer::zeros(&d, 64).unwrap();
    let e = kernel_error(ShuffleVsBarrier::launch(
        &d,
        LaunchConfig::new(1, 64),
        &mut out,
        1,
    ));
    assert_eq!(e.fault, Fault::Deadlock);
    assert!(e.message.contains("wait in shfl_xor"), "{}", e.message);
    assert!(e.message.contains("wait at block_sync"), "{}", e.message);
    ShuffleVsBarrier::launch(&d, LaunchConfig::new(1, 64), &mut out, 0).unwrap();
    let expect: Vec<u32> = (0..64).map(|t| t ^ 1).collect();
    assert_eq!(out.to_vec().unwrap(), expect);
}

/// Half the warp shuffles, half exits.
#[tile_kernel(block = 32)]
fn half_warp_shuffle(output: GlobalMut<u32>) {
    let t = thread_idx();
    if t < 16 {
        output.store(t, shfl_xor(t, 1));
    }
}

/// A 16-byte access at an odd element.
#[tile_kernel(block = 32)]
fn misaligned(output: GlobalMut<u32>) {
    output.store_vec::<4>(1, [1, 2, 3, 4]);
}

/// Indexes a Rust array out of bounds.
#[tile_kernel(block = 32)]
fn panicking(output: GlobalMut<u32>, i: u32) {
    let a = [1u32, 2, 3];
    output.store(thread_idx(), a[i as usize]);
}

#[test]
fn other_faults_are_diagnosed() {
    let d = device();
    let mut out = DeviceBuffer::zeros(&d, 32).unwrap();
    let e = kernel_error(HalfWarpShuffle::launch(
        &d,
        LaunchConfig::new(1, 32),
        &mut out,
    ));
    assert_eq!(e.fault, Fault::WarpDivergence);
    let e = kernel_error(Misaligned::launch(&d, LaunchConfig::new(1, 32), &mut out));
    assert_eq!(e.fault, Fault::Misaligned);
    let e = kernel_error(Panicking::launch(&d, LaunchConfig::new(1, 32), &mut out, 7));
    assert_eq!(e.fault, Fault::Panic);
    assert!(e.message.contains("index out of bounds"), "{}", e.message);
    Panicking::launch(&d, LaunchConfig::new(1, 32), &mut out, 2).unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![3; 32]);
}

#[test]
fn bad_launches_are_refused_before_running() {
    let d = device();
    let mut out = DeviceBuffer::zeros(&d, 64).unwrap();
    let refuse = |r: Result<ck_core::host::LaunchStats, LaunchError>, rule: &str| match r {
        Err(e @ LaunchError::Invalid { .. }) => assert_eq!(e.rule(), rule, "{e}"),
        other => panic!("expected {rule}, got {other:?}"),
    };
    refuse(
        Neighbour::launch(&d, LaunchConfig::new(1, 128), &mut out, 1),
        "block-size",
    );
    refuse(
        Neighbour::launch(&d, LaunchConfig::new(0, 64), &mut out, 1),
        "grid-size",
    );
    let big = KernelSpec {
        shared_bytes: 300 * 1024,
        block: None,
        ..Neighbour::SPEC
    };
    let checked = |spec: &KernelSpec, cfg| {
        ck_core::host::validate(&d, spec, cfg).map(|()| ck_core::host::LaunchStats::default())
    };
    refuse(checked(&big, LaunchConfig::new(1, 32)), "shared-memory");
    let any = KernelSpec {
        block: None,
        ..Neighbour::SPEC
    };
    refuse(checked(&any, LaunchConfig::new(1, 2048)), "block-size");
    // The refused launches wrote nothing.
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 0));
}

#[test]
fn buffers_of_another_device_are_refused() {
    // A second emulator is the same kind of device: accepted.
    let d = device();
    let other = Device::emulator();
    let mut out = DeviceBuffer::zeros(&other, 64).unwrap();
    Neighbour::launch(&d, LaunchConfig::new(1, 64), &mut out, 1).unwrap();
    // Where there is no GPU, asking for one is a clear error, not a panic.
    if let Err(e) = Device::cuda(0) {
        assert_eq!(e.rule(), "no-gpu", "{e}");
    }
}

#[test]
fn a_missing_cp_async_wait_is_caught_and_the_waiting_kernel_passes() {
    let d = device();
    let values: Vec<u32> = (0..256).map(|i| i * 3 + 1).collect();
    let input = DeviceBuffer::from_slice(&d, &values).unwrap();
    let mut out = DeviceBuffer::zeros(&d, 64).unwrap();
    let cfg = LaunchConfig::new(1, 64);
    let e = kernel_error(AsyncNeighbour::launch(&d, cfg, &input, &mut out, 0));
    assert_eq!(e.fault, Fault::SharedRace);
    // Thread 0 reads the first element of thread 1's copy.
    assert_eq!(e.threads, [1, 0]);
    assert_eq!(e.address, Some(16));
    assert!(
        e.message.contains("cp_async_16") && e.message.contains("cp_async_wait"),
        "{}",
        e.message
    );
    AsyncNeighbour::launch(&d, cfg, &input, &mut out, 1).unwrap();
    let expect: Vec<u32> = (0..64).map(|t| values[(4 * t + 4) % 256]).collect();
    assert_eq!(out.to_vec().unwrap(), expect);
}

#[test]
fn cp_async_wait_lands_the_oldest_groups_only() {
    let d = device();
    let values: Vec<u32> = (0..256).map(|i| i + 1000).collect();
    let input = DeviceBuffer::from_slice(&d, &values).unwrap();
    let mut out = DeviceBuffer::zeros(&d, 32).unwrap();
    let cfg = LaunchConfig::new(1, 32);
    AsyncGroups::launch(&d, cfg, &input, &mut out, 0).unwrap();
    let expect: Vec<u32> = (0..32).map(|t| values[4 * t]).collect();
    assert_eq!(out.to_vec().unwrap(), expect);
    let e = kernel_error(AsyncGroups::launch(&d, cfg, &input, &mut out, 1));
    assert_eq!(e.fault, Fault::SharedRace);
    assert_eq!(e.threads, [0, 0]);
    assert_eq!(e.address, Some(512));
    AsyncGroups::launch(&d, cfg, &input, &mut out, 2).unwrap();
    let expect: Vec<u32> = (0..32)
        .map(|t| if t < 16 { values[128 + 4 * t] } else { 0 })
        .collect();
    assert_eq!(out.to_vec().unwrap(), expect);
}

#[test]
fn wgmma_outside_the_model_is_refused_by_name() {
    let d = device();
    let mut out = DeviceBuffer::zeros(&d, 128).unwrap();
    let e = kernel_error(WgmmaSwizzle64::launch(
        &d,
        LaunchConfig::new(1, 128),
        &mut out,
        2,
    ));
    assert_eq!(e.fault, Fault::Unmodelled);
    assert!(
        e.to_string()
            .starts_with("emulator-unmodelled in kernel `wgmma_swizzle64`"),
        "{e}"
    );
    assert!(e.message.contains("SwizzleMode::B128"), "{}", e.message);
    // Without the swizzle the MMA runs: zero operands, A · B = 0.
    WgmmaSwizzle64::launch(&d, LaunchConfig::new(1, 128), &mut out, 0).unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![0.0; 128]);
    let e = kernel_error(WgmmaHalfWarpgroup::launch(
        &d,
        LaunchConfig::new(1, 64),
        &mut out,
    ));
    assert_eq!(e.fault, Fault::WarpDivergence);
    assert!(
        e.message.contains("whole warpgroup of 128 threads"),
        "{}",
        e.message
    );
}

/// An MMA reads all of both operands for its warpgroup: a store that a barrier does not order
/// before it, or after the other threads' MMAs, is a race whichever thread's fragment holds the
/// element; an operand past the end of shared memory is out of bounds.
#[test]
fn an_mma_races_with_stores_nothing_orders() {
    let d = device();
    let mut out = DeviceBuffer::zeros(&d, 128).unwrap();
    let launch = |out: &mut DeviceBuffer<f32>, mode| {
        MmaAfterStores::launch(&d, LaunchConfig::new(1, 128), out, mode)
    };
    launch(&mut out, 0).unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![16.0; 128]);
    for mode in [1, 2] {
        let e = kernel_error(launch(&mut out, mode));
        assert_eq!(e.fault, Fault::SharedRace, "mode {mode}: {e}");
    }
    let e = kernel_error(launch(&mut out, 2));
    assert!(
        e.message.contains("thread 100 writes shared byte"),
        "{}",
        e.message
    );
    let e = kernel_error(launch(&mut out, 3));
    assert_eq!(e.fault, Fault::OutOfBounds, "{e}");
    assert!(e.message.contains("wgmma at"), "{}", e.message);
    assert!(e.message.contains("past the 17408 bytes"), "{}", e.message);
}

#[test]
fn a_handle_to_a_freed_buffer_is_a_fault_not_a_dangling_read() {
    let d = device();
    let freed = DeviceBuffer::from_slice(&d, &[7u32; 32]).unwrap();
    *SMUGGLED.lock().unwrap() = Some(freed.global());
    drop(freed);
    let mut out = DeviceBuffer::zeros(&d, 32).unwrap();
    let e = kernel_error(StaleRead::launch(&d, LaunchConfig::new(1, 32), &mut out));
    assert_eq!(e.fault, Fault::ForeignHandle);
    assert_eq!(e.fault.name(), "foreign-handle");
    assert!(
        e.message.contains("not passed to this launch"),
        "{}",
        e.message
    );
}

#[test]
fn a_view_larger_than_its_buffer_is_an_error_where_it_is_made() {
    let d = device();
    let mut out = DeviceBuffer::zeros(&d, 1).unwrap();
    // 16 elements of footprint over 15: refused before any access.
    let short = DeviceBuffer::from_slice(&d, &[7u32; 15]).unwrap();
    let e = kernel_error(OversizedView::launch(
        &d,
        LaunchConfig::new(1, 32),
        &short,
        &mut out,
    ));
    assert_eq!(e.fault, Fault::OutOfBounds);
    assert!(
        e.message.contains("larger than its memory of 15 elements"),
        "{}",
        e.message
    );
    // The same view over 16 elements reads element 15.
    let full: Vec<u32> = (0..16).collect();
    let full = DeviceBuffer::from_slice(&d, &full).unwrap();
    OversizedView::launch(&d, LaunchConfig::new(1, 32), &full, &mut out).unwrap();
    assert_eq!(out.to_vec().unwrap(), [15]);
}

#[test]
fn launch_errors_print_their_rule_once() {
    let d = device();
    let mut out = DeviceBuffer::zeros(&d, 64).unwrap();
    for e in [
        // Refused before running (block size), and found while running (a race).
        Neighbour::launch(&d, LaunchConfig::new(1, 2048), &mut out, 1).unwrap_err(),
        Neighbour::launch(&d, LaunchConfig::new(1, 64), &mut out, 0).unwrap_err(),
    ] {
        assert!(!e.message().starts_with("error["), "{}", e.message());
        assert_eq!(e.to_string(), e.message());
        let printed = format!("{}: {e}", e.rule());
        assert_eq!(printed.matches("error[").count(), 1, "{printed}");
    }
}

#[test]
fn slices_read_their_part_and_bad_slices_are_faults() {
    let d = device();
    let x: Vec<u32> = (100..164).collect();
    let x = DeviceBuffer::from_slice(&d, &x).unwrap();
    let mut out = DeviceBuffer::zeros(&d, 32).unwrap();
    let cfg = LaunchConfig::new(1, 32);
    Sliced::launch(&d, cfg, &x, &mut out, 8, 32, 0).unwrap();
    let expect: Vec<u32> = (108..140).collect();
    assert_eq!(out.to_vec().unwrap(), expect);
    // 60 + 8 > 64 elements.
    let e = kernel_error(Sliced::launch(&d, cfg, &x, &mut out, 60, 8, 0));
    assert_eq!(e.fault, Fault::OutOfBounds);
    assert!(
        e.message.contains("a slice of elements 60..68"),
        "{}",
        e.message
    );
    // Element 2 of u32 is byte 8: vectors of the slice would be misaligned.
    let e = kernel_error(Sliced::launch(&d, cfg, &x, &mut out, 2, 8, 0));
    assert_eq!(e.fault, Fault::Misaligned);
    assert!(e.message.contains("16-byte boundary"), "{}", e.message);
    // An unchecked copy from past the slice's end is reported, not zero-filled (the GPU would
    // read the next elements of the buffer).
    let e = kernel_error(Sliced::launch(&d, cfg, &x, &mut out, 8, 16, 1));
    assert_eq!(e.fault, Fault::OutOfBounds);
}

#[test]
fn a_bulk_addition_adds_and_its_races_are_caught() {
    let d = device();
    let mut out = DeviceBuffer::from_slice(&d, &vec![0.5f32; 64]).unwrap();
    BulkAddTwice::launch(&d, LaunchConfig::new(1, 64), &mut out, 0).unwrap();
    let want: Vec<f32> = (0..64).map(|t| 0.5 + 2.0 * (t + 1) as f32).collect();
    assert_eq!(out.to_vec().unwrap(), want);
    for (mode, what) in [(1, "has not fenced"), (2, "")] {
        let e = kernel_error(BulkAddTwice::launch(
            &d,
            LaunchConfig::new(1, 64),
            &mut out,
            mode,
        ));
        assert_eq!(e.fault, Fault::SharedRace, "mode {mode}: {}", e.message);
        assert!(e.message.contains(what), "{}", e.message);
    }
}
