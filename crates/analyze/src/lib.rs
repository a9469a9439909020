//! Reading and analysing tickscope's timeline captures (`.tscap`) and CPU/heap profiles: a
//! streaming, bounded-memory capture reader, the summary table and exports to the ecosystem's
//! viewers; profile readers and pprof's views with pprof's numbers.
//!
//! # Overview
//! - [`profile`]: profiles as `go tool pprof` sees them. [`profile::load`] reads pprof
//!   protobuf (gzip or raw), gperftools' binary CPU and text heap/contention formats, the older
//!   Go and Java text formats and folded stacks, picking the reader by content;
//!   [`profile::filter`] holds pprof's focus/ignore/hide/show/tag filters and `drop_frames`.
//! - [`views`]: a [`views::Report`] prepares a profile for a view as pprof's driver does
//!   (total, filters, granularity, pruning); `top`, `peek`, `tree`, `list`, DOT `graph`, flame
//!   graphs and `diff` render it as text or JSON.
//! - [`tscap`]: the capture format. [`tscap::Reader`] reads a capture chunk by chunk (file or
//!   any `Read`), checking every length, CRC and field before using it; [`tscap::Events`] is
//!   the reusable buffer events are decoded into; [`tscap::Meta`] holds the scope, marker and
//!   thread definitions; [`tscap::Error`] says in one line which byte of which file is wrong.
//!   Salvage mode keeps everything before a damaged chunk.
//! - [`timeline`]: analyses over a reader. [`timeline::report()`] computes the
//!   [`timeline::Report`] (the in-process exit summary's table from the timeline, with frame,
//!   counter, message and loss statistics; text or JSON), [`timeline::convert_file`] exports
//!   to Chrome trace JSON, Perfetto protobuf, speedscope or folded stacks, and
//!   [`timeline::live`] records a capture arriving over a connection.
//!
//! # Example
//! ```no_run
//! use tickscope_analyze::timeline::{report, Options};
//! use tickscope_analyze::tscap::Reader;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut reader = Reader::open("run.tscap")?.salvage(true);
//! let summary = report(&mut reader, Options { per_thread: false })?;
//! print!("{}", summary.to_text());
//! # Ok(()) }
//! ```
//!
//! # Speed
//! Decoding and summarising run at well over 50 million events per second on one core
//! (release build); `cargo bench -p tickscope-analyze --bench decode` measures it on a
//! generated capture.
//!
//! This crate reads files; it does not depend on `tickscope` (the library programs link) and
//! has no `unsafe` code.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod profile;
pub mod timeline;
pub mod tscap;
pub mod views;
