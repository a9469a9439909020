//! [`Collector::finish`]: the summary assembled from what the collector gathered, durations
//! converted at the latest calibration, each thread's state let go as its row is made.

use super::*;

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
        let ns_per_tick = 1e9 / clock.ticks_per_second;
        let ns = |t: u64| (t as f64 * ns_per_tick).round() as u64;
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
        // A range: its length within the capture, and the calls crossing its edges (those
        // still open at its end among them, rather than "open at the end").
        let range = self.range.map(|(from, until)| {
            let at = |t: u64| ns(t.saturating_sub(process.start_ticks).min(wall_ticks));
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
            None => ns(wall_ticks),
        };
        let scope_meta = |id: u64| {
            let s = meta.scope(id);
            (
                meta.scope_name(id).into_owned(),
                s.map_or(ScopeKind::Scope, |s| s.kind),
                s.map(|s| s.file.to_owned()).unwrap_or_default(),
                s.map_or(0, |s| s.line),
            )
        };
        // The fields every row has, from a row's counts; the whole-capture rows add the
        // distribution, %wall and clock errors.
        let base_row = |id: u64, calls: u64, outer: u64, incl: u64, self_ticks: u64, max: u64| {
            let (name, kind, file, line) = scope_meta(id);
            ScopeRow {
                id,
                name,
                kind,
                file,
                line,
                calls,
                outer_calls: outer,
                total_ns: ns(incl),
                self_ns: ns(self_ticks),
                mean_ns: (outer > 0)
                    .then(|| (incl as f64 * ns_per_tick / outer as f64).round() as u64),
                min_ns: None,
                p50_ns: None,
                p90_ns: None,
                p99_ns: None,
                max_ns: (outer > 0).then(|| ns(max)),
                wall_percent: 0.0,
                clock_errors: 0,
                dropped: 0,
                in_flight_at_start: 0,
                wall: None,
            }
        };
        // Sized first: rows are most of a report of many scopes.
        let mut scopes = Vec::with_capacity(self.rows.iter().filter(|r| r.calls > 0).count());
        scopes.extend(self.rows.iter().filter(|r| r.calls > 0).map(|r| {
            let has = r.outer > 0;
            let q = |q: f64| {
                r.hist
                    .quantile(q)
                    .filter(|_| has)
                    .map(|v| ns(v.clamp(r.min, r.max)))
            };
            ScopeRow {
                min_ns: has.then(|| ns(r.min)),
                p50_ns: q(0.5),
                p90_ns: q(0.9),
                p99_ns: q(0.99),
                wall_percent: if wall_ns > 0 {
                    ns(r.incl) as f64 * 100.0 / wall_ns as f64
                } else {
                    0.0
                },
                clock_errors: r.clock_errors,
                ..base_row(r.id, r.calls, r.outer, r.incl, r.self_ticks, r.max)
            }
        }));
        // What the program dropped whole or had open at the start, by scope: on its row,
        // or on a row of its own if none of its calls is in the capture.
        for (by_id, dropped) in [
            (meta.dropped_scopes(), true),
            (meta.in_flight_at_start(), false),
        ] {
            for (&id, &n) in by_id {
                let i = match scopes.iter().position(|r| r.id == id) {
                    Some(i) => i,
                    None => {
                        scopes.push(base_row(id, 0, 0, 0, 0, 0));
                        scopes.len() - 1
                    }
                };
                let r = &mut scopes[i];
                if dropped {
                    r.dropped = r.dropped.saturating_add(n);
                } else {
                    r.in_flight_at_start = r.in_flight_at_start.saturating_add(n);
                }
            }
        }
        // The lives of futures and spans: on their call site's row (a span never entered has
        // a row of its own).
        for (&id, l) in &self.asyncs.lives {
            let i = match scopes.iter().position(|r| r.id == id) {
                Some(i) => i,
                None => {
                    scopes.push(base_row(id, 0, 0, 0, 0, 0));
                    scopes.len() - 1
                }
            };
            let q = |q: f64| ns(l.hist.quantile(q).unwrap_or(0).clamp(l.min, l.max));
            scopes[i].wall = (l.count > 0).then(|| WallRow {
                count: l.count,
                cancelled: l.cancelled,
                total_ns: ns(l.total),
                min_ns: ns(l.min),
                p50_ns: q(0.5),
                p99_ns: q(0.99),
                max_ns: ns(l.max),
                clock_errors: l.clock_errors,
            });
        }
        sort_rows(&mut scopes);

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
                        .map(|r| base_row(r.id, r.calls, r.outer, r.incl, r.self_ticks, r.max)),
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

        let mut frames = Vec::new();
        let mut counters = Vec::new();
        for m in &self.markers {
            let name = meta.marker_name(m.id).into_owned();
            if m.marks > 0 {
                let has = m.frames > 0;
                frames.push(FrameRow {
                    id: m.id,
                    name: name.clone(),
                    marks: m.marks,
                    frames: m.frames,
                    min_ns: has.then(|| ns(m.min)),
                    mean_ns: has
                        .then(|| (m.sum as f64 * ns_per_tick / m.frames as f64).round() as u64),
                    p99_ns: m.hist.quantile(0.99).map(|v| ns(v.clamp(m.min, m.max))),
                    max_ns: has.then(|| ns(m.max)),
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

        let lost_events = self.lost();
        let (sink_events, sink_chunks) = meta.sink_loss();
        let losses = Losses {
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
        };
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
                    at_ns: ns(t.wrapping_sub(process.start_ticks).min(i64::MAX as u64)),
                    thread: *th,
                    thread_name: meta.thread_name(*th).into_owned(),
                    text: text.clone(),
                })
                .collect(),
            losses,
            warnings: Vec::new(),
        }
    }
}
