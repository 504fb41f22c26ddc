//! `ck sfc`: a space-filling curve's access sequence.

use super::{int_list, CliError};
use ck_core::SpaceFillingCurve;
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct SfcArgs {
    /// The tensor's lengths, e.g. 4,6
    #[arg(long, value_name = "L0,L1,..", allow_hyphen_values = true)]
    lengths: String,
    /// Dims in visiting order, slowest first (default 0,1,..)
    #[arg(long, value_name = "O0,O1,..", allow_hyphen_values = true)]
    order: Option<String>,
    /// Elements per access along each dim (default 1,1,..)
    #[arg(long, value_name = "S0,S1,..", allow_hyphen_values = true)]
    scalars: Option<String>,
    /// Reverse every other run of a dim (boustrophedon)
    #[arg(long)]
    snake: bool,
    /// Print {access_lengths, num_access, indices, forward_steps} as JSON
    #[arg(long)]
    json: bool,
}

pub fn run(args: &SfcArgs) -> Result<(), CliError> {
    let lengths = int_list("lengths", Some(&args.lengths))?.unwrap_or_default();
    let n = lengths.len() as i32;
    let order = int_list("order", args.order.as_deref())?.unwrap_or_else(|| (0..n).collect());
    let scalars =
        int_list("scalars", args.scalars.as_deref())?.unwrap_or_else(|| vec![1; lengths.len()]);
    let snake = args.snake;
    let curve = SpaceFillingCurve::new(&lengths, &order, &scalars, snake)?;

    let indices: Vec<Vec<i32>> = (0..curve.num_access())
        .map(|t| curve.index(t).as_slice().to_vec())
        .collect();
    let steps: Vec<Vec<i32>> = (0..curve.num_access() - 1)
        .map(|t| curve.forward_step(t).as_slice().to_vec())
        .collect();

    if args.json {
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
