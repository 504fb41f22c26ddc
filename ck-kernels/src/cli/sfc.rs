//! `ck sfc`: a space-filling curve's access sequence.

use super::{Args, CliError};
use ck_core::SpaceFillingCurve;
use serde_json::json;

pub fn run(argv: &[String]) -> Result<(), CliError> {
    let args = Args::parse(argv, &["lengths", "order", "scalars"], &["snake", "json"])?;
    if let Some(p) = args.positional().first() {
        return Err(CliError::usage(format!("unexpected argument `{p}`")));
    }
    let lengths = args
        .int_list("lengths")?
        .ok_or_else(|| CliError::usage("--lengths is required, e.g. --lengths 4,6"))?;
    let n = lengths.len() as i32;
    let order = args.int_list("order")?.unwrap_or_else(|| (0..n).collect());
    let scalars = args
        .int_list("scalars")?
        .unwrap_or_else(|| vec![1; lengths.len()]);
    let snake = args.switch("snake");
    let curve = SpaceFillingCurve::new(&lengths, &order, &scalars, snake)?;

    let indices: Vec<Vec<i32>> = (0..curve.num_access())
        .map(|t| curve.index(t).as_slice().to_vec())
        .collect();
    let steps: Vec<Vec<i32>> = (0..curve.num_access() - 1)
        .map(|t| curve.forward_step(t).as_slice().to_vec())
        .collect();

    if args.switch("json") {
        let doc = json!({
            "access_lengths": curve.access_lengths().as_slice(),
            "num_access": curve.num_access(),
            "indices": indices,
            "forward_steps": steps,
        });
        println!("{doc}");
        return Ok(());
    }
    println!(
        "space-filling curve: lengths {:?}, order {:?}, scalars per access {:?}, {}",
        lengths,
        order,
        scalars,
        if snake { "snake" } else { "no snake" }
    );
    println!(
        "access lengths {:?}, {} accesses",
        curve.access_lengths().as_slice(),
        curve.num_access()
    );
    println!("{:>6}  {:<20} forward step", "access", "index");
    for (t, idx) in indices.iter().enumerate() {
        let step = steps
            .get(t)
            .map(|s| format!("{s:?}"))
            .unwrap_or_else(|| "-".into());
        println!("{t:>6}  {:<20} {step}", format!("{idx:?}"));
    }
    Ok(())
}
