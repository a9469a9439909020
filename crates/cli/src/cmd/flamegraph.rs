//! `tickscope flamegraph FILE -o out.svg`: an interactive flame graph (search, zoom,
//! tooltips); `--reverse` draws an icicle of callers; `--json` prints the folded stacks.

use std::path::PathBuf;

use anyhow::Result;
use tickscope_profile::views::{flame_folded, flamegraph_svg, FlameOptions, Sort, View};

use super::common::{print_json, Common};
use super::out;

/// Options of `tickscope flamegraph`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Where to write the SVG (`-` for stdout).
    #[arg(short, long, value_name = "OUT.svg", default_value = "flamegraph.svg")]
    output: PathBuf,
    /// Leaf functions at the top, callers hanging below (an icicle of callers).
    #[arg(long)]
    reverse: bool,
    /// The graph's title.
    #[arg(long)]
    title: Option<String>,
}

pub fn run(args: Args) -> Result<()> {
    if !args.common.json {
        out::refuse_inputs(&args.output, &args.common.input_paths())?;
    }
    let report = args.common.report(View::Flame, Sort::Flat)?;
    if args.common.json {
        let stacks: Vec<serde_json::Value> = flame_folded(&report, args.reverse)
            .into_iter()
            .map(|(s, v)| serde_json::json!({"stack": s, "value": v}))
            .collect();
        return print_json(&serde_json::json!({
            "view": "flamegraph",
            "sample_type": report.sample_type.ty,
            "unit": report.sample_type.unit,
            "total": report.total,
            "stacks": stacks,
        }));
    }
    let svg = flamegraph_svg(
        &report,
        &FlameOptions {
            reverse: args.reverse,
            title: args.title,
        },
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", args.common.name()))?;
    out::write_output(&args.output, &svg)?;
    if !out::is_stdout(&args.output) {
        say!(
            "tickscope: flame graph written to {}",
            args.output.display()
        );
    }
    Ok(())
}
