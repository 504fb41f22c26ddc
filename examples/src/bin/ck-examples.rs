//! Runs the tutorial kernels on a device, checks them against their CPU references (and, on
//! the GPU, against the emulator), and with `--bench` times the 8192 × 8192 transpose next to
//! copies of the same bytes measured in the same process.
//!
//! ```text
//! ck-examples [--backend emu|cuda] [--small] [--bench] [--iters N]
//! ```
//!
//! `--small` leaves out the large shapes the GPU checks otherwise (for compute-sanitizer).

use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError};
use ck_examples::softmax::host as softmax;
use ck_examples::transpose::host::{self as transpose, Layout};
use ck_kernels::checks::Rng;
use std::time::Duration;

fn random(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..len).map(|_| rng.f32() * 10.0).collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Checks both kernels on `d`; returns whether all agreed.
fn check(d: &Device, emu: &Device, small: bool) -> Result<bool, LaunchError> {
    let mut ok = true;
    let gpu = !d.is_emulator();
    let large = gpu && !small;
    let mut shapes = vec![(1, 7), (33, 1024), (257, 1000)];
    if large {
        shapes.push((16384, 1024));
    }
    for &(m, n) in &shapes {
        let x = random(m as usize * n as usize, 1);
        let (y, _) = softmax::softmax(d, &x, (m, n))?;
        let want = softmax::reference(&x, (m, n));
        let rel = y
            .iter()
            .zip(&want)
            .map(|(&g, &w)| (g as f64 - w).abs() / w)
            .fold(0.0, f64::max);
        let mut line = format!("softmax   {m:>5} × {n:<5} max relative error vs fp64 {rel:.1e}");
        ok &= rel <= 1e-5;
        if gpu && m * n <= 257 * 1000 {
            let (e, _) = softmax::softmax(emu, &x, (m, n))?;
            let ulps = y
                .iter()
                .zip(&e)
                .map(|(a, b)| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs())
                .max()
                .unwrap_or(0);
            line += &format!(", vs emulator ≤ {ulps} ulp");
            ok &= ulps <= 8;
        }
        println!("{line}");
    }
    let mut shapes = vec![(1, 1), (257, 130)];
    if large {
        shapes.push((8192, 8192));
    }
    for &(m, n) in &shapes {
        let x = random(m as usize * n as usize, 2);
        let want = transpose::reference(&x, (m, n));
        for layout in [Layout::Swizzled, Layout::Plain] {
            let (y, _) = transpose::transpose(d, &x, (m, n), layout)?;
            let mut line = format!(
                "transpose {m:>5} × {n:<5} {layout:?}: {}",
                if y == want {
                    "equals the reference"
                } else {
                    "DIFFERS from the reference"
                }
            );
            ok &= y == want;
            if gpu && m * n <= 257 * 130 {
                let (e, _) = transpose::transpose(emu, &x, (m, n), layout)?;
                line += if e == y {
                    ", bit for bit the emulator's"
                } else {
                    ", DIFFERS from the emulator"
                };
                ok &= e == y;
            }
            println!("{line}");
        }
    }
    Ok(ok)
}

/// Times the 8192² transpose (both layouts) and two copies of the same bytes.
fn bench(d: &Device, iters: usize) -> Result<(), LaunchError> {
    let (m, n) = (8192u32, 8192u32);
    let len = m as usize * n as usize;
    let x = DeviceBuffer::from_slice(d, &random(len, 3))?;
    let mut y = DeviceBuffer::zeros(d, len)?;
    let bytes = 2.0 * 4.0 * len as f64; // one read and one write of every element
    let gbs = |t: Duration| bytes / t.as_secs_f64() / 1e9;
    let time = |f: &mut dyn FnMut() -> Result<Duration, LaunchError>| {
        for _ in 0..3 {
            f()?;
        }
        (0..iters)
            .map(|_| f())
            .collect::<Result<Vec<_>, _>>()
            .map(median)
    };
    let memcpy = time(&mut || y.copy_from(&x))?;
    let copy_cfg = LaunchConfig::new(
        len.div_ceil(ck_kernels::elementwise::TILE_F32 as usize) as u32,
        256,
    );
    let ck_copy = time(&mut || {
        ck_kernels::elementwise::CopyF32::launch(d, copy_cfg, &x, &mut y, len as u32)
            .map(|s| s.elapsed)
    })?;
    let copy = memcpy.min(ck_copy);
    println!(
        "bench 8192 × 8192 f32 ({}; median of {iters}; GB/s = 2 · 4 · M · N / time)",
        d.name()
    );
    println!(
        "  driver memcpy (dtod)        {:>8.1} µs {:>7.0} GB/s",
        memcpy.as_secs_f64() * 1e6,
        gbs(memcpy)
    );
    println!(
        "  ck-kernels copy_f32         {:>8.1} µs {:>7.0} GB/s",
        ck_copy.as_secs_f64() * 1e6,
        gbs(ck_copy)
    );
    for layout in [Layout::Swizzled, Layout::Plain] {
        let t = time(&mut || transpose::launch(d, &x, &mut y, (m, n), layout).map(|s| s.elapsed))?;
        println!(
            "  transpose {:<17} {:>8.1} µs {:>7.0} GB/s  {:.2}× copy",
            format!("{layout:?}"),
            t.as_secs_f64() * 1e6,
            gbs(t),
            copy.as_secs_f64() / t.as_secs_f64()
        );
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let usage = |msg: &str| -> ! {
        eprintln!("error[usage]: {msg}; usage: ck-examples [--backend emu|cuda] [--small] [--bench] [--iters N]");
        std::process::exit(1)
    };
    let emu = Device::emulator();
    let device = match value("--backend").map(String::as_str) {
        None | Some("emu") => emu.clone(),
        Some("cuda") => Device::cuda(0).unwrap_or_else(|e| {
            eprintln!("{}: {e}", e.rule());
            std::process::exit(1)
        }),
        Some(other) => usage(&format!("unknown backend `{other}`")),
    };
    let iters = match value("--iters").map(|v| v.parse::<usize>()) {
        None => 20,
        Some(Ok(n)) if n > 0 => n,
        _ => usage("--iters takes a positive integer"),
    };
    let small = args.iter().any(|a| a == "--small");
    let result = check(&device, &emu, small).and_then(|ok| {
        if args.iter().any(|a| a == "--bench") {
            if device.is_emulator() {
                usage("--bench needs --backend cuda");
            }
            bench(&device, iters)?;
        }
        Ok(ok)
    });
    match result {
        Ok(true) => {}
        Ok(false) => {
            eprintln!("error[mismatch]: a kernel disagreed with its reference (above)");
            std::process::exit(1)
        }
        Err(e) => {
            eprintln!("{}: {e}", e.rule());
            std::process::exit(1)
        }
    }
}
