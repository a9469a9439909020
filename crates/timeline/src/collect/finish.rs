//! [`Collector::finish`]: the summary assembled from what the collector gathered, durations
//! converted at the latest calibration, each thread's state let go as its row is made.

use super::*;

/// What every step of [`Collector::finish`] converts with: ticks to ns at the latest
/// calibration, and the capture's definitions for the rows' names.
struct Convert<'a> {
    meta: &'a Meta,
    ns_per_tick: f64,
}

impl Convert<'_> {
    /// `t` ticks in ns.
    fn ns(&self, t: u64) -> u64 {
        (t as f64 * self.ns_per_tick).round() as u64
    }

    /// The mean of `n` durations adding up to `ticks`, in ns.
    fn mean(&self, ticks: u64, n: u64) -> u64 {
        (ticks as f64 * self.ns_per_tick / n as f64).round() as u64
    }

    /// The fields every row has, from a row's counts; the whole-capture rows add the
    /// distribution, %wall and clock errors.
    fn scope_row(
        &self,
        id: u64,
        calls: u64,
        outer: u64,
        incl: u64,
        self_ticks: u64,
        max: u64,
    ) -> ScopeRow {
        let s = self.meta.scope(id);
        ScopeRow {
            id,
            name: self.meta.scope_name(id).into_owned(),
            kind: s.map_or(ScopeKind::Scope, |s| s.kind),
            file: s.map(|s| s.file.to_owned()).unwrap_or_default(),
            line: s.map_or(0, |s| s.line),
            calls,
            outer_calls: outer,
            total_ns: self.ns(incl),
            self_ns: self.ns(self_ticks),
            mean_ns: (outer > 0).then(|| self.mean(incl, outer)),
            min_ns: None,
            p50_ns: None,
            p90_ns: None,
            p99_ns: None,
            max_ns: (outer > 0).then(|| self.ns(max)),
            wall_percent: 0.0,
            clock_errors: 0,
            dropped: 0,
            in_flight_at_start: 0,
            wall: None,
            allocs: None,
        }
    }

    /// The position of scope `id`'s row in `scopes`, a row of its own added if it has none.
    fn row_index(&self, scopes: &mut Vec<ScopeRow>, id: u64) -> usize {
        match scopes.iter().position(|r| r.id == id) {
            Some(i) => i,
            None => {
                scopes.push(self.scope_row(id, 0, 0, 0, 0, 0));
                scopes.len() - 1
            }
        }
    }
}

impl Collector {
    /// The summary, with durations converted at the latest calibration in `meta`.
    pub fn finish(
        mut self,
        name: &str,
        process: &Process,
        meta: &Meta,
        end: Option<&End>,
    ) -> Summary {
        let clock = meta.clock();
        let c = Convert {
            meta,
            ns_per_tick: 1e9 / clock.ticks_per_second,
        };
        let (wall_ns, range) = self.wall(&c, process, end);
        let scopes = self.scope_rows(&c, wall_ns);
        // Before the thread rows, which let each thread's state go as its row is made.
        let lost_events = self.lost();
        let threads = self.thread_rows(&c, end);
        let (frames, counters) = self.marker_rows(&c);
        let losses = self.losses(meta, end, &threads, lost_events);
        Summary {
            file: name.to_owned(),
            program: process.program.clone(),
            pid: process.pid,
            clock_source: process.clock.clone(),
            ticks_per_second: clock.ticks_per_second,
            calibrations: meta.clock_updates(),
            wall_ns,
            range,
            complete: end.is_some(),
            recorded_events: end.map(|e| e.events),
            events: self.events,
            loss_markers: self.loss_markers,
            event_chunks: self.event_chunks,
            scopes,
            threads,
            per_thread: self.per_thread,
            frames,
            counters,
            messages: self.messages,
            samples: self.samples,
            sample_stacks: meta.stack_count(),
            first_messages: self
                .first_messages
                .iter()
                .map(|(t, th, _, text)| Message {
                    at_ns: c.ns(t.wrapping_sub(process.start_ticks).min(i64::MAX as u64)),
                    thread: *th,
                    thread_name: meta.thread_name(*th).into_owned(),
                    text: text.clone(),
                })
                .collect(),
            losses,
            warnings: Vec::new(),
        }
    }

    /// The wall time summarised, in ns, and the range if the summary is of one: its length
    /// within the capture, and the calls crossing its edges (those still open at its end
    /// among them, rather than "open at the end").
    fn wall(&self, c: &Convert<'_>, process: &Process, end: Option<&End>) -> (u64, Option<Range>) {
        let last = self
            .threads
            .iter()
            .filter(|t| t.seen)
            .map(|t| t.last.wrapping_sub(process.start_ticks) as i64)
            .max()
            .unwrap_or(0)
            .max(0) as u64;
        let wall_ticks = match end {
            Some(e) => e.end_ticks.saturating_sub(process.start_ticks),
            None => last,
        };
        let range = self.range.map(|(from, until)| {
            let at = |t: u64| c.ns(t.saturating_sub(process.start_ticks).min(wall_ticks));
            let open: u64 = self
                .threads
                .iter()
                .map(|t| t.stack.len() as u64 + t.overflow)
                .sum();
            Range {
                from_ns: at(from),
                until_ns: at(until),
                crossing: self.crossing + open,
            }
        });
        let wall_ns = match &range {
            Some(r) => r.until_ns - r.from_ns,
            None => c.ns(wall_ticks),
        };
        (wall_ns, range)
    }

    /// A row per scope with calls, with its distribution; then what the program dropped
    /// whole, had open at the start, and the lives of futures and spans, each on its scope's
    /// row (or a row of its own). Largest total first.
    fn scope_rows(&self, c: &Convert<'_>, wall_ns: u64) -> Vec<ScopeRow> {
        // Sized first: rows are most of a report of many scopes.
        let mut scopes = Vec::with_capacity(self.rows.iter().filter(|r| r.calls > 0).count());
        scopes.extend(self.rows.iter().filter(|r| r.calls > 0).map(|r| {
            let has = r.outer > 0;
            let q = |q: f64| {
                r.hist
                    .quantile(q)
                    .filter(|_| has)
                    .map(|v| c.ns(v.clamp(r.min, r.max)))
            };
            ScopeRow {
                min_ns: has.then(|| c.ns(r.min)),
                p50_ns: q(0.5),
                p90_ns: q(0.9),
                p99_ns: q(0.99),
                wall_percent: if wall_ns > 0 {
                    c.ns(r.incl) as f64 * 100.0 / wall_ns as f64
                } else {
                    0.0
                },
                clock_errors: r.clock_errors,
                ..c.scope_row(r.id, r.calls, r.outer, r.incl, r.self_ticks, r.max)
            }
        }));
        // What the program dropped whole or had open at the start, by scope: on its row,
        // or on a row of its own if none of its calls is in the capture.
        for (by_id, dropped) in [
            (c.meta.dropped_scopes(), true),
            (c.meta.in_flight_at_start(), false),
        ] {
            for (&id, &n) in by_id {
                let i = c.row_index(&mut scopes, id);
                let r = &mut scopes[i];
                if dropped {
                    r.dropped = r.dropped.saturating_add(n);
                } else {
                    r.in_flight_at_start = r.in_flight_at_start.saturating_add(n);
                }
            }
        }
        // Allocations by scope (version 4) are the whole capture's: a summary of a range
        // leaves them out rather than show what the range does not hold.
        if self.range.is_none() {
            for (&id, &counts) in c.meta.allocs() {
                let i = c.row_index(&mut scopes, id);
                scopes[i].allocs = Some(counts);
            }
        }
        // The lives of futures and spans: on their call site's row (a span never entered has
        // a row of its own).
        for (&id, l) in &self.asyncs.lives {
            let i = c.row_index(&mut scopes, id);
            let q = |q: f64| c.ns(l.hist.quantile(q).unwrap_or(0).clamp(l.min, l.max));
            scopes[i].wall = (l.count > 0).then(|| WallRow {
                count: l.count,
                cancelled: l.cancelled,
                total_ns: c.ns(l.total),
                min_ns: c.ns(l.min),
                p50_ns: q(0.5),
                p99_ns: q(0.99),
                max_ns: c.ns(l.max),
                clock_errors: l.clock_errors,
            });
        }
        sort_rows(&mut scopes);
        scopes
    }

    /// A row per thread, by index: those that recorded events (each thread's state let go as
    /// its row is made), then those the metadata or the end record name but that recorded
    /// none.
    fn thread_rows(&mut self, c: &Convert<'_>, end: Option<&End>) -> Vec<ThreadRow> {
        let meta = c.meta;
        // The end record's count per thread (its first entry for an index), looked up by
        // binary search: an end record may list many threads.
        let mut end_threads: Vec<(u64, u64)> = end.map(|e| e.threads.clone()).unwrap_or_default();
        end_threads.sort_by_key(|t| t.0);
        end_threads.dedup_by_key(|t| t.0);
        let end_dropped = |index: u64| {
            end_threads
                .binary_search_by_key(&index, |t| t.0)
                .ok()
                .map(|i| end_threads[i].1)
        };
        // Each thread's state is let go as its row is made (from the last; the list shrinks as
        // it goes): a capture of many threads holds one of the two lists at a time, not both.
        let mut threads: Vec<ThreadRow> = Vec::new();
        while let Some(t) = self.threads.pop() {
            if self.threads.len() % 4096 == 0 {
                self.threads.shrink_to_fit();
            }
            threads.push({
                let light = t.rows.as_ref().map_or(&[][..], |r| &r.light);
                let mut rows = Vec::with_capacity(light.iter().filter(|r| r.calls > 0).count());
                rows.extend(
                    light
                        .iter()
                        .filter(|r| r.calls > 0)
                        .map(|r| c.scope_row(r.id, r.calls, r.outer, r.incl, r.self_ticks, r.max)),
                );
                sort_rows(&mut rows);
                ThreadRow {
                    index: t.index,
                    tid: meta.thread(t.index).map(|d| d.tid),
                    name: meta.thread_name(t.index).into_owned(),
                    events: t.events,
                    lost_events: t.lost,
                    dropped: end_dropped(t.index).unwrap_or(t.lost),
                    open_at_end: if self.range.is_some() {
                        0
                    } else {
                        t.stack.len() as u64 + t.overflow
                    },
                    scopes: rows,
                }
            });
        }
        // Threads the metadata or the end record name but that recorded no events.
        let mut extra: Vec<u64> = meta
            .threads()
            .map(|t| t.index)
            .chain(end.into_iter().flat_map(|e| e.threads.iter().map(|t| t.0)))
            .filter(|&i| self.tindex.get(i).is_none())
            .collect();
        extra.sort_unstable();
        extra.dedup();
        for index in extra {
            threads.push(ThreadRow {
                index,
                tid: meta.thread(index).map(|d| d.tid),
                name: meta.thread_name(index).into_owned(),
                events: 0,
                lost_events: 0,
                dropped: end_dropped(index).unwrap_or(0),
                open_at_end: 0,
                scopes: Vec::new(),
            });
        }
        // Indexes are unique: an unstable sort, which needs no buffer.
        threads.sort_unstable_by_key(|t| t.index);
        threads
    }

    /// The frame statistics and the counter statistics, each by name.
    fn marker_rows(&self, c: &Convert<'_>) -> (Vec<FrameRow>, Vec<CounterRow>) {
        let mut frames = Vec::new();
        let mut counters = Vec::new();
        for m in &self.markers {
            let name = c.meta.marker_name(m.id).into_owned();
            if m.marks > 0 {
                let has = m.frames > 0;
                frames.push(FrameRow {
                    id: m.id,
                    name: name.clone(),
                    marks: m.marks,
                    frames: m.frames,
                    min_ns: has.then(|| c.ns(m.min)),
                    mean_ns: has.then(|| c.mean(m.sum, m.frames)),
                    p99_ns: m.hist.quantile(0.99).map(|v| c.ns(v.clamp(m.min, m.max))),
                    max_ns: has.then(|| c.ns(m.max)),
                });
            }
            if m.values > 0 {
                counters.push(CounterRow {
                    id: m.id,
                    name,
                    count: m.values,
                    min: m.vmin,
                    max: m.vmax,
                    last: m.last,
                });
            }
        }
        frames.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
        counters.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
        (frames, counters)
    }

    /// Every loss, from the collector's counts (`lost_events`: the threads' loss events), the
    /// metadata's, the end record's and the threads' rows.
    fn losses(
        &self,
        meta: &Meta,
        end: Option<&End>,
        threads: &[ThreadRow],
        lost_events: u64,
    ) -> Losses {
        let (sink_events, sink_chunks) = meta.sink_loss();
        Losses {
            dropped: end.map_or(lost_events, |e| e.dropped.max(lost_events)),
            undelivered: end.map_or(sink_events, |e| e.undelivered.max(sink_events)),
            undelivered_chunks: sink_chunks,
            evicted: end.map_or(0, |e| e.evicted),
            abandoned: self.abandoned,
            unmatched_ends: self.unmatched,
            open_at_end: threads.iter().map(|t| t.open_at_end).sum(),
            cut_at_gaps: self.cut,
            too_deep: self.too_deep,
            dropped_scopes: meta
                .dropped_scopes()
                .values()
                .fold(0, |a, n| a.saturating_add(*n)),
            in_flight_at_start: meta
                .in_flight_at_start()
                .values()
                .fold(0, |a, n| a.saturating_add(*n)),
            cut_at_losses: self.cut_at_losses,
            async_unpaired: self.asyncs.unpaired(),
        }
    }
}
