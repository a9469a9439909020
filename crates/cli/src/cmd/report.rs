//! `tickscope report FILE`: the summary table of a timeline capture (`.tscap`), as the
//! program's own exit summary would show it, with frames, counters, messages and losses.

use std::path::PathBuf;

use anyhow::Result;
use tickscope_analyze::timeline::{report, Options};
use tickscope_analyze::tscap::Reader;

/// Options of `tickscope report`.
#[derive(clap::Args)]
pub struct Args {
    /// The capture (`.tscap`), as written by `demo --capture`, `TICKSCOPE_CAPTURE` or
    /// `tickscope capture listen`.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Add a per-thread breakdown.
    #[arg(long)]
    per_thread: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Read a damaged or cut-off capture up to the damage instead of failing (a warning says
    /// where it stopped).
    #[arg(long)]
    salvage: bool,
}

pub fn run(args: Args) -> Result<()> {
    let mut reader = Reader::open(&args.file)?.salvage(args.salvage);
    let summary = report(
        &mut reader,
        Options {
            per_thread: args.per_thread,
        },
    )?;
    for w in &summary.warnings {
        eprintln!("tickscope: warning: {w}");
    }
    let text = if args.json {
        summary.to_json()
    } else {
        summary.to_text()
    };
    super::print(text.as_bytes())
}
