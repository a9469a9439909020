//! One module per subcommand.

pub mod capture;
pub mod convert;
pub mod demo;
pub mod diff;
pub mod flamegraph;
pub mod graph;
pub mod list;
pub(crate) mod out;
pub mod peek;
pub mod record;
pub mod report;
pub mod top;
pub mod tree;
pub mod view;

use std::io::Write;

/// Writes `bytes` to standard output; a closed pipe (`| head`) is not an error.
pub(crate) fn print(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    print_result(out.write_all(bytes).and_then(|()| out.flush()))
}

/// The outcome of writing to standard output: a reader that went away (`| head`) is not an
/// error.
pub(crate) fn print_result(r: std::io::Result<()>) -> anyhow::Result<()> {
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("cannot write to standard output: {e}"))
        }
        _ => Ok(()),
    }
}
