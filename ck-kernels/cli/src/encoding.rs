//! `ck encoding FILE|-`: checks a `tile_distribution!` body with the same front end as the macro
//! and prints its tables: lengths, spans, the closed form of each X, a thread × element table,
//! and optionally the full map (`--map`) and a picture of the tile (`--svg`).

use super::CliError;
use ck_core::encoding::{DigitSource, Encoding};
use ck_core::{Dims, Index};
use ck_dsl::{Diagnostic, Severity};
use serde_json::{json, Value};
use std::fmt::Write as _;

#[derive(Debug, clap::Args)]
pub struct EncodingArgs {
    /// A file with a tile_distribution! body (with or without the macro around it), or - for
    /// stdin
    #[arg(value_name = "FILE|-")]
    input: String,
    /// Print {x_lengths, y_lengths, r_lengths, thread_buffer_size, warp_size, block_size, spans}
    /// as JSON
    #[arg(long)]
    json: bool,
    /// Add every thread's elements: one {thread, p, y, x, d, rs} entry per thread and Y point
    #[arg(long)]
    map: bool,
    /// Draw the tile, coloured by thread and labelled with each element's Y index, to this file
    #[arg(long, value_name = "OUT.svg")]
    svg: Option<String>,
}

pub fn run(args: &EncodingArgs) -> Result<(), CliError> {
    let path = &args.input;
    let src = if path == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| CliError::usage(format!("cannot read stdin: {e}")))?
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| CliError::new(ck_core::rules::IO, format!("cannot read {path}: {e}")))?
    };
    let analysis = ck_dsl::analyze_source(&src).map_err(|d| diagnostics_error(path, &d))?;
    for w in &analysis.checked.warnings {
        eprintln!("{}", located(path, w));
    }
    // Only literal encodings are derived at expansion time.
    let Some(encoding) = &analysis.checked.encoding else {
        return Err(CliError::new(
            ck_core::rules::PARAMETRIC_ENCODING,
            "some lengths (or the warp/block size) are not integer literals; `ck encoding` \
             evaluates literal encodings only — substitute the values",
        ));
    };
    let t = Tables::new(encoding, analysis.checked.warp_size.unwrap_or(32));
    let name = analysis.def.ident.to_string();
    if let Some(svg) = &args.svg {
        t.fits("--svg", SVG_ELEMENTS, "draw a smaller tile")?;
        std::fs::write(svg, t.svg(&name))
            .map_err(|e| CliError::new(ck_core::rules::IO, format!("cannot write {svg}: {e}")))?;
    }
    if args.json {
        let mut doc = t.summary_json();
        if args.map {
            t.fits(
                "--json --map",
                JSON_POINTS,
                "print the map as text (--map alone)",
            )?;
            doc["map"] = t.map_json();
        }
        println!("{doc}");
        return Ok(());
    }
    // A map can be long: written as it is made, not held.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match t
        .report(&name, args.map, &mut out)
        .and_then(|()| std::io::Write::flush(&mut out))
    {
        // A reader that has seen enough (`| head`) ends the listing, as for any filter.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::new(
            ck_core::rules::IO,
            format!("cannot write the tables: {e}"),
        )),
        _ => Ok(()),
    }
}

/// Elements the default thread × element table lists; a larger tile's is cut there (`--map`
/// prints every element).
const LISTED_ELEMENTS: u64 = 1 << 16;
/// Elements an SVG draws: past this a picture is unreadable, and its file hundreds of megabytes.
const SVG_ELEMENTS: u64 = 1 << 16;
/// Entries of a JSON map (`--json --map`), which is built whole before it is printed.
const JSON_POINTS: u64 = 1 << 20;

fn located(path: &str, d: &Diagnostic) -> String {
    let (line, col) = d.line_column();
    format!("{} (at {path}:{line}:{col})", d.headline())
}

fn diagnostics_error(path: &str, diags: &[Diagnostic]) -> CliError {
    let errors: Vec<&Diagnostic> = diags
        .iter()
        .filter(|d| d.severity() == Severity::Error)
        .collect();
    let first = errors.first().copied().unwrap_or(&diags[0]);
    let (line, col) = first.line_column();
    let mut e = CliError::new(
        first.rule,
        format!("{} (at {path}:{line}:{col})", first.message),
    );
    e.more = errors.iter().skip(1).map(|d| located(path, d)).collect();
    e
}

/// One (thread, Y point) of the map.
struct Point {
    thread: u32,
    p: Dims,
    y: Dims,
    x: Dims,
    d: Index,
    rs: Dims,
}

struct Tables<'a> {
    enc: &'a Encoding,
    warp_size: u32,
    block_size: u32,
}

fn v(d: &Dims) -> Vec<Index> {
    d.as_slice().to_vec()
}

impl<'a> Tables<'a> {
    fn new(enc: &'a Encoding, warp_size: u32) -> Tables<'a> {
        Tables {
            enc,
            warp_size,
            block_size: enc.block_size() as u32,
        }
    }

    /// Every (thread, Y point), thread by thread, made as `f` takes them (a tile's map can be
    /// far larger than memory: `repeat: 65536` by mistake is 10⁸ elements), until `f` returns
    /// false.
    fn for_each_point(&self, f: impl FnMut(Point) -> bool) {
        self.for_each_point_of(0..self.block_size, f)
    }

    /// [`Tables::for_each_point`] for the threads `threads` only.
    fn for_each_point_of(&self, threads: std::ops::Range<u32>, mut f: impl FnMut(Point) -> bool) {
        let enc = self.enc;
        let mut go = true;
        for thread in threads {
            if !go {
                return;
            }
            let p = enc.partition_index(thread, self.warp_size);
            let rs = enc.rs_index(&p);
            ck_core::distribution::for_each_y(enc, |y, d| {
                if go {
                    go = f(Point {
                        thread,
                        p,
                        y: *y,
                        x: enc.x_index(&p, y),
                        d: d as Index,
                        rs,
                    });
                }
            });
        }
    }

    /// (thread, Y point) pairs: the elements the threads hold.
    fn points(&self) -> u64 {
        self.block_size as u64 * self.enc.thread_buffer_size() as u64
    }

    /// A `too-large` error where the map has more than `limit` entries for `what`.
    fn fits(&self, what: &str, limit: u64, instead: &str) -> Result<(), CliError> {
        if self.points() <= limit {
            return Ok(());
        }
        Err(CliError::new(
            ck_core::rules::TOO_LARGE,
            format!(
                "{what}: the tile's threads hold {} elements, more than the {limit} it takes; \
                 {instead}",
                self.points()
            ),
        ))
    }

    /// Threads of a lane group where the lane dim spans less than the warp (two P dims).
    fn lane_groups(&self) -> Option<u32> {
        let g = self.lanes_per_group();
        (self.enc.np() == 2 && g < self.warp_size).then_some(g)
    }

    /// Threads that act as one warp: the lane dim's span.
    fn lanes_per_group(&self) -> u32 {
        self.enc.lanes() as u32
    }

    fn spans(&self) -> Vec<Vec<Index>> {
        (0..self.enc.nx()).map(|x| v(&self.enc.span(x))).collect()
    }

    fn summary_json(&self) -> Value {
        json!({
            "x_lengths": v(&self.enc.x_lengths()),
            "y_lengths": v(&self.enc.y_lengths()),
            "r_lengths": v(&self.enc.r_lengths()),
            "thread_buffer_size": self.enc.thread_buffer_size(),
            "warp_size": self.warp_size,
            "lanes_per_group": self.lanes_per_group(),
            "block_size": self.block_size,
            "spans": self.spans(),
        })
    }

    fn map_json(&self) -> Value {
        let mut map = Vec::new();
        self.for_each_point(|pt| {
            map.push(json!({"thread": pt.thread, "p": v(&pt.p), "y": v(&pt.y), "x": v(&pt.x), "d": pt.d, "rs": v(&pt.rs)}));
            true
        });
        Value::Array(map)
    }

    /// `X0 = y0·8 + P0[0]·4 + …`.
    fn closed_forms(&self) -> Vec<String> {
        (0..self.enc.nx())
            .map(|x| {
                let n = self.enc.h_lengths(x).len();
                let terms: Vec<String> = self.enc.x_terms(x)[..n]
                    .iter()
                    .filter_map(|t| {
                        let digit = match t.source {
                            DigitSource::Zero => return None,
                            DigitSource::Y(i) => format!("y{i}"),
                            DigitSource::P {
                                p,
                                divisor,
                                length,
                                top,
                            } => match (top, divisor) {
                                (true, 1) => format!("p{p}"),
                                (true, d) => format!("(p{p}/{d})"),
                                (false, 1) => format!("(p{p}%{length})"),
                                (false, d) => format!("(p{p}/{d}%{length})"),
                            },
                        };
                        Some(if t.place == 1 {
                            digit
                        } else {
                            format!("{digit}·{}", t.place)
                        })
                    })
                    .collect();
                let rhs = if terms.is_empty() {
                    "0".to_string()
                } else {
                    terms.join(" + ")
                };
                format!("X{x} = {rhs}")
            })
            .collect()
    }

    fn report(
        &self,
        name: &str,
        full_map: bool,
        out: &mut impl std::io::Write,
    ) -> std::io::Result<()> {
        let e = self.enc;
        let mut s = String::new();
        let p_desc = match (e.np(), self.lane_groups()) {
            (2, Some(g)) => format!(
                "P = [group, lane] = [tid / {g}, tid % {g}]: lane groups of {g} lanes, {} per warp",
                self.warp_size / g
            ),
            (2, None) => "P = [warp, lane]".to_string(),
            _ => "P = [lane]".to_string(),
        };
        let _ = writeln!(
            s,
            "tile distribution {name}: {} threads ({} per warp), {p_desc}",
            self.block_size, self.warp_size
        );
        let _ = writeln!(
            s,
            "X lengths {:?}   Y lengths {:?}   R lengths {:?}",
            v(&e.x_lengths()),
            v(&e.y_lengths()),
            v(&e.r_lengths())
        );
        let _ = writeln!(
            s,
            "per-thread buffer: {} elements   spans {:?}",
            e.thread_buffer_size(),
            self.spans()
        );
        for f in self.closed_forms() {
            let _ = writeln!(s, "  {f}");
        }
        out.write_all(s.as_bytes())?;
        // The first write error ends the walk (a closed pipe, say) and is returned.
        let mut result = Ok(());
        let mut emit = |line: std::fmt::Arguments<'_>| {
            if result.is_ok() {
                result = out.write_fmt(line);
            }
            result.is_ok()
        };
        if full_map {
            let _ = emit(format_args!(
                "\n{:>6} {:>10} {:>16} {:>16} {:>5} {:>10}\n",
                "thread", "p", "y", "x", "d", "rs"
            ));
            self.for_each_point(|pt| {
                emit(format_args!(
                    "{:>6} {:>10} {:>16} {:>16} {:>5} {:>10}\n",
                    pt.thread,
                    format!("{:?}", v(&pt.p)),
                    format!("{:?}", v(&pt.y)),
                    format!("{:?}", v(&pt.x)),
                    pt.d,
                    format!("{:?}", v(&pt.rs))
                ))
            });
            return result;
        }
        let per_thread = e.thread_buffer_size() as usize;
        let _ = emit(format_args!(
            "\nthread × element (x of each register d = 0..{per_thread}):\n"
        ));
        // Whole rows up to LISTED_ELEMENTS (at least one row, itself cut there).
        let shown = per_thread.min(LISTED_ELEMENTS as usize);
        let rows =
            (LISTED_ELEMENTS as usize / per_thread.max(1)).clamp(1, self.block_size as usize);
        let mut xs = Vec::with_capacity(shown);
        self.for_each_point_of(0..rows as u32, |pt| {
            if (pt.d as usize) < shown {
                xs.push(fmt_x(&pt.x));
            }
            if pt.d as usize + 1 < per_thread {
                return true;
            }
            let more = if shown < per_thread { " …" } else { "" };
            let row = format!(
                "{:>5} {:>10}: {}{more}\n",
                pt.thread,
                format!("{:?}", v(&pt.p)),
                xs.join(" ")
            );
            xs.clear();
            emit(format_args!("{row}"))
        });
        if ((rows * shown) as u64) < self.points() {
            let _ = emit(format_args!(
                "… {} of the threads' {} elements listed (--map prints every one)\n",
                rows * shown,
                self.points()
            ));
        }
        result
    }

    /// The tile as a grid (X0 down, the remaining dims flattened across), each element coloured
    /// by the thread that owns it and labelled with its Y index.
    fn svg(&self, name: &str) -> String {
        let lens = v(&self.enc.x_lengths());
        let (rows, cols) = match lens.len() {
            1 => (1, lens[0]),
            _ => (lens[0], lens[1..].iter().product()),
        };
        let flat = |x: &Dims| -> (Index, Index) {
            let xs = v(x);
            if xs.len() == 1 {
                return (0, xs[0]);
            }
            let mut c = 0;
            for (i, &xi) in xs.iter().enumerate().skip(1) {
                c = c * lens[i] + xi;
            }
            (xs[0], c)
        };
        let mut owner: Vec<Option<(u32, Dims, u32)>> = vec![None; (rows * cols) as usize];
        self.for_each_point(|pt| {
            let (r, c) = flat(&pt.x);
            if r < 0 || r >= rows || c < 0 || c >= cols {
                return true;
            }
            let cell = &mut owner[(r * cols + c) as usize];
            match cell {
                Some((_, _, n)) => *n += 1,
                None => *cell = Some((pt.thread, pt.y, 1)),
            }
            true
        });
        let cw = 34.0_f64;
        let ch = 22.0_f64;
        let (w, h) = ((cols as f64 * cw + 2.0).max(640.0), rows as f64 * ch + 24.0);
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="monospace" font-size="7">"#
        );
        let groups = match self.lane_groups() {
            Some(g) => format!(", lane groups of {g} lanes (outlined)"),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            r#"<text x="2" y="14" font-size="12">{name}: {:?}, {} threads{groups}, colour = thread, label = thread / y</text>"#,
            lens, self.block_size
        );
        for r in 0..rows {
            for c in 0..cols {
                let (x0, y0) = (1.0 + c as f64 * cw, 20.0 + r as f64 * ch);
                match &owner[(r * cols + c) as usize] {
                    Some((t, y, n)) => {
                        let hue = (*t as f64 * 137.508) % 360.0;
                        let rep = if *n > 1 {
                            format!(" ×{n}")
                        } else {
                            String::new()
                        };
                        // A lane group's cells share a dark outline of the group's hue.
                        let (stroke, width, group) = match self.lane_groups() {
                            Some(g) => (
                                format!("hsl({:.0},60%,30%)", ((t / g) as f64 * 67.0) % 360.0),
                                1.5,
                                format!(" (group {}, lane {})", t / g, t % g),
                            ),
                            None => ("white".to_string(), 0.5, String::new()),
                        };
                        let _ = writeln!(
                            s,
                            r#"<rect x="{x0}" y="{y0}" width="{cw}" height="{ch}" fill="hsl({hue:.0},70%,75%)" stroke="{stroke}" stroke-width="{width}"><title>x=({r},{c}) thread {t}{group} y={:?}{rep}</title></rect><text x="{}" y="{}">t{t}{rep}</text><text x="{}" y="{}">{}</text>"#,
                            v(y),
                            x0 + 2.0,
                            y0 + 9.0,
                            x0 + 2.0,
                            y0 + 18.0,
                            v(y).iter()
                                .map(|i| i.to_string())
                                .collect::<Vec<_>>()
                                .join(",")
                        );
                    }
                    None => {
                        let _ = writeln!(
                            s,
                            r#"<rect x="{x0}" y="{y0}" width="{cw}" height="{ch}" fill="white" stroke="red"/>"#
                        );
                    }
                }
            }
        }
        s.push_str("</svg>\n");
        s
    }
}

fn fmt_x(x: &Dims) -> String {
    let parts: Vec<String> = x.as_slice().iter().map(|i| i.to_string()).collect();
    format!("({})", parts.join(","))
}
