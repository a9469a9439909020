//! tickscope's profile side: CPU and heap profiles as `go tool pprof` sees them, and pprof's
//! views of them, with pprof's numbers.
//!
//! # Overview
//! - The crate root: the model of profile.proto and [`load`], which reads pprof protobuf (gzip
//!   or raw), gperftools' binary CPU and text heap/contention formats, the older Go and Java
//!   text formats and folded stacks, picking the reader by content.
//! - [`filter`]: pprof's focus/ignore/hide/show/tag filters and `drop_frames`.
//! - [`views`]: a [`views::Report`] prepares a profile for a view as pprof's driver does
//!   (total, filters, granularity, pruning); `top`, `peek`, `tree`, `list`, DOT `graph`, flame
//!   graphs and `diff` render it as text or JSON.
//!
//! This crate reads files; it knows nothing of tickscope's timeline captures (the
//! `tickscope-timeline` crate) and has no `unsafe` code.
//!
//! Profiles as `go tool pprof` sees them: the model of profile.proto, and readers that fill it
//! from pprof protobuf (gzip or raw), gperftools' legacy binary CPU and text heap formats, the
//! older Go and Java text formats, and folded stacks.
//!
//! [`load`] reads a file and picks the reader by content, never by extension: gzip is
//! unwrapped first, then protobuf is tried, then the legacy formats, then folded stacks.
//! Every reader checks every length and reference before using it, allocates in proportion to
//! the bytes actually present (never to a length a file claims), and reports a problem as one
//! [`Error`] line naming the file.
//!
//! The model keeps profile.proto's shape so that the views compute exactly what pprof computes:
//! samples point at locations (leaf first), locations hold lines (innermost inline frame
//! first), lines point at functions; ids are kept for `-raw`-style output, references are
//! indices.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod error;
pub mod filter;
mod folded;
mod legacy;
mod limits;
mod load;
mod model;
mod pprof;
mod store;
pub mod symbolize;
#[cfg(test)]
mod testutil;
pub mod views;
pub mod write;

pub use error::{Error, ErrorKind};
pub use limits::{Limits, MAX_DECOMPRESSED, MAX_RATIO, RATIO_FLOOR};
pub use load::{load, load_with, parse, parse_format, parse_with, parse_with_limit};
pub use model::{
    Format, Function, Label, Line, Location, Mapping, Profile, Sample, ValueType, MAX_STACK_DEPTH,
};
pub use store::{Span, Stack, StrId};
