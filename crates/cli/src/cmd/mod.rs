//! One module per subcommand.

pub mod capture;
pub mod common;
pub mod convert;
pub mod demo;
mod demo_async;
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

/// `1.5s`, `300ms`, `20us`, `100ns`, `2m`, `0` (a unit is required otherwise), as ns.
pub(crate) fn parse_time(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    if t == "0" {
        return Ok(0);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        _ => {
            return Err(format!(
                "{s:?} is not a time (a number and ns, us, ms, s or m)"
            ))
        }
    };
    match num.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 && n * scale < u64::MAX as f64 => {
            Ok((n * scale).round() as u64)
        }
        _ => Err(format!(
            "{s:?} is not a time (a number and ns, us, ms, s or m)"
        )),
    }
}
