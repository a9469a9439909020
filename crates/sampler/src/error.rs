//! Why the sampler could not start, or a profile could not be written.

use std::fmt;

/// Why the sampler could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A sampler is already running in this process.
    AlreadyRunning,
    /// Another handler owns the signal the sampler needs.
    SignalInUse,
    /// The frequency is 0 or above 100 kHz.
    BadFrequency,
    /// The asked-for source cannot be used here (or a wall timer in CPU mode, and so on).
    Unsupported,
    /// Writing a profile failed.
    Io,
}

/// An error from [`Builder::start`](super::Builder::start) or from writing a profile.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<std::io::Error>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: String, source: Option<std::io::Error>) -> Error {
        Error {
            kind,
            message,
            source,
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

/// The OS error, if any, is part of the message: `source()` does not return it again, so a
/// printer that walks the chain (`anyhow`'s `{:#}`) says it once.
impl std::error::Error for Error {}
