//! `tickscope`: the command-line tool. Each subcommand is one file in `cmd/`; the logic lives
//! in the libraries.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// tickscope: exact, in-process profiling for Rust, C and C++.
#[derive(Parser)]
#[command(name = "tickscope", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a built-in multi-threaded workload with scopes, interval lines and the exit summary.
    Demo(cmd::demo::Args),
    /// Summarise a timeline capture (.tscap): the exit-summary table, frames, counters, losses.
    Report(cmd::report::Args),
    /// Convert a timeline capture to Chrome trace JSON, Perfetto, speedscope or folded stacks.
    Convert(cmd::convert::Args),
    /// Receive timeline captures over TCP (`capture listen`).
    Capture(cmd::capture::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Convert(args) => cmd::convert::run(args),
        Command::Capture(args) => cmd::capture::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tickscope: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
