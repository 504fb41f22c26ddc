//! `ck run KERNEL [--backend emu] …`: runs a kernel and prints its launch statistics.

use super::{Args, CliError};
use crate::bank_probe;
use ck_core::host::{Device, DeviceBuffer, LaunchConfig, LaunchError, LaunchStats};
use serde_json::json;

pub fn run(argv: &[String]) -> Result<(), CliError> {
    let Some(kernel) = argv.first() else {
        return Err(CliError::usage("ck run needs a kernel: bank-probe"));
    };
    match kernel.as_str() {
        "bank-probe" => bank_probe_cmd(&argv[1..]),
        other => Err(CliError::usage(format!(
            "unknown kernel `{other}`; available: bank-probe"
        ))),
    }
}

fn device(args: &Args) -> Result<Device, CliError> {
    match args.value("backend").unwrap_or("emu") {
        "emu" => Ok(Device::emulator()),
        other => Err(CliError::new(
            "backend",
            format!("unknown backend `{other}`; available: emu"),
        )),
    }
}

fn launch_error(e: LaunchError) -> CliError {
    CliError::new(
        e.rule(),
        e.to_string()
            .trim_start_matches(&format!("error[{}]: ", e.rule()))
            .to_string(),
    )
}

/// The counters every `ck run` prints.
pub fn stats_json(st: &LaunchStats) -> serde_json::Value {
    json!({
        "shared_load_wavefronts": st.shared_load_wavefronts,
        "shared_load_conflicts": st.shared_load_conflicts,
        "shared_store_wavefronts": st.shared_store_wavefronts,
        "shared_store_conflicts": st.shared_store_conflicts,
        "global_load_sectors": st.global_load_sectors,
        "global_store_sectors": st.global_store_sectors,
    })
}

fn print_stats(st: &LaunchStats) {
    println!(
        "shared loads:  {:>6} wavefronts, {:>6} conflicts ({} requests)",
        st.shared_load_wavefronts, st.shared_load_conflicts, st.shared_load_requests
    );
    println!(
        "shared stores: {:>6} wavefronts, {:>6} conflicts ({} requests)",
        st.shared_store_wavefronts, st.shared_store_conflicts, st.shared_store_requests
    );
    println!(
        "global loads:  {:>6} sectors ({} requests)",
        st.global_load_sectors, st.global_load_requests
    );
    println!(
        "global stores: {:>6} sectors ({} requests)",
        st.global_store_sectors, st.global_store_requests
    );
}

fn bank_probe_cmd(argv: &[String]) -> Result<(), CliError> {
    let args = Args::parse(argv, &["stride", "width", "backend"], &["json"])?;
    let int = |name: &str| -> Result<u32, CliError> {
        let v = args
            .value(name)
            .ok_or_else(|| CliError::usage(format!("--{name} is required")))?;
        v.parse()
            .map_err(|_| CliError::usage(format!("--{name}: `{v}` is not a non-negative integer")))
    };
    let (stride, width) = (int("stride")?, int("width")?);
    bank_probe::check_parameters(stride, width)
        .map_err(|m| CliError::new("probe-parameters", m))?;
    let device = device(&args)?;
    let mut out = DeviceBuffer::<u32>::zeros(&device, (bank_probe::THREADS * width / 4) as usize);
    let st = bank_probe::BankProbe::launch(
        &device,
        LaunchConfig::new(1, bank_probe::THREADS),
        &mut out,
        stride,
        width,
    )
    .map_err(launch_error)?;
    if out.to_vec() != bank_probe::reference(stride, width) {
        return Err(CliError::new(
            "wrong-result",
            "the probe's output differs from its reference",
        ));
    }
    if args.switch("json") {
        println!("{}", stats_json(&st));
    } else {
        println!(
            "bank-probe on {}: 128 threads, {width}-byte accesses, stride {stride}",
            device.name()
        );
        print_stats(&st);
    }
    Ok(())
}
