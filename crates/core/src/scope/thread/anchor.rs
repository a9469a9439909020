//! The reference-clock anchors of a thread's scopes: taken every [`ANCHOR_PERIOD`] ticks of
//! scoped execution, logged by epoch, and what a long scope's exit checks its delta against
//! (the clock's anomaly guard). Off the common path: a refresh is one entry in 2^22 ticks, a
//! check one exit longer than `SUSPECT_TICKS`.

use super::*;

/// Anchors by epoch: the last 64 exactly, then every 64th and every 4096th epoch, so a scope
/// of any length finds an anchor taken before it began (at 1.4 ms per epoch the coarsest
/// level spans about six minutes of scoped execution; past that, the thread's first anchor).
pub(super) struct AnchorLog {
    levels: [[(u32, Bracket); 64]; 3],
    first: (u32, Bracket),
}

impl AnchorLog {
    pub(super) fn record(&mut self, epoch: u32, b: Bracket) {
        for (level, shift) in [0u32, 6, 12].into_iter().enumerate() {
            if epoch & ((1 << shift) - 1) == 0 {
                self.levels[level][((epoch >> shift) % 64) as usize] = (epoch, b);
            }
        }
        if self.first.0 == 0 {
            self.first = (epoch, b);
        }
    }

    /// The newest anchor taken no later than `epoch` began, and whether it is that epoch's
    /// own (then the scope began within one anchor period of it).
    pub(super) fn find(&self, epoch: u32) -> (Bracket, bool) {
        for (level, shift) in [0u32, 6, 12].into_iter().enumerate() {
            let e = epoch & !((1u32 << shift) - 1);
            let (stored, b) = self.levels[level][((e >> shift) % 64) as usize];
            if e != 0 && stored == e {
                return (b, level == 0);
            }
        }
        (self.first.1, self.first.0 == epoch)
    }
}

/// Takes a new anchor (a counter reading bracketed by the reference clock); returns its
/// reading, which becomes the scope's start, and its epoch.
#[cold]
#[inline(never)]
pub(super) fn refresh_anchor(
    s: &impl StackStore,
    stats: &ThreadStats,
    epoch: u32,
    clock: &impl Counter,
) -> (Ticks, u32) {
    let b = Bracket::read(clock);
    // Epoch 0 means "none"; wrapping after 2^32 anchors (two months of scoped execution) only
    // makes the oldest anchors unreachable, which the log treats as "use the first one".
    let epoch = epoch.wrapping_add(1).max(1);
    let mut log = stats.anchors.lock().unwrap_or_else(|p| p.into_inner());
    let log = log.get_or_insert_with(|| {
        crate::own::own(|| {
            Box::new(AnchorLog {
                levels: [[(0, Bracket::default()); 64]; 3],
                first: (0, Bracket::default()),
            })
        })
    });
    log.record(epoch, b);
    s.set_anchor(b.ticks, epoch);
    (b.ticks, epoch)
}

/// The anomaly guard for a long (or negative) delta: compare with the reference clock, read
/// now bracketing a fresh counter reading, from the anchor the scope began after. Returns
/// the delta to record; a clock error is counted in the scope's slot here.
#[cold]
#[inline(never)]
pub(super) fn check_long(stats: &ThreadStats, o: &Open, t1: Ticks, clock: &impl Counter) -> Ticks {
    let (dt, error) = check_long_inner(stats, o, t1, clock);
    if error {
        add(&o.slot.clock_errors, 1);
    }
    dt
}

fn check_long_inner(
    stats: &ThreadStats,
    o: &Open,
    t1: Ticks,
    clock: &impl Counter,
) -> (Ticks, bool) {
    let rate = clock.rate();
    let end = Bracket::read(clock);
    let found = stats
        .anchors
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|l| l.find(o.epoch));
    let Some((anchor, exact)) = found else {
        return (t1.wrapping_sub(o.t0), false); // no anchor: nothing to check against
    };
    // With the scope's own anchor, it began at most one anchor period after it; with an older
    // one, how long after is unknown, so only the upper bound (and the sign) can be checked.
    let lag = o.t0.wrapping_sub(anchor.ticks);
    let lag_ns = if lag > 1 << 62 {
        0
    } else {
        (lag as f64 * 1e9 / rate) as u64
    };
    let max_lag_ns = match (exact, lag) {
        (true, 0) => 0,
        (true, _) => (ANCHOR_PERIOD as f64 * 1e9 / rate) as u64,
        (false, _) => u64::MAX,
    };
    let c = check_interval(&anchor, o.t0, lag_ns, max_lag_ns, &end, rate);
    if !c.error && o.t0 <= t1 && t1 <= end.ticks {
        // The clocks agree, and the reading taken when the scope ended lies between its start
        // and the check's reading: keep it.
        (t1 - o.t0, false)
    } else {
        (c.ticks, c.error)
    }
}
