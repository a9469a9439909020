//! Reading and analysing tickscope's timeline captures (`.tscap`): a streaming, bounded-memory
//! reader, the summary table, and exports to the ecosystem's viewers.
//!
//! # Overview
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

pub mod timeline;
pub mod tscap;
