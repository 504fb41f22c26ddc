//! `ck lds`: an LDS tile layout (XOR-swizzled per spec §11, or `--plain`), its offsets and the
//! bank behaviour of the `k-read` and `k-write` warp patterns (NVIDIA model).

use super::common::integer;
use super::CliError;
use ck_core::lds::{LdsLayout, Pattern};
use serde_json::json;
use std::fmt::Write as _;

#[derive(Debug, clap::Args)]
pub struct LdsArgs {
    /// Rows of the tile (M or N per block)
    #[arg(long, value_name = "M", allow_hyphen_values = true)]
    m_per_block: String,
    /// Columns of the tile (K per block)
    #[arg(long, value_name = "K", allow_hyphen_values = true)]
    k_per_block: String,
    /// Elements per 16-byte chunk along K (KPack)
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    k_pack: String,
    /// Bytes per element
    #[arg(long, value_name = "B", allow_hyphen_values = true)]
    elem_bytes: String,
    /// MLdsLayer of the XOR layout (default: as CK derives it)
    #[arg(long, value_name = "L", allow_hyphen_values = true)]
    mlds_layer: Option<String>,
    /// The plain (unswizzled) layout instead of the XOR one
    #[arg(long)]
    plain: bool,
    /// Print {mlds_layer, element_space_size, offsets, patterns} as JSON
    #[arg(long)]
    json: bool,
    /// Draw the tile coloured by bank to this file
    #[arg(long, value_name = "FILE")]
    svg: Option<String>,
}

pub fn run(args: &LdsArgs) -> Result<(), CliError> {
    let (m, k, kp, b) = (
        integer("m-per-block", &args.m_per_block, "give a whole number")?,
        integer("k-per-block", &args.k_per_block, "give a whole number")?,
        integer("k-pack", &args.k_pack, "give a whole number")?,
        integer("elem-bytes", &args.elem_bytes, "give a whole number")?,
    );
    let layout = if args.plain {
        if args.mlds_layer.is_some() {
            return Err(CliError::usage(
                "--mlds-layer applies to the XOR layout, not --plain",
            ));
        }
        LdsLayout::plain(m, k, kp, b)?
    } else {
        let layer = args.mlds_layer.as_deref();
        LdsLayout::xor(
            m,
            k,
            kp,
            b,
            layer
                .map(|l| integer("mlds-layer", l, "give a whole number"))
                .transpose()?,
        )?
    };
    let patterns: Vec<_> = [Pattern::KRead, Pattern::KWrite]
        .iter()
        .map(|&p| {
            let c = layout.pattern_cost(p);
            (p, c)
        })
        .collect();
    if let Some(path) = &args.svg {
        std::fs::write(path, svg(&layout))
            .map_err(|e| CliError::new(ck_core::rules::IO, format!("cannot write {path}: {e}")))?;
    }
    if args.json {
        let offsets: Vec<Vec<i32>> = (0..m)
            .map(|mi| (0..k).map(|ki| layout.offset(mi, ki)).collect())
            .collect();
        let pats: Vec<_> = patterns
            .iter()
            .map(|(p, c)| json!({"name": p.name(), "bytes_per_lane": kp * b, "wavefronts": c.wavefronts, "conflicts": c.conflicts()}))
            .collect();
        println!(
            "{}",
            json!({"mlds_layer": layout.mlds_layer(), "element_space_size": layout.element_space_size(), "offsets": offsets, "patterns": pats})
        );
        return Ok(());
    }
    let kind = if layout.swizzled() {
        format!("XOR-swizzled, MLdsLayer {}", layout.mlds_layer())
    } else {
        "plain".into()
    };
    println!(
        "LDS layout {m} × {k}, {kp}-element chunks of {b}-byte elements, {kind}; {} elements",
        layout.element_space_size()
    );
    for (p, c) in &patterns {
        println!(
            "  {:<8} {:>2} B/lane: {:>3} wavefronts, {:>3} conflicts",
            p.name(),
            kp * b,
            c.wavefronts,
            c.conflicts()
        );
    }
    println!("\nstart bank of each {kp}-element chunk (rows m, chunks k/{kp}):");
    for mi in 0..m {
        let banks: Vec<String> = (0..k / kp)
            .map(|c| format!("{:>2}", (layout.offset(mi, c * kp) * b / 4) % 32))
            .collect();
        println!("  m {mi:>4}: {}", banks.join(" "));
    }
    Ok(())
}

/// The tile coloured by the bank of each element's first byte.
fn svg(l: &LdsLayout) -> String {
    let (m, k) = (l.m_per_block(), l.k_per_block());
    let (cw, ch) = (22.0, 14.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="monospace" font-size="7">"#,
        (k as f64 * cw + 40.0).max(400.0),
        m as f64 * ch + 24.0
    );
    let _ = writeln!(
        s,
        r#"<text x="2" y="12" font-size="11">LDS {m}×{k}, KPack {}, colour/label = bank</text>"#,
        l.k_pack()
    );
    for mi in 0..m {
        for ki in 0..k {
            let bank = (l.offset(mi, ki) * l.elem_bytes() / 4) % 32;
            let (x, y) = (30.0 + ki as f64 * cw, 18.0 + mi as f64 * ch);
            let hue = bank as f64 * 360.0 / 32.0;
            let _ = writeln!(
                s,
                r#"<rect x="{x}" y="{y}" width="{cw}" height="{ch}" fill="hsl({hue:.0},65%,75%)" stroke="white" stroke-width="0.4"/><text x="{}" y="{}">{bank}</text>"#,
                x + 3.0,
                y + 10.0
            );
        }
    }
    s.push_str("</svg>\n");
    s
}
