//! `tickscope`: the command-line tool. Each subcommand is one file in `cmd/`; the logic lives
//! in the libraries.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `eprintln!` that cannot panic: a standard error that is closed or a pipe whose reader
/// went (`tickscope record ... 2>&1 | head`) loses the message, and the command still ends
/// with its own status (`record` forwards the program's).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that cannot panic (see [`say!`]).
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

mod cmd;

/// The tool's own allocations are sampled into a heap profile
/// (`TICKSCOPE_HEAPPROFILE=heap.pb.gz tickscope demo`): the heap profiler's demo, at the cost
/// of a thread-local subtraction per allocation.
#[global_allocator]
static ALLOCATOR: tickscope::alloc::Profiled<std::alloc::System> =
    tickscope::alloc::Profiled::new(std::alloc::System);

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
    /// Profile views: the flat table (flat, flat%, sum%, cum, cum%), as `go tool pprof -top`.
    Top(cmd::top::Args),
    /// Callers and callees of the functions matching a regex, as `go tool pprof -peek`.
    Peek(cmd::peek::Args),
    /// The indented call tree from the entry points down, with cum%.
    Tree(cmd::tree::Args),
    /// An interactive flame graph SVG (`--reverse`: an icicle of callers).
    Flamegraph(cmd::flamegraph::Args),
    /// Annotated source of the functions matching a regex, as `go tool pprof -list`.
    List(cmd::list::Args),
    /// The call graph as Graphviz DOT, SVG or PNG, as `go tool pprof -dot` / `-svg`.
    Graph(cmd::graph::Args),
    /// What changed from BASE to NEW: top by delta, as `go tool pprof -diff_base BASE NEW`.
    Diff(cmd::diff::Args),
    /// A local web viewer of captures and profiles: the timeline, flame graphs, top, source,
    /// diff. Prints the URL (with its token) first, then serves until Ctrl-C.
    View(cmd::view::Args),
    /// Profile an unmodified program: `record [-F HZ] [--wall] [-o FILE] -- PROG ARGS...`
    /// (libtickscope.so preloaded); forwards its exit status, then prints the top functions.
    Record(cmd::record::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Convert(args) => cmd::convert::run(args),
        Command::Capture(args) => cmd::capture::run(args),
        Command::Top(args) => cmd::top::run(args),
        Command::Peek(args) => cmd::peek::run(args),
        Command::Tree(args) => cmd::tree::run(args),
        Command::Flamegraph(args) => cmd::flamegraph::run(args),
        Command::List(args) => cmd::list::run(args),
        Command::Graph(args) => cmd::graph::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::View(args) => cmd::view::run(args),
        Command::Record(args) => match cmd::record::run(args) {
            Ok(code) => return ExitCode::from(code),
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Asked-for data that is absent (a regex matching nothing) is status 1, as grep's.
        Err(e) if e.is::<cmd::common::NotFound>() => {
            say!("tickscope: {e:#}");
            ExitCode::from(1)
        }
        Err(e) => {
            say!("tickscope: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
