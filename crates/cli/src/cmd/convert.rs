//! `tickscope convert FILE --to FORMAT -o OUT`: a timeline capture (`.tscap`) in another
//! tool's format: Chrome trace JSON, Perfetto protobuf, speedscope JSON or folded stacks.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Result;
use tickscope_timeline::{convert_file, Error, Format};

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
}

pub fn run(args: Args) -> Result<()> {
    let to_stdout = out::is_stdout(&args.output);
    let result = if to_stdout {
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        convert_file(&args.file, args.to, args.salvage, &mut out)
            .and_then(|w| out.flush().map(|()| w).map_err(Error::Write))
    } else {
        out::refuse_inputs(&args.output, &[&args.file])?;
        // A temporary file beside the output, renamed over it only once complete: a bad
        // input leaves an existing output as it was.
        let mut output = Output::create(&args.output)?;
        let mut w = BufWriter::new(output.file());
        let r = convert_file(&args.file, args.to, args.salvage, &mut w)
            .and_then(|warnings| w.flush().map(|()| warnings).map_err(Error::Write));
        drop(w);
        if r.is_ok() {
            output.commit()?;
        }
        r
    };
    let warnings = match result {
        Ok(w) => w,
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
    for w in &warnings {
        eprintln!("tickscope: warning: {w}");
    }
    if !to_stdout {
        let size = std::fs::metadata(&args.output).map_or(0, |m| m.len());
        eprintln!(
            "tickscope: wrote {} ({}, {} bytes)",
            args.output.display(),
            args.to,
            size
        );
    }
    Ok(())
}
