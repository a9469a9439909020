//! The crate's [`Error`]: an analysis that could not read its capture or write its output.
//! Apart from the crate root, which drives the exports, so that the exports and the replay
//! can return it without importing the root.

use std::fmt;
use std::io;

use crate::tscap;

/// An analysis that failed: reading the capture, or writing the output.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The capture could not be read.
    Read(tscap::Error),
    /// The output could not be written.
    Write(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Read(e) => e.fmt(f),
            Error::Write(e) => write!(f, "cannot write the output: {e}"),
        }
    }
}

/// The inner error's text is part of the one-line message, so it is not also a `source()`;
/// match the variants to get it.
impl std::error::Error for Error {}

impl From<tscap::Error> for Error {
    fn from(e: tscap::Error) -> Error {
        Error::Read(e)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Write(e)
    }
}
