//! The perf source's task clocks in CPU-clock terms: steal time taken out, per thread.

use super::*;

impl Poller {
    /// Reads, for every thread on a perf event, its CPU clock and its event's count
    /// together, so that a thread that has exited by the time it is disarmed still has its
    /// task clock put in CPU-clock terms by its own ratio ([`Self::task_clock_to_cpu`]).
    /// Every poll: what a thread ran after its last reading is put in CPU-clock terms at
    /// that reading's ratio, which need not hold for what came after. Read every 100 ms, a
    /// profile beside two busy loops held 673 ms of the 645 ms its process used, the excess
    /// in the two threads that had exited (their work known to be 330 ms, held 359 ms).
    /// Two system calls a thread, for the threads that ran between their last two readings
    /// (an idle one has nothing to put in other terms; one that wakes is read again at the
    /// next full reading).
    /// With `full` (every [`READ_TASK_CLOCK_EVERY`] polls), every thread, and the kernel's
    /// user/system split of each thread that ran since the last full reading (a file read
    /// each), and which of them ran, for [`Poller::move_blocking_threads_to_rings`].
    pub(super) fn read_task_clocks(&mut self, full: bool) {
        for (&tid, a) in &self.armed {
            let (Some(a @ (timer::Armed::Perf { .. } | timer::Armed::Ring { .. })), Some(&at)) =
                (a, self.armed_at.get(&tid))
            else {
                continue;
            };
            if !full && !self.running.contains(&tid) {
                continue;
            }
            let (Some(now), Some(count)) = (timer::thread_cpu_ns(tid), timer::perf_count(a)) else {
                continue;
            };
            let cpu = now.saturating_sub(at);
            let prev = self.perf_seen.insert(tid, (cpu, count)).unwrap_or((0, 0));
            if cpu > prev.0 {
                self.ran_since_full.insert(tid);
                self.running.insert(tid);
            } else {
                self.running.remove(&tid);
            }
            self.perf_seen_sum.0 += cpu.saturating_sub(prev.0);
            self.perf_seen_sum.1 += count.saturating_sub(prev.1);
        }
        if !full {
            return;
        }
        // Only a thread that ran since the last full reading has a new user/system split,
        // and only it may have blocked the signal while running: a file read each, not one
        // for every idle thread every 100 ms.
        for (&tid, a) in &self.armed {
            let Some(a @ (timer::Armed::Perf { .. } | timer::Armed::Ring { .. })) = a else {
                continue;
            };
            if !self.ran_since_full.contains(&tid) && self.times_seen.contains_key(&tid) {
                continue;
            }
            if let Some(t) = procfs::thread_times(tid) {
                self.times_seen.insert(tid, t);
            }
            if matches!(a, timer::Armed::Perf { .. }) && self.ran_since_full.contains(&tid) {
                self.ran.push(tid);
            }
        }
        self.ran_since_full.clear();
    }

    /// A thread's perf task-clock count, in its CPU clock's terms. The task clock runs
    /// whenever the thread is scheduled in, including the time a hypervisor gave the virtual
    /// CPU to another guest (steal time); the thread's CPU clock, getrusage, `time` and every
    /// other profiler leave that out (the kernel's CONFIG_PARAVIRT_TIME_ACCOUNTING). On a busy
    /// host the two differed by a quarter. A live thread's CPU clock is read directly; an
    /// exited one's count is scaled by the ratio of its last reading, or, without one, of all
    /// readings.
    pub(super) fn task_clock_to_cpu(&self, tid: i32, count: u64) -> u64 {
        if let (Some(&at), Some(now)) = (self.armed_at.get(&tid), timer::thread_cpu_ns(tid)) {
            return now.saturating_sub(at).min(count);
        }
        task_clock_to_cpu(count, self.perf_seen.get(&tid).copied(), self.perf_seen_sum)
    }
}

/// Every how many polls (of 10 ms) the perf source reads its threads' user/system split
/// (their CPU clocks and counts are read at every poll).
pub(super) const READ_TASK_CLOCK_EVERY: u64 = 10;

/// `count` of a perf task clock in CPU-clock terms, given the thread's last reading (CPU time
/// since armed, count) and the sums of all threads' readings: steal time is taken out at the
/// rate it was seen, the thread's own where it was read, and never more than was counted.
pub(super) fn task_clock_to_cpu(count: u64, seen: Option<(u64, u64)>, all: (u64, u64)) -> u64 {
    let ratio = |(cpu, n): (u64, u64)| (n > 0).then(|| (cpu as f64 / n as f64).min(1.0));
    let cpu = match seen {
        // What it used up to its reading is known; what came after, at its own ratio.
        Some((cpu, n)) if n > 0 && n <= count => {
            cpu as f64 + (count - n) as f64 * ratio((cpu, n)).unwrap_or(1.0)
        }
        _ => count as f64 * ratio(all).unwrap_or(1.0),
    };
    (cpu.round() as u64).min(count)
}

/// The part of `cpu` (ns) a thread spent in the kernel, by the kernel's split of its time so
/// far (user, system ticks); 0 without one.
pub(crate) fn kernel_part(cpu: u64, times: Option<(u64, u64)>) -> u64 {
    match times {
        Some((user, system)) if user + system > 0 => {
            (cpu as u128 * system as u128 / (user + system) as u128) as u64
        }
        _ => 0,
    }
}
