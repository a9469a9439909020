//! tickscope's timeline side: reading timeline captures (`.tscap`) and analysing them, in
//! bounded memory whatever their length.
//!
//! # Overview
//! - [`tscap`]: the capture format. [`tscap::Reader`] reads a capture chunk by chunk (file or
//!   any `Read`), checking every length, CRC and field before using it; [`tscap::Events`] is
//!   the reusable buffer events are decoded into; [`tscap::Meta`] holds the scope, marker and
//!   thread definitions; [`tscap::Error`] says in one line which byte of which file is wrong.
//!   Salvage mode keeps everything before a damaged chunk.
//! - The crate root: analyses over a reader. [`summarize()`] computes the [`Summary`] (the
//!   in-process exit summary's table from the timeline, with frame, counter, message and loss
//!   statistics; text or JSON), [`convert_file`] exports to Chrome trace JSON, Perfetto
//!   protobuf, speedscope or folded stacks, and [`live`] records a capture arriving over a
//!   connection.
//!
//! # Example
//! ```no_run
//! use tickscope_timeline::tscap::Reader;
//! use tickscope_timeline::{summarize, Options};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut reader = Reader::open("run.tscap")?.salvage(true);
//! let summary = summarize(&mut reader, Options { per_thread: false, ..Options::default() })?;
//! print!("{}", summary.to_text());
//! # Ok(()) }
//! ```
//!
//! # Speed
//! Decoding and summarising run at well over 50 million events per second on one core
//! (release build); `cargo bench -p tickscope-timeline --bench decode` measures it on a
//! generated capture.
//!
//! This crate reads files; it does not depend on `tickscope` (the library programs link),
//! knows nothing of profiles (the `tickscope-profile` crate) and has no `unsafe` code.
//!
//! Analyses of a timeline capture, each streaming over a [`Reader`]: the [`summarize()`] summary
//! table and the exports to other tools' formats ([`chrome`], [`perfetto`], [`speedscope`],
//! [`folded`]), plus [`live`], which records a capture arriving over a connection while
//! summarising it.
//!
//! Exports share one replay of each thread's events: timestamps converted to ns
//! since the start of capture at one calibration (the capture's last, found by a quick first
//! pass over a file: see [`convert_file`]), kept non-decreasing per thread so that every
//! export's scopes nest strictly even when the counter stepped back; a scope abandoned by an
//! enclosing scope's end is closed there, one still open at the end is closed at its thread's
//! last timestamp, both marked as such. Output is deterministic: the same capture gives the
//! same bytes.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod chrome;
pub mod collect;
mod error;
mod filter;
pub mod folded;
mod format;
mod hist;
mod json;
pub mod live;
pub mod perfetto;
mod protobuf;
mod replay;
mod sink;
pub mod speedscope;
mod spill;
mod summary;
mod text;
mod time;
pub mod tscap;

use std::fmt;
use std::io::{Read, Write};
use std::path::Path;
use std::str::FromStr;

use tscap::{Clock, Reader};

pub use collect::{summarize, Collector, Options, Summary};
pub use error::Error;
pub use filter::{Filter, LeftOut};
pub use time::TimeMap;

/// An export format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Chrome trace event JSON (`chrome://tracing`, Perfetto UI, speedscope).
    Chrome,
    /// Perfetto's native protobuf trace.
    Perfetto,
    /// speedscope's file format, one evented profile per thread.
    Speedscope,
    /// Folded stacks (`thread;outer;inner self_ns`) for flame graph tools.
    Folded,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "chrome" => Ok(Format::Chrome),
            "perfetto" => Ok(Format::Perfetto),
            "speedscope" => Ok(Format::Speedscope),
            "folded" => Ok(Format::Folded),
            _ => Err(format!(
                "unknown format {s:?} (expected chrome, perfetto, speedscope or folded)"
            )),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Chrome => "chrome",
            Format::Perfetto => "perfetto",
            Format::Speedscope => "speedscope",
            Format::Folded => "folded",
        })
    }
}

/// Exports the capture at `reader` to `out` in `format`, converting ticks at `clock` (the
/// reader's current calibration when `None`). Returns the reader's warnings.
pub fn export<R: Read, W: Write>(
    reader: &mut Reader<R>,
    format: Format,
    clock: Option<Clock>,
    out: W,
) -> Result<Vec<String>, Error> {
    export_with(reader, format, clock, &Filter::default(), out).map(|e| e.warnings)
}

/// What an export did besides writing.
#[derive(Clone, Debug, Default)]
pub struct Exported {
    /// The reader's warnings.
    pub warnings: Vec<String>,
    /// What the filter left out (also said in the file, where the format has a place).
    pub left_out: LeftOut,
}

/// [`export`], keeping what `filter` keeps.
pub fn export_with<R: Read, W: Write>(
    reader: &mut Reader<R>,
    format: Format,
    clock: Option<Clock>,
    filter: &Filter,
    out: W,
) -> Result<Exported, Error> {
    let clock = clock.unwrap_or_else(|| reader.meta().clock());
    let left_out = match format {
        Format::Chrome => chrome::write(reader, clock, filter, out)?,
        Format::Perfetto => perfetto::write(reader, clock, filter, out)?,
        Format::Speedscope => speedscope::write(reader, clock, filter, out)?,
        Format::Folded => folded::write(reader, clock, filter, out)?,
    };
    Ok(Exported {
        warnings: reader.warnings(),
        left_out,
    })
}

/// Bytes per event an export takes, about (measured on the demo's captures), for
/// [`Prepass::estimate`].
fn bytes_per_event(format: Format) -> f64 {
    match format {
        Format::Chrome => 40.0,
        Format::Speedscope => 36.0,
        Format::Perfetto => 3.0,
        Format::Folded => 0.0,
    }
}

/// What a quick first pass over a capture file learns (metadata chunks and the end record
/// only): the calibration to convert with, how many events the capture holds and how long it
/// ran.
#[derive(Clone, Copy, Debug)]
pub struct Prepass {
    /// The capture's last calibration.
    pub clock: Option<Clock>,
    /// The events the end record counts (none without one).
    pub events: Option<u64>,
    /// From the capture's start to its end record (none without one).
    pub duration_ns: Option<u64>,
    /// The file's size.
    pub file_bytes: u64,
}

impl Prepass {
    /// Reads `path`'s metadata (a damaged file is read up to the damage).
    pub fn of(path: &Path) -> Prepass {
        let (clock, events, duration_ns) = match tscap::last_clock_and_end(path) {
            Some((c, e, start)) => (
                Some(c),
                e.as_ref().map(|e| e.events),
                e.map(|e| {
                    let secs = e.end_ticks.saturating_sub(start) as f64 / c.ticks_per_second;
                    (secs * 1e9) as u64
                }),
            ),
            None => (None, None, None),
        };
        Prepass {
            clock,
            events,
            duration_ns,
            file_bytes: std::fs::metadata(path).map_or(0, |m| m.len()),
        }
    }

    /// About how many bytes a whole export to `format` takes: the end record's events (or,
    /// without one, the file's size at the writer's usual 0.6 bytes an event) at the format's
    /// usual size per event.
    pub fn estimate(&self, format: Format) -> u64 {
        let events = self.events.unwrap_or((self.file_bytes as f64 / 0.6) as u64);
        (events as f64 * bytes_per_event(format)) as u64
    }

    /// [`estimate`](Self::estimate) of the part of the capture between `from_ns` and
    /// `until_ns` (from its start), taking events as spread evenly over its length; the
    /// whole estimate when the length is unknown.
    pub fn estimate_window(&self, format: Format, from_ns: u64, until_ns: u64) -> u64 {
        let whole = self.estimate(format);
        match self.duration_ns {
            Some(d) if d > 0 => {
                let kept = until_ns.min(d).saturating_sub(from_ns.min(d));
                (whole as f64 * kept as f64 / d as f64) as u64
            }
            _ => whole,
        }
    }

    /// A window `(from_ns, until_ns)` whose export to `format` takes about `bytes`: its
    /// length a 1-2-5 round number, starting a third into the capture (past start-up) at a
    /// multiple of that length. `None` when the capture's length is unknown.
    pub fn window_of_size(&self, format: Format, bytes: u64) -> Option<(u64, u64)> {
        let d = self.duration_ns.filter(|&d| d > 0)?;
        let per_ns = self.estimate(format) as f64 / d as f64;
        let want = if per_ns > 0.0 {
            bytes as f64 / per_ns
        } else {
            d as f64
        };
        // The largest 1, 2 or 5 × 10^k ns not over `want` (1 µs at least).
        let mut len = 1_000u64;
        'round: for k in 3..=12 {
            for m in [1u64, 2, 5] {
                let l = m * 10u64.pow(k);
                if l as f64 > want || l > d {
                    break 'round;
                }
                len = l;
            }
        }
        let from = (d / 3) / len * len;
        Some((from, from + len))
    }
}

/// Exports the capture file at `path` to `out`: a quick first pass finds the capture's last
/// clock calibration (reading metadata chunks only), the second converts. With `salvage`, a
/// damaged capture is converted up to the damage. Returns the reader's warnings.
pub fn convert_file<W: Write>(
    path: &Path,
    format: Format,
    salvage: bool,
    out: W,
) -> Result<Vec<String>, Error> {
    convert_file_with(path, format, salvage, &Filter::default(), None, out).map(|e| e.warnings)
}

/// [`convert_file`], keeping what `filter` keeps, with the first pass already made (`None`:
/// made here).
pub fn convert_file_with<W: Write>(
    path: &Path,
    format: Format,
    salvage: bool,
    filter: &Filter,
    prepass: Option<Prepass>,
    out: W,
) -> Result<Exported, Error> {
    let clock = match prepass {
        Some(p) => p.clock,
        None => tscap::last_clock(path),
    };
    let mut reader = Reader::open(path)?.salvage(salvage);
    export_with(&mut reader, format, clock, filter, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepass(events: u64, duration_ns: Option<u64>) -> Prepass {
        Prepass {
            clock: None,
            events: Some(events),
            duration_ns,
            file_bytes: 0,
        }
    }

    #[test]
    fn a_window_is_estimated_by_its_share_of_the_capture() {
        // 100 M events over 4 s: 4 GB as Chrome JSON, 1 GB a second.
        let p = prepass(100_000_000, Some(4_000_000_000));
        assert_eq!(p.estimate(Format::Chrome), 4_000_000_000);
        let w = p.estimate_window(Format::Chrome, 1_000_000_000, 1_500_000_000);
        assert_eq!(w, 500_000_000);
        // A window past the end holds nothing; an open end stops at the capture's.
        assert_eq!(
            p.estimate_window(Format::Chrome, 5_000_000_000, u64::MAX),
            0
        );
        assert_eq!(
            p.estimate_window(Format::Chrome, 3_000_000_000, u64::MAX),
            1_000_000_000
        );
        // Without a length (no end record), the whole estimate.
        let p = prepass(100_000_000, None);
        assert_eq!(
            p.estimate_window(Format::Chrome, 0, 1),
            p.estimate(Format::Chrome)
        );
        assert_eq!(p.window_of_size(Format::Chrome, 100_000_000), None);
    }

    #[test]
    fn the_suggested_window_is_a_round_length_inside_the_capture_of_about_the_size_asked() {
        // 1 GB a second: 100 MB is 100 ms, from a third into the 4 s capture.
        let p = prepass(100_000_000, Some(4_000_000_000));
        let (from, until) = p.window_of_size(Format::Chrome, 100_000_000).unwrap();
        assert_eq!((from, until), (1_300_000_000, 1_400_000_000));
        // 3.5 GB a second: 28 ms wanted, 20 ms given (the round length not over it).
        let p = prepass(266_000_000, Some(3_000_000_000));
        let (from, until) = p.window_of_size(Format::Chrome, 100_000_000).unwrap();
        assert_eq!(until - from, 20_000_000);
        assert!(p.estimate_window(Format::Chrome, from, until) <= 100_000_000);
        assert!(until <= 3_000_000_000);
        // A short capture: never longer than the capture itself.
        let p = prepass(1_000, Some(5_000_000));
        let (from, until) = p.window_of_size(Format::Chrome, 100_000_000).unwrap();
        assert!(from < until && until <= 5_000_000, "{from}..{until}");
    }
}
