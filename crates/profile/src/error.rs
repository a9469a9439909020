//! Errors of the profile readers: which file, and what is wrong, in one line.

use std::fmt;

/// A profile that cannot be read.
///
/// Displays as one line, `FILE: what is wrong` (with the byte offset where the format has
/// one). The CLI prints it and exits with status 2.
#[derive(Debug)]
pub struct Error {
    path: String,
    kind: ErrorKind,
    source: Option<std::io::Error>,
}

/// What is wrong.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file could not be opened.
    Open,
    /// Reading failed.
    Io,
    /// Zero bytes.
    Empty,
    /// The gzip stream is damaged or cut off.
    Decompress {
        /// What the decompressor said.
        detail: String,
    },
    /// The data decompresses to more than [`MAX_DECOMPRESSED`](super::MAX_DECOMPRESSED).
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The gzip data decompresses to more than [`MAX_RATIO`](crate::MAX_RATIO) times its
    /// size: a gzip bomb, not a profile ([`Limits`](crate::Limits) raises the limit).
    TooCompressed {
        /// The compressed size in bytes.
        compressed: u64,
        /// The limit in bytes it reached.
        limit: u64,
    },
    /// No reader recognises the content.
    Unrecognized {
        /// The first bytes (up to 8).
        head: Vec<u8>,
    },
    /// A field of a binary format is malformed at a byte offset (of the decompressed data).
    Malformed {
        /// Which format: `"pprof"`, `"gperftools CPU"`.
        format: &'static str,
        /// The byte offset.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A line of a text format is malformed.
    BadLine {
        /// Which format: `"folded"`, `"heap"`, ...
        format: &'static str,
        /// The 1-based line number.
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// The profile decodes but is inconsistent (a reference to nothing, a count mismatch).
    Invalid {
        /// What is wrong.
        what: String,
    },
}

impl Error {
    /// An error about `path`.
    pub fn new(path: impl Into<String>, kind: ErrorKind) -> Error {
        Error {
            path: path.into(),
            kind,
            source: None,
        }
    }

    /// An I/O error (`Open` or `Io`) about `path`.
    pub fn io(path: impl Into<String>, kind: ErrorKind, source: std::io::Error) -> Error {
        Error {
            path: path.into(),
            kind,
            source: Some(source),
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The I/O error behind an `Open` or `Io` error.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        self.source.as_ref()
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Open => write!(f, "cannot open"),
            ErrorKind::Io => write!(f, "cannot read"),
            ErrorKind::Empty => write!(f, "empty file: no profile in it"),
            ErrorKind::Decompress { detail } => {
                write!(f, "gzip data is damaged or cut off ({detail})")
            }
            ErrorKind::TooLarge { limit } => write!(
                f,
                "decompresses to more than {} MiB, the most this reader accepts",
                limit >> 20
            ),
            ErrorKind::TooCompressed { compressed, limit } => write!(
                f,
                "{} of gzip decompresses to more than {} MiB, over {} times its size: no profiler writes such data (a gzip bomb?); tickscope's --max-decompressed SIZE reads it anyway",
                tickscope_fmt::count(*compressed, "byte"),
                limit >> 20,
                crate::limits::MAX_RATIO
            ),
            ErrorKind::Unrecognized { head } => {
                write!(
                    f,
                    "not a profile: neither pprof protobuf (gzip or raw), gperftools CPU or heap, \
                     a legacy text profile nor folded stacks (starts with"
                )?;
                for b in head {
                    write!(f, " {b:02x}")?;
                }
                write!(f, ")")
            }
            ErrorKind::Malformed {
                format,
                offset,
                what,
            } => write!(f, "malformed {format} profile at byte {offset}: {what}"),
            ErrorKind::BadLine { format, line, what } => {
                write!(f, "malformed {format} profile at line {line}: {what}")
            }
            ErrorKind::Invalid { what } => write!(f, "invalid profile: {what}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.kind)?;
        if let Some(e) = &self.source {
            write!(f, ": {e}")?;
        }
        Ok(())
    }
}

/// The I/O error's text is part of the one-line message, so it is not also a `source()`
/// (printed as a chain, as `anyhow`'s `{:#}` does, it would say the OS error twice); get it
/// with [`Error::io_error`].
impl std::error::Error for Error {}
