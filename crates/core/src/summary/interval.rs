//! The interval reporter: every interval, one line per thread and scope active in it, in the
//! API-profiler format:
//!
//! ```text
//! TID 0x13bc time spent in "alloc": 7/1001 ms 0.7% 6481x
//! ```
//!
//! that is: inclusive time of the scope's outermost calls that *ended* in the interval, the
//! interval's measured length, their ratio, and the number of calls (re-entries included).
//! A scope longer than the interval shows up whole in the interval it ends in, so its share
//! can pass 100%. The lines are produced on a background thread (`tickscope-reporter`) from
//! relaxed reads of the threads' slots; measured threads do no I/O.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::config::Output;
use crate::scope::{callsite, registry};

struct State {
    interval: Option<Duration>,
    output: Output,
    running: bool,
    /// Bumped on every change, so the thread notices a new interval at once.
    generation: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    interval: None,
    output: Output::Stderr,
    running: false,
    generation: 0,
});
static WAKE: Condvar = Condvar::new();

fn lock() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The shortest interval: each one prints a line per thread and active scope, and a
/// shorter one floods the output (`TICKSCOPE_INTERVAL=1ns` printed 178,000 lines a second).
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// Sets the interval (`None`: off) and output; starts the reporter thread if needed. An
/// interval under [`MIN_INTERVAL`] is raised to it, with one warning per process.
pub(crate) fn configure(interval: Option<Duration>, output: Output) {
    let interval = interval.map(|i| {
        if i < MIN_INTERVAL {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                crate::sys::stderr::warn(&format!(
                    "interval {i:?} is shorter than {MIN_INTERVAL:?}: using {MIN_INTERVAL:?}"
                ))
            });
        }
        i.max(MIN_INTERVAL)
    });
    let mut s = lock();
    s.interval = interval;
    s.output = output;
    s.generation += 1;
    if interval.is_some() && !s.running {
        let spawned = crate::sys::thread::spawn_quiet(
            std::thread::Builder::new().name("tickscope-reporter".into()),
            &[],
            run,
        );
        match spawned {
            Ok(_) => s.running = true,
            Err(e) => {
                crate::sys::stderr::warn(&format!("could not start the interval reporter: {e}"))
            }
        }
    }
    WAKE.notify_all();
}

/// Previous readings per (thread serial, call-site id): (inclusive ticks, calls).
type Readings = HashMap<(u64, u32), (u64, u64)>;

fn run() {
    let mut prev = Readings::new();
    let mut last = Instant::now();
    let mut generation = lock().generation;
    loop {
        let (interval, output) = {
            let mut s = lock();
            loop {
                match s.interval {
                    Some(i) => break (i, s.output.clone()),
                    None => {
                        s = WAKE.wait(s).unwrap_or_else(|p| p.into_inner());
                        last = Instant::now();
                        generation = s.generation;
                    }
                }
            }
        };
        // Sleep until the interval has passed (or the settings change).
        let deadline = last + interval;
        {
            let mut s = lock();
            while Instant::now() < deadline && s.generation == generation {
                let left = deadline.saturating_duration_since(Instant::now());
                s = WAKE
                    .wait_timeout(s, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            if s.generation != generation {
                generation = s.generation;
                continue;
            }
        }
        if super::exiting() {
            return;
        }
        let now = Instant::now();
        let elapsed = now - last;
        last = now;
        let text = lines(&mut prev, elapsed);
        // Checked again: lines must not follow the exit summary.
        if text.is_empty() || super::exiting() {
            continue;
        }
        match &output {
            // A callback gets each line on its own, as documented.
            Output::Callback(_) => text.lines().for_each(|l| super::emit(&output, l, true)),
            _ => super::emit(&output, &text, true),
        }
    }
}

/// The lines for one interval of length `elapsed`, updating `prev`.
fn lines(prev: &mut Readings, elapsed: Duration) -> String {
    let mut current: Vec<(u64, u64, u32, u64, u64)> = Vec::new(); // serial, tid, id, incl, calls
    {
        let reg = registry::lock();
        for t in &reg.live {
            t.for_each_slot(|id, slot| {
                current.push((
                    t.serial.load(Relaxed),
                    t.tid.load(Relaxed),
                    id,
                    slot.incl.load(Relaxed),
                    slot.outer
                        .load(Relaxed)
                        .wrapping_add(slot.nested.load(Relaxed)),
                ));
            });
        }
    }
    let rate = crate::clock::rate();
    let interval_ms = elapsed.as_secs_f64() * 1e3;
    let table = callsite::table();
    let mut out = String::new();
    let mut next = Readings::with_capacity(current.len());
    for (serial, tid, id, incl, calls) in current {
        let (pi, pc) = prev.get(&(serial, id)).copied().unwrap_or((0, 0));
        next.insert((serial, id), (incl, calls));
        let dcalls = calls.wrapping_sub(pc);
        if dcalls == 0 {
            continue;
        }
        let ms = incl.wrapping_sub(pi) as f64 * 1e3 / rate;
        let name = table.get(id).map_or("?", |i| i.name);
        let _ = writeln!(out, "{}", line(tid, name, ms, interval_ms, dcalls));
    }
    *prev = next;
    out
}

/// One line: `TID 0x13bc time spent in "alloc": 7/1001 ms 0.7% 6481x`.
pub(crate) fn line(tid: u64, name: &str, ms: f64, interval_ms: f64, calls: u64) -> String {
    let pct = if interval_ms > 0.0 {
        ms * 100.0 / interval_ms
    } else {
        0.0
    };
    format!(
        "TID 0x{tid:x} time spent in \"{name}\": {}/{} ms {pct:.1}% {calls}x",
        ms.round() as u64,
        interval_ms.round() as u64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_has_the_api_profiler_format() {
        assert_eq!(
            line(0x13bc, "alloc", 7.2, 1001.4, 6481),
            "TID 0x13bc time spent in \"alloc\": 7/1001 ms 0.7% 6481x"
        );
    }
}
