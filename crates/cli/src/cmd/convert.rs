//! `tickscope convert FILE --to FORMAT -o OUT`: a timeline capture (`.tscap`) in another
//! tool's format: Chrome trace JSON, Perfetto protobuf, speedscope JSON or folded stacks;
//! all of it, or a time window (`--from`, `--until`), some threads (`--thread`) and scopes of
//! some length (`--min-duration`).

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Result;
use tickscope_timeline::{convert_file_with, Error, Filter, Format, Prepass};

use super::out::{self, Output};

/// Options of `tickscope convert`.
#[derive(clap::Args)]
pub struct Args {
    /// The capture (`.tscap`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The output format: chrome (chrome://tracing, ui.perfetto.dev), perfetto (native
    /// protobuf), speedscope, or folded (flame graph tools).
    #[arg(long, value_name = "FORMAT")]
    to: Format,
    /// Where to write it (`-` for standard output).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Convert a damaged or cut-off capture up to the damage instead of failing.
    #[arg(long)]
    salvage: bool,
    /// Start of the time window to keep, from the capture's start (e.g. `1.2s`, `300ms`).
    /// Scopes open at that moment begin there.
    #[arg(long, value_name = "TIME", value_parser = super::parse_time)]
    from: Option<u64>,
    /// End of the time window to keep, from the capture's start (`--to` names the format).
    /// Scopes still open then end there, marked `clipped`.
    #[arg(long, value_name = "TIME", value_parser = super::parse_time)]
    until: Option<u64>,
    /// Keep only this thread, by name or OS thread id (repeat for more).
    #[arg(long = "thread", value_name = "NAME|TID")]
    threads: Vec<String>,
    /// Leave out scopes shorter than this (inside the window), counted in the output's
    /// metadata (e.g. `10us`, `1ms`).
    #[arg(long, value_name = "DUR", value_parser = super::parse_time)]
    min_duration: Option<u64>,
}

/// `ns` as people write it: `10 µs`, `1.5 ms`.
fn duration(ns: u64) -> String {
    let (v, unit) = match ns {
        0..1_000 => (ns as f64, "ns"),
        1_000..1_000_000 => (ns as f64 / 1e3, "µs"),
        1_000_000..1_000_000_000 => (ns as f64 / 1e6, "ms"),
        _ => (ns as f64 / 1e9, "s"),
    };
    format!("{} {unit}", (v * 1000.0).round() / 1000.0)
}

/// Larger exports get a warning with the command that cuts them.
const LARGE: u64 = 1 << 30;
/// The size of the window the warning suggests: what Perfetto UI and chrome://tracing load
/// in seconds (chrome://tracing fails on JSON of a few hundred MB: V8's string limit).
const COMFORTABLE: u64 = 100_000_000;

/// `ns` as `--from`/`--until` take it, in the largest unit that keeps it whole.
fn flag_time(ns: u64) -> String {
    match ns {
        0 => "0".to_owned(),
        _ if ns % 1_000_000_000 == 0 => format!("{}s", ns / 1_000_000_000),
        _ if ns % 1_000_000 == 0 => format!("{}ms", ns / 1_000_000),
        _ if ns % 1_000 == 0 => format!("{}us", ns / 1_000),
        _ => format!("{ns}ns"),
    }
}

pub fn run(args: Args) -> Result<()> {
    let filter = Filter {
        from_ns: args.from.unwrap_or(0),
        until_ns: args.until.unwrap_or(u64::MAX),
        threads: args.threads.clone(),
        min_duration_ns: args.min_duration.unwrap_or(0),
    };
    if filter.until_ns < filter.from_ns {
        anyhow::bail!("--until comes before --from");
    }
    let prepass = Prepass::of(&args.file);
    // A window's size is estimated from its share of the capture's length; threads and
    // minimum durations are not known before the conversion reads the events.
    if filter.threads.is_empty() && filter.min_duration_ns == 0 {
        let estimate = prepass.estimate_window(args.to, filter.from_ns, filter.until_ns);
        if estimate > LARGE {
            let cut = match prepass.window_of_size(args.to, COMFORTABLE) {
                Some((from, until)) => {
                    format!("--from {} --until {}", flag_time(from), flag_time(until))
                }
                None => "--from 1s --until 1.1s".to_owned(),
            };
            say!(
                "tickscope: warning: {} as {} will take about {:.1} GB, more than a viewer opens comfortably; a window of about {} MB: `tickscope convert {} --to {} {cut} -o OUT` (also --thread NAME, --min-duration 10us)",
                args.file.display(),
                args.to,
                estimate as f64 / 1e9,
                COMFORTABLE / 1_000_000,
                args.file.display(),
                args.to
            );
        }
    }
    out::say_unfinished(&args.file);
    let to_stdout = out::is_stdout(&args.output);
    let convert = |out: &mut dyn std::io::Write| {
        convert_file_with(
            &args.file,
            args.to,
            args.salvage,
            &filter,
            Some(prepass),
            out,
        )
    };
    let result = if to_stdout {
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        convert(&mut out).and_then(|w| out.flush().map(|()| w).map_err(Error::Write))
    } else {
        out::refuse_inputs(&args.output, &[&args.file])?;
        // A temporary file beside the output, renamed over it only once complete: a bad
        // input leaves an existing output as it was.
        let mut output = Output::create(&args.output)?;
        let mut w = BufWriter::new(output.file());
        let r = convert(&mut w).and_then(|e| w.flush().map(|()| e).map_err(Error::Write));
        drop(w);
        if r.is_ok() {
            output.commit()?;
        }
        r
    };
    let exported = match result {
        Ok(e) => e,
        Err(Error::Write(e)) if to_stdout && e.kind() == std::io::ErrorKind::BrokenPipe => {
            return Ok(());
        }
        Err(Error::Write(e)) => {
            return Err(anyhow::anyhow!(
                "{}: cannot write: {e}",
                args.output.display()
            ))
        }
        Err(e) => return Err(e.into()),
    };
    for w in &exported.warnings {
        say!("tickscope: warning: {w}");
    }
    if !filter.threads.is_empty() && exported.left_out.threads_kept == 0 {
        say!(
            "tickscope: warning: {}: no thread matches --thread {}: the output holds no thread (`tickscope report {} --per-thread` lists them)",
            args.file.display(),
            filter.threads.join(", --thread "),
            args.file.display()
        );
    }
    if exported.left_out.short_scopes > 0 {
        say!(
            "tickscope: left out {} scopes shorter than {} (counted in the output's metadata)",
            exported.left_out.short_scopes,
            duration(filter.min_duration_ns)
        );
    }
    if !to_stdout {
        let size = std::fs::metadata(&args.output).map_or(0, |m| m.len());
        say!(
            "tickscope: wrote {} ({}, {} bytes)",
            args.output.display(),
            args.to,
            size
        );
    }
    Ok(())
}
