//! A capture's errors and figures: what went wrong, and what it took, dropped and delivered.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Why a capture could not start, stop or dump.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    target: String,
    source: Option<std::io::Error>,
}

/// The kinds of [`Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A capture is already running.
    AlreadyRunning,
    /// No capture is running.
    NotRunning,
    /// [`dump`](super::dump) needs a flight-recorder capture.
    NotFlightRecorder,
    /// The file or connection failed.
    Io,
    /// Scopes are compiled out (no `enabled` feature): there is nothing to capture.
    Unsupported,
}

impl Error {
    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            ErrorKind::AlreadyRunning => "a capture is already running",
            ErrorKind::NotRunning => "no capture is running",
            ErrorKind::NotFlightRecorder => "the running capture is not a flight recorder",
            ErrorKind::Io => "cannot open",
            ErrorKind::Unsupported => "scopes are compiled out (feature `enabled`)",
        };
        write!(f, "capture: {what}")?;
        if !self.target.is_empty() {
            write!(f, ": {}", self.target)?;
        }
        if let Some(e) = &self.source {
            write!(f, ": {e}")?;
        }
        Ok(())
    }
}

/// The OS error, if any, is part of the message: `source()` does not return it again, so a
/// printer that walks the chain (`anyhow`'s `{:#}`) says it once.
impl std::error::Error for Error {}

pub(super) fn err(
    kind: ErrorKind,
    target: impl Into<String>,
    source: Option<std::io::Error>,
) -> Error {
    Error {
        kind,
        target: target.into(),
        source,
    }
}

/// Figures of the current (or last) capture.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Events the collector took from the rings.
    pub events: u64,
    /// Events dropped because the memory budget was spent (a dropped scope counts its begin
    /// and its end).
    pub dropped: u64,
    /// Scopes dropped whole (their begins and ends are among `dropped`).
    pub dropped_scopes: u64,
    /// Scopes already open on threads when the capture started: their calls are not in it.
    pub in_flight_at_start: u64,
    /// The most memory the threads' event blocks took at once during the capture.
    pub memory_peak: u64,
    /// Events in chunks the sink could not take (a slow or vanished listener, a failed write).
    pub undelivered: u64,
    /// Events a flight recorder let go of past its window (its purpose, not a loss).
    pub evicted: u64,
    /// Events recorded by threads after their own exit hook ran (not capturable).
    pub lost_after_exit: u64,
    /// Bytes the sink took.
    pub bytes: u64,
    /// Chunks sealed.
    pub chunks: u64,
    /// CPU time the collector thread used.
    pub collector_cpu: Duration,
    /// Wall time since the capture started.
    pub wall: Duration,
    /// The TCP listener went away during the capture.
    pub disconnected: bool,
    /// The collector thread failed (a bug in tickscope; its panic message was printed):
    /// the capture ends where it failed, without its end record, and the events recorded
    /// after it are not in it.
    pub collector_failed: bool,
    /// The capture file could not be written whole (a full disk, say): an older file at its
    /// name was kept as it was, or a new one holds the capture up to the failure (readable
    /// with `tickscope report --salvage`). Said on stderr too.
    pub write_failed: bool,
}

/// Shared counters (written by the collector, read by anyone).
pub(super) struct Counters {
    pub(super) events: AtomicU64,
    pub(super) dropped: AtomicU64,
    pub(super) dropped_scopes: AtomicU64,
    pub(super) in_flight_at_start: AtomicU64,
    pub(super) undelivered: AtomicU64,
    pub(super) evicted: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) chunks: AtomicU64,
    pub(super) collector_cpu_ns: AtomicU64,
    pub(super) disconnected: AtomicBool,
    pub(super) collector_failed: AtomicBool,
    pub(super) write_failed: AtomicBool,
}

impl Counters {
    pub(super) fn add_undelivered(&self, n: u64) {
        self.undelivered.fetch_add(n, Relaxed);
    }
    pub(super) fn add_written(&self, n: u64) {
        self.bytes.fetch_add(n, Relaxed);
    }
    pub(super) fn reset(&self) {
        for a in [
            &self.events,
            &self.dropped,
            &self.dropped_scopes,
            &self.in_flight_at_start,
            &self.undelivered,
            &self.evicted,
            &self.bytes,
            &self.chunks,
            &self.collector_cpu_ns,
        ] {
            a.store(0, Relaxed);
        }
        self.disconnected.store(false, Relaxed);
        self.collector_failed.store(false, Relaxed);
        self.write_failed.store(false, Relaxed);
    }
}

pub(super) static STATS: Counters = Counters {
    events: AtomicU64::new(0),
    dropped: AtomicU64::new(0),
    dropped_scopes: AtomicU64::new(0),
    in_flight_at_start: AtomicU64::new(0),
    undelivered: AtomicU64::new(0),
    evicted: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    chunks: AtomicU64::new(0),
    collector_cpu_ns: AtomicU64::new(0),
    disconnected: AtomicBool::new(false),
    collector_failed: AtomicBool::new(false),
    write_failed: AtomicBool::new(false),
};
