//! The summary's data: what [`summarize`](super::summarize()) computes and the text and JSON
//! renderings show.

use crate::tscap::ScopeKind;

/// The summary of a capture. Times are in ns, converted at the latest calibration.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The capture's name.
    pub file: String,
    /// The program that wrote it.
    pub program: String,
    /// Its process id.
    pub pid: u64,
    /// The counter: `tsc`, `cntvct` or `monotonic`.
    pub clock_source: String,
    /// The rate used.
    pub ticks_per_second: f64,
    /// Clock entries read after the process record's calibration.
    pub calibrations: u64,
    /// From the start of capture to its end record (or its last event); the range's length
    /// when the summary is of a range.
    pub wall_ns: u64,
    /// The range summarised ([`Options::range`](super::Options::range)), if not the whole
    /// capture.
    pub range: Option<Range>,
    /// Returns true if and only if the capture has its end record.
    pub complete: bool,
    /// Events the end record says were recorded.
    pub recorded_events: Option<u64>,
    /// Events read.
    pub events: u64,
    /// Of those, loss events (markers of dropped events, which the end record's count leaves
    /// out).
    pub loss_markers: u64,
    /// Events chunks read.
    pub event_chunks: u64,
    /// One row per scope with at least one call, largest total first.
    pub scopes: Vec<ScopeRow>,
    /// Every thread, by index.
    pub threads: Vec<ThreadRow>,
    /// Returns true if and only if the threads' rows were computed.
    pub per_thread: bool,
    /// Frame statistics per frame marker.
    pub frames: Vec<FrameRow>,
    /// Counter statistics per counter marker.
    pub counters: Vec<CounterRow>,
    /// Messages seen.
    pub messages: u64,
    /// CPU samples in the capture (the sampler ran beside it), and the distinct stacks they
    /// have.
    pub samples: u64,
    /// See `samples`.
    pub sample_stacks: u64,
    /// The earliest few messages.
    pub first_messages: Vec<Message>,
    /// Everything lost.
    pub losses: Losses,
    /// The reader's warnings (salvage, missing end record).
    pub warnings: Vec<String>,
}

/// The time range a summary is of: the calls that begin and end in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// Its start, from the start of capture (within the capture).
    pub from_ns: u64,
    /// Its end, likewise.
    pub until_ns: u64,
    /// Calls that cross its start or its end: not in the rows.
    pub crossing: u64,
}

/// One scope's statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct ScopeRow {
    /// Scope id.
    pub id: u64,
    /// Name (`<scope #id>` when undefined).
    pub name: String,
    /// Scope or group.
    pub kind: ScopeKind,
    /// Source file.
    pub file: String,
    /// Line.
    pub line: u64,
    /// Every call, re-entries included.
    pub calls: u64,
    /// Outermost calls: the ones whose time is in total, mean, min, percentiles and max.
    pub outer_calls: u64,
    /// Inclusive time of outermost calls.
    pub total_ns: u64,
    /// Time not in child scopes.
    pub self_ns: u64,
    /// Total ÷ outermost calls.
    pub mean_ns: Option<u64>,
    /// Shortest outermost call.
    pub min_ns: Option<u64>,
    /// Median outermost call (within 1%).
    pub p50_ns: Option<u64>,
    /// 90th percentile (within 1%).
    pub p90_ns: Option<u64>,
    /// 99th percentile (within 1%).
    pub p99_ns: Option<u64>,
    /// Longest outermost call.
    pub max_ns: Option<u64>,
    /// Total ÷ wall time × 100 (can pass 100 with several threads).
    pub wall_percent: f64,
    /// Negative durations (counted as zero).
    pub clock_errors: u64,
    /// Calls dropped whole (the program's memory budget for the capture was spent): not in
    /// `calls`. `calls + dropped + in_flight_at_start` is what the program counted.
    pub dropped: u64,
    /// Calls already open when the capture started (begun before it): not in `calls`.
    pub in_flight_at_start: u64,
    /// For a future's or a `tracing` span's call site (format version 3): the lives whose
    /// begin and end the capture holds, each its wall time (first poll to ready or drop;
    /// creation to close), beside the row's busy time (its polls or entries).
    pub wall: Option<WallRow>,
    /// Where the program counted allocations by scope (format version 4), its allocations
    /// over the whole capture: allocations and bytes inside its outermost calls, then those
    /// not in its child scopes (self). `None` without them, and for a range.
    pub allocs: Option<[u64; 4]>,
}

/// The wall times of a call site's futures or spans (see [`ScopeRow::wall`]).
#[derive(Clone, Debug, PartialEq)]
pub struct WallRow {
    /// Lives ended (futures ready or cancelled, spans closed).
    pub count: u64,
    /// Futures dropped before they were ready (in `count`).
    pub cancelled: u64,
    /// Their wall time.
    pub total_ns: u64,
    /// Shortest.
    pub min_ns: u64,
    /// Median (within 1%).
    pub p50_ns: u64,
    /// 99th percentile (within 1%).
    pub p99_ns: u64,
    /// Longest.
    pub max_ns: u64,
    /// Ends before their begins (counted as zero).
    pub clock_errors: u64,
}

/// One thread.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadRow {
    /// Its index in the capture.
    pub index: u64,
    /// Its OS thread id, if defined.
    pub tid: Option<u64>,
    /// Its name (`thread N` when it has none).
    pub name: String,
    /// Events read.
    pub events: u64,
    /// Events dropped, by the thread's loss events.
    pub lost_events: u64,
    /// Events dropped, by the end record when it lists the thread (else the loss events).
    pub dropped: u64,
    /// Scopes still open when the capture ends.
    pub open_at_end: u64,
    /// Per-scope rows (with [`Options::per_thread`](super::Options::per_thread); no min or percentiles).
    pub scopes: Vec<ScopeRow>,
}

/// One frame marker.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameRow {
    /// Marker id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Marks seen.
    pub marks: u64,
    /// Frames: intervals between consecutive marks on the same thread.
    pub frames: u64,
    /// Shortest frame.
    pub min_ns: Option<u64>,
    /// Mean frame.
    pub mean_ns: Option<u64>,
    /// 99th percentile (within 1%).
    pub p99_ns: Option<u64>,
    /// Longest frame.
    pub max_ns: Option<u64>,
}

/// One counter.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterRow {
    /// Marker id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Values seen.
    pub count: u64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// The latest (by timestamp).
    pub last: f64,
}

/// A message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Since the start of capture.
    pub at_ns: u64,
    /// Thread index.
    pub thread: u64,
    /// Thread name.
    pub thread_name: String,
    /// The text.
    pub text: String,
}

/// Everything lost or left incomplete, counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Losses {
    /// Events dropped because a ring was full (the end record's count, or the loss events').
    pub dropped: u64,
    /// Events in chunks the sink could not take.
    pub undelivered: u64,
    /// Chunks the sink could not take (sink-loss entries).
    pub undelivered_chunks: u64,
    /// Events a flight recorder let go of past its window (its purpose, not a loss).
    pub evicted: u64,
    /// Scopes closed by an enclosing scope's end (a leaked or out-of-order guard): not
    /// counted.
    pub abandoned: u64,
    /// Ends that match no open scope (their begin was dropped or precedes the capture).
    pub unmatched_ends: u64,
    /// Scopes still open when the capture ends: not counted.
    pub open_at_end: u64,
    /// Open scopes that a later chunk of their thread no longer lists: they ended in data
    /// missing from the capture.
    pub cut_at_gaps: u64,
    /// Scopes nested deeper than the format's limit: not counted.
    pub too_deep: u64,
    /// Scopes dropped whole by the program (memory budget spent): neither begin nor end
    /// recorded, counted per scope.
    pub dropped_scopes: u64,
    /// Scopes open on threads when the capture started: not in it, counted per scope.
    pub in_flight_at_start: u64,
    /// Scopes open across a loss after which ends could not be trusted to pair (a
    /// version 1 capture with drops): discarded, not counted.
    pub cut_at_losses: u64,
    /// Futures and spans whose life the capture holds one end of (alive when it ended, or
    /// the other end dropped or outside the range): no wall time.
    pub async_unpaired: u64,
}

impl Losses {
    /// Returns true if and only if nothing at all was lost or left incomplete.
    pub fn is_empty(&self) -> bool {
        *self
            == Losses {
                evicted: self.evicted,
                ..Losses::default()
            }
    }
}
