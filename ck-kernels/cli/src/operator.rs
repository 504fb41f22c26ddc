//! `ck run OP` for every operator of the registry, built from its description: `.npy` files
//! for its tensors, its scalars and `--dtype` as options (`ck run rmsnorm --input X.npy --gamma
//! G.npy --output Y.npy --eps 1e-5`); and `ck run OP-DTYPE --n N --seed S`, the operator on its
//! seeded problem of size N, checked against the fp64 reference.

use super::common::{
    device, launch_error, report_files, whole_number, write_npy, BackendArg, JsonArg,
};
use super::CliError;
use ck_kernels::op::{self, Dtype, Op, Role, ScalarRule};
use ck_kernels::registry;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

/// The subcommands of `ck run` the registry gives: per operator, its file command and one
/// seeded check per element type.
pub fn commands() -> Vec<Command> {
    let mut out = Vec::new();
    for op in registry::operators() {
        out.push(file_command(op));
        for &dtype in op.dtypes {
            let about = format!(
                "{}, {}: the seeded problem of size N, checked against fp64",
                op.summary,
                dtype.name()
            );
            let cmd = Command::new(format!("{}-{}", op.command(), dtype.name()))
                .arg(uint_arg(
                    "n",
                    "Problem size N (a row's length; for attention the keys, or the sequence of a fused QKV) [default: 4096]",
                ))
                .arg(uint_arg("seed", "Seed of the random input [default: 1]"));
            // After the flattened options, whose doc comments would set the about.
            out.push(JsonArg::augment_args(BackendArg::augment_args(cmd)).about(about));
        }
    }
    out
}

fn uint_arg(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_name(name.to_uppercase())
        .allow_hyphen_values(true)
        .help(help)
}

fn file_command(op: &'static Op) -> Command {
    let mut cmd = Command::new(op.command());
    for p in op.params.iter().filter(|p| p.role != Role::Scratch) {
        let value = format!("{}.npy", p.name.to_uppercase());
        let help = match p.role {
            Role::Input => format!("{} (float32 .npy)", p.doc),
            Role::OptionalInput => format!("{} (float32 .npy), if any", p.doc),
            Role::Output => format!("Where to write {} (float32 .npy)", p.doc),
            Role::OptionalOutput => format!("Where to write {} (float32 .npy), if wanted", p.doc),
            Role::Scratch => unreachable!("filtered out above"),
        };
        let arg = Arg::new(p.name)
            .long(p.flag)
            .value_name(value)
            .help(help)
            .required(!p.role.is_optional());
        cmd = cmd.arg(arg);
    }
    for s in op.scalars {
        let arg = Arg::new(s.name).long(s.name.replace('_', "-"));
        cmd = cmd.arg(match (s.rule, s.default) {
            (ScalarRule::Flag, _) => arg.action(ArgAction::SetTrue).help(capitalised(s.doc)),
            (ScalarRule::Choice(names), default) => {
                let default = default.map_or("", |i| names[i as usize]);
                let help = format!("{} [default: {default}]", capitalised(s.doc));
                arg.value_name(names.join("|")).help(help)
            }
            (ScalarRule::Count(_), _) => {
                let help = capitalised(s.doc);
                arg.value_name("N").required(true).help(help)
            }
            (_, default) => {
                // A derived default is in the doc (`[default: 1/√D]`).
                let default = default.map(|v| format!(" [default: {v:e}]"));
                let help = format!("{}{}", capitalised(s.doc), default.unwrap_or_default());
                arg.value_name("V").allow_hyphen_values(true).help(help)
            }
        });
    }
    let dtypes: Vec<&str> = op.dtypes.iter().map(|d| d.name()).collect();
    cmd = cmd.arg(
        Arg::new("dtype")
            .long("dtype")
            .value_name(dtypes.join("|"))
            .action(ArgAction::Set)
            .help(format!(
                "The element type of the tensors whose help names none (inputs rounded to \
                 it before the kernel, f32 arithmetic) [default: {}]",
                dtypes[0]
            )),
    );
    JsonArg::augment_args(BackendArg::augment_args(cmd))
        .about(format!("{} (.npy files)", op.summary))
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Runs `ck run NAME` if the registry gives `NAME`.
pub fn dispatch(name: &str, m: &ArgMatches) -> Option<Result<(), CliError>> {
    if let Some(op) = registry::find(name).filter(|op| op.command() == name) {
        return Some(run_files(op, m));
    }
    let (op, dtype) = name.rsplit_once('-')?;
    let op = registry::find(op).filter(|o| o.command() == op)?;
    let dtype = Dtype::parse(dtype).filter(|d| op.dtypes.contains(d))?;
    Some(run_check(op, dtype, m))
}

fn string<'a>(m: &'a ArgMatches, name: &str) -> Option<&'a str> {
    m.get_one::<String>(name).map(String::as_str)
}

fn common(m: &ArgMatches) -> Result<(BackendArg, JsonArg), CliError> {
    let usage = |e: clap::Error| CliError::usage(e.to_string());
    Ok((
        BackendArg::from_arg_matches(m).map_err(usage)?,
        JsonArg::from_arg_matches(m).map_err(usage)?,
    ))
}

/// `ck run OP-DTYPE [--n N] [--seed S]`.
fn run_check(op: &'static Op, dtype: Dtype, m: &ArgMatches) -> Result<(), CliError> {
    let uint = |name: &str, default: u32| -> Result<u32, CliError> {
        match string(m, name) {
            None => Ok(default),
            Some(v) => Ok(whole_number(name, v, (0, u32::MAX as u64))? as u32),
        }
    };
    let (n, seed) = (uint("n", 4096)?, uint("seed", 1)?);
    let (backend, json) = common(m)?;
    let device = device(&backend)?;
    let sizes = (op.cases)(Some(n)).remove(0);
    let o = op::check(&device, op, dtype, &sizes, seed as u64).map_err(launch_error)?;
    let kernel = format!("{}-{}", op.command(), dtype.name());
    let desc = format!("{}, seed {seed}", sizes.describe(&op.params[0]));
    super::run::report(&kernel, o, &desc, &device, json.json)
}

/// `ck run OP --input X.npy … --output Y.npy`.
fn run_files(op: &'static Op, m: &ArgMatches) -> Result<(), CliError> {
    let (backend, json) = common(m)?;
    let dtype = match string(m, "dtype") {
        None => op.dtypes[0],
        Some(d) => Dtype::parse(d)
            .filter(|d| op.dtypes.contains(d))
            .ok_or_else(|| {
                let names: Vec<&str> = op.dtypes.iter().map(|d| d.name()).collect();
                CliError::new(
                    ck_core::rules::DTYPE,
                    format!("unsupported dtype `{d}`; use {}", names.join(" or ")),
                )
            })?,
    };
    let mut arrays = Vec::new();
    for p in op.inputs() {
        let Some(path) = string(m, p.name) else {
            continue; // an optional input left out (clap requires the others)
        };
        let a = crate::npy::read(path).map_err(|e| CliError::new(ck_core::rules::NPY, e))?;
        arrays.push((p.name, a));
    }
    let mut scalars = Vec::new();
    for s in op.scalars {
        if s.rule == ScalarRule::Flag {
            if m.get_flag(s.name) {
                scalars.push((s.name, 1.0));
            }
        } else if let (ScalarRule::Choice(_), Some(v)) = (s.rule, string(m, s.name)) {
            let index = op::host::choice_index(op, s.name, v)
                .map_err(|e| CliError::usage(format!("--{}: {e}", s.name.replace('_', "-"))))?;
            scalars.push((s.name, index as f32));
        } else if let Some(v) = string(m, s.name) {
            let value: f32 = v.parse().map_err(|_| {
                CliError::usage(format!(
                    "--{}: `{v}` is not a number",
                    s.name.replace('_', "-")
                ))
            })?;
            scalars.push((s.name, value));
        }
    }
    let mut call = op::HostCall::new(op).dtype(dtype);
    for (name, a) in &arrays {
        call = call.input(name, &a.data, &a.shape);
    }
    for &(name, v) in &scalars {
        call = call.scalar(name, v);
    }
    let optional = op.params.iter().filter(|p| p.role == Role::OptionalOutput);
    for p in optional.filter(|p| string(m, p.name).is_some()) {
        call = call.output(p.name);
    }
    let device = device(&backend)?;
    let out = call.run(&device).map_err(launch_error)?;
    let mut written = Vec::new();
    for p in op.outputs() {
        let (Some(path), Some(values)) = (string(m, p.name), out.output(p.name)) else {
            continue;
        };
        write_npy(path, out.sizes.shape_of(p), values.to_vec())?;
        written.push(path.to_string());
    }
    // Each scalar given or defaulted, each flag that is on.
    let scalars: String = op
        .scalars
        .iter()
        .filter_map(|s| match (s.rule, out.given(s.name)) {
            (ScalarRule::Flag, _) => out.flag(s.name).then(|| format!(", {}", s.name)),
            (ScalarRule::Choice(names), Some(i)) => {
                Some(format!(", {} {}", s.name, names[i as usize]))
            }
            (_, value) => value.map(|v| format!(", {} {v}", s.name)),
        })
        .collect();
    let summary = format!(
        "{} ({}, {}{scalars}) on {} → {}",
        op.command(),
        out.sizes.describe(&op.params[0]).replace('x', " × "),
        dtype.name(),
        device.name(),
        written.join(", ")
    );
    report_files(json.json, summary, &out.stats)
}
