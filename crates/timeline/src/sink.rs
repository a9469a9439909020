//! What an export receives from the replay: the [`Sink`] trait it implements, how a scope was
//! closed ([`Close`]) and the point events ([`Instant`]).
//!
//! Apart from the replay that drives it: [`Filtered`](crate::filter::Filtered) is a sink in
//! front of an export's sink, and the replay feeds either, so both depend on this module and
//! neither on the other.

use std::io;

use crate::tscap::{AsyncWhat, Meta};

/// How a scope was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Close {
    /// By its own end.
    Normal,
    /// By the end of a scope it is nested in (its own end never came: a leaked guard).
    Abandoned,
    /// Still open when the capture ends: closed at its thread's last timestamp.
    Unfinished,
    /// Its thread's next chunk no longer lists it: it ended in chunks missing from the
    /// capture (or after a loss its end cannot be told from another call's); closed at the
    /// thread's last timestamp before the gap.
    Cut,
    /// Still open at the end of the window an export was asked for: closed there.
    Clipped,
}

impl Close {
    /// The marker exports attach to a scope closed other than by its own end.
    pub(crate) fn label(self) -> Option<&'static str> {
        match self {
            Close::Normal => None,
            Close::Abandoned => Some("abandoned"),
            Close::Unfinished => Some("unfinished"),
            Close::Cut => Some("cut"),
            Close::Clipped => Some("clipped"),
        }
    }
}

/// A point event.
pub(crate) enum Instant<'a> {
    /// A frame mark of this marker id.
    Frame(u64),
    /// A message.
    Message(&'a str),
    /// This many events dropped.
    Lost(u64),
    /// A future's or span's life begins or ends (format version 3): scope id, async id.
    Async(u64, u64, AsyncWhat),
}

/// What an export does with the replayed events. Thread arguments are thread indexes.
pub(crate) trait Sink {
    /// A thread's first appearance.
    fn thread(&mut self, _meta: &Meta, _thread: u64) -> io::Result<()> {
        Ok(())
    }
    fn begin(&mut self, meta: &Meta, thread: u64, id: u64, ns: u64) -> io::Result<()>;
    /// Ends are reported innermost first; `begin` is the ns its begin was reported at.
    #[allow(clippy::too_many_arguments)]
    fn end(
        &mut self,
        meta: &Meta,
        thread: u64,
        id: u64,
        begin: u64,
        end: u64,
        how: Close,
    ) -> io::Result<()>;
    /// A frame mark, message or loss (exports of scopes alone ignore them).
    fn instant(
        &mut self,
        _meta: &Meta,
        _thread: u64,
        _ns: u64,
        _what: Instant<'_>,
    ) -> io::Result<()> {
        Ok(())
    }
    /// A CPU sample of thread `tid` (its OS id) with stack `stack`, recorded by thread
    /// `recorder` (the sampler's); exports without a place for samples ignore them.
    fn sample(
        &mut self,
        _meta: &Meta,
        _recorder: u64,
        _ns: u64,
        _tid: u64,
        _stack: u64,
    ) -> io::Result<()> {
        Ok(())
    }
    /// The replay is over at `ns` (the last thread's last event): lives still open end
    /// there (exports that draw them close them, marked unfinished).
    fn finish(&mut self, _meta: &Meta, _ns: u64) -> io::Result<()> {
        Ok(())
    }
    /// A counter value (exports of scopes alone ignore them).
    fn counter(
        &mut self,
        _meta: &Meta,
        _thread: u64,
        _id: u64,
        _ns: u64,
        _value: f64,
    ) -> io::Result<()> {
        Ok(())
    }
}
