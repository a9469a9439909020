//! `tickscope report FILE`: the summary table of a timeline capture (`.tscap`), as the
//! program's own exit summary would show it, with frames, counters, messages and losses.

use std::path::PathBuf;

use anyhow::Result;
use tickscope_timeline::tscap::{self, Reader};
use tickscope_timeline::{summarize, Options, TimeMap};

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
    /// Only the calls that begin and end after this time from the capture's start (e.g.
    /// `1.2s`); calls crossing the range's edges are counted apart.
    #[arg(long, value_name = "TIME", value_parser = super::parse_time)]
    from: Option<u64>,
    /// Only the calls that begin and end before this time from the capture's start.
    #[arg(long, value_name = "TIME", value_parser = super::parse_time)]
    until: Option<u64>,
}

pub fn run(args: Args) -> Result<()> {
    super::out::say_unfinished(&args.file);
    let mut reader = Reader::open(&args.file)?.salvage(args.salvage);
    let range = match (args.from, args.until) {
        (None, None) => None,
        (from, until) => {
            let (from, until) = (from.unwrap_or(0), until.unwrap_or(u64::MAX));
            if until < from {
                anyhow::bail!("--until comes before --from");
            }
            // At the capture's last calibration, which the summary converts with too.
            let clock = tscap::last_clock(&args.file).unwrap_or_else(|| reader.meta().clock());
            let map = TimeMap::new(reader.process(), clock);
            Some((map.ticks(from), map.ticks(until)))
        }
    };
    let summary = summarize(
        &mut reader,
        Options {
            per_thread: args.per_thread,
            range,
        },
    )?;
    for w in &summary.warnings {
        say!("tickscope: warning: {w}");
    }
    // Written as it is made: the text of a report of many scopes is larger than its rows.
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = if args.json {
        summary.write_json(&mut out)
    } else {
        summary.write_text(&mut out)
    };
    super::print_result(written.and_then(|()| std::io::Write::flush(&mut out)))
}
