//! The poller's perf rings: reading them, and moving threads between rings and signals as they block and unblock.

use super::*;

impl Poller {
    /// Reads the samples of every thread on a ring into the table.
    pub(super) fn read_rings(&mut self, shared: &Shared) {
        if self.out.ring_threads == 0 && self.out.stack.threads == 0 && self.out.own_chain == 0 {
            return;
        }
        if let Some(cfi) = self.rings.cfi.as_mut() {
            cfi.new_pass();
        }
        for a in self.armed.values().flatten() {
            if matches!(a, timer::Armed::Ring { .. }) && timer::still_ours(a) {
                drain_ring(a, &mut self.rings, &mut self.out.ring_lost);
            }
        }
        self.flush_ring_samples(shared);
    }

    /// Records the samples read from rings into the table: each one period of its thread
    /// (the thread's total is its exact count, as for the signalled perf events), no scopes
    /// (the thread was not interrupted to read them).
    pub(super) fn flush_ring_samples(&mut self, shared: &Shared) {
        for RingStack { tid, ips, walk } in self.rings.samples.drain(..) {
            let (ips, cut) = match walk {
                // As the handler's walk: a return address outside every executable mapping
                // ends the chain (the kernel's frame-pointer walk read it from code without
                // frame pointers).
                Walk::Chain => {
                    let valid = shared
                        .ranges
                        .with(|v| {
                            1 + ips[1..]
                                .iter()
                                .take_while(|&&ip| v.code_range(ip).is_some())
                                .count()
                        })
                        .unwrap_or(ips.len());
                    (&ips[..valid], false)
                }
                // The tables' walk stops at such an address by itself, and knows mappings
                // newer than the handler's snapshot (a `dlopen` since).
                Walk::Tables { cut } => (&ips[..], cut),
            };
            let n = ips.len().min(crate::unwind::MAX_FRAMES);
            self.out.ring_sampled += 1;
            shared.store.record(&crate::table::Raw {
                tid,
                truncated: cut || ips.len() > n,
                frames: &ips[..n],
                scopes: &[],
                count: 1,
                weight: self.period_ns,
            });
        }
        if let Some(cfi) = &self.rings.cfi {
            self.out.stack.walked = cfi.walked;
            self.out.stack.truncated = cfi.truncated;
        }
    }

    /// How long the drain thread waits for its first poll: sooner while a thread is on a
    /// first ring, which holds only a few samples.
    pub fn first_wait(&self, every: Duration) -> Duration {
        let first = self.armed.values().flatten().any(timer::is_first_ring);
        match first {
            true => every.min(timer::FIRST_POLL),
            false => every,
        }
    }

    /// Puts a full ring in place of each first ring (see `timer::FIRST_STACK_RING_PAGES`),
    /// as [`Self::move_blocking_threads_to_rings`] does: the old event's count is kept, as
    /// at a thread's end, and the new one counts from its arming.
    pub(super) fn replace_first_rings(&mut self, shared: &Shared) {
        // The start's own poll (which counts itself before reading the rings) armed them.
        if self.polls < 2 {
            return;
        }
        let first: Vec<i32> = self
            .armed
            .iter()
            .filter(|(_, a)| a.as_ref().is_some_and(timer::is_first_ring))
            .map(|(&tid, _)| tid)
            .collect();
        for tid in first {
            // Kept on its first ring if no full one can be had: what finds no room there is
            // counted as lost.
            let _ = self.move_to_ring(shared, tid, true);
        }
    }

    /// Arms a full ring for `tid` (`stack`: a stack ring, else a call-chain one), counting
    /// from now, then closes its old event (its count kept, as at a thread's end, and what
    /// its ring held read). If the new ring cannot be had (the per-user limit on perf ring
    /// memory, say), the old event stays. `None` if the thread was not armed or has ended.
    pub(super) fn move_to_ring(
        &mut self,
        shared: &Shared,
        tid: i32,
        stack: bool,
    ) -> Option<std::io::Result<()>> {
        if !matches!(self.armed.get(&tid), Some(Some(_))) {
            return None;
        }
        let r = match timer::arm_ring(tid, self.period_ns, stack) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        self.replace_armed(shared, tid, r).map(Ok)
    }

    /// Puts the newly armed `r` in place of `tid`'s event, which is closed (its count kept,
    /// as at a thread's end, and what its ring held read); `r` counts from now. `None` if
    /// the thread ended meanwhile (`r` is then disarmed).
    pub(super) fn replace_armed(
        &mut self,
        shared: &Shared,
        tid: i32,
        r: timer::Armed,
    ) -> Option<()> {
        if let Some(Some(old)) = self.armed.remove(&tid) {
            self.disarm(tid, old);
        }
        // The new event's count is taken from here on: what the thread ran while both were
        // armed is the old one's.
        let Some(now) = timer::thread_cpu_ns(tid) else {
            // Ended meanwhile: its time was counted by the disarm.
            timer::disarm(r);
            self.armed.insert(tid, None);
            return None;
        };
        if let timer::Armed::Perf { fd, .. } | timer::Armed::Ring { fd, .. } = &r {
            self.perf_armed += 1;
            if let Some(c) = shared.perf_tid.get(*fd as usize) {
                c.store(tid as u32, Relaxed);
            }
        }
        self.armed_at.insert(tid, now);
        self.armed.insert(tid, Some(r));
        Some(())
    }

    /// A thread on a signalled perf event that has blocked the signal since: its event is
    /// closed (its count kept, as at its end) and a ring takes over.
    pub(super) fn move_blocking_threads_to_rings(&mut self, shared: &Shared) {
        let mut ran = std::mem::take(&mut self.ran);
        let blocking: Vec<i32> = ran
            .drain(..)
            .filter(|&t| procfs::signal_blocked(t, self.signal))
            .collect();
        self.ran = ran;
        for tid in blocking {
            if let Some(Ok(())) = self.move_to_ring(shared, tid, false) {
                self.out.ring_threads += 1;
                self.blocked_rings.insert(tid, self.polls);
            }
        }
    }

    /// A thread put on a ring because it blocked the signal, that blocks it no more: back
    /// on the signalled event, so that its samples carry scope labels and go on a capture's
    /// timeline again. A thread can be seen blocking it for a moment only: glibc starts
    /// every thread with all signals blocked until its start routine runs (a thread found
    /// by the poll then, on a busy machine, was put on a ring for good), and a program may
    /// block signals around a short critical section. Threads put there in the last two
    /// polls are looked at every poll, the others with the task clocks (every 100 ms).
    pub(super) fn move_unblocking_threads_to_signals(&mut self, shared: &Shared) {
        if self.blocked_rings.is_empty() {
            return;
        }
        let all = self.polls % READ_TASK_CLOCK_EVERY == 0;
        let recent = self.polls.saturating_sub(2);
        let back: Vec<i32> = self
            .blocked_rings
            .iter()
            .filter(|&(_, &at)| all || at >= recent)
            .map(|(&tid, _)| tid)
            .filter(|&tid| procfs::thread_alive(tid) && !procfs::signal_blocked(tid, self.signal))
            .collect();
        for tid in back {
            self.blocked_rings.remove(&tid);
            if !matches!(self.armed.get(&tid), Some(Some(_))) {
                continue;
            }
            let first = self.first_expiry();
            let Ok(a) = timer::arm(self.source, tid, self.signal, self.period_ns, first) else {
                // Kept on its ring.
                continue;
            };
            if let Some(()) = self.replace_armed(shared, tid, a) {
                self.out.ring_threads_back += 1;
            }
        }
    }
}

/// What reading the rings keeps between reads.
#[derive(Default)]
pub(crate) struct Rings {
    /// Samples read, not yet in the table.
    pub samples: Vec<RingStack>,
    /// The walker of stack samples, made at the first one (a process that takes none, a
    /// short program exec'd under `record`, never builds its rule cache), and scratch space
    /// for a record.
    pub cfi: Option<Box<crate::cfi::Cfi>>,
    record: Vec<u8>,
}

/// A sample read from a ring: its thread, its stack (the pc, then return addresses), and
/// how that was walked.
pub(crate) struct RingStack {
    pub tid: u32,
    pub ips: Vec<u64>,
    pub walk: Walk,
}

pub(crate) enum Walk {
    /// By the kernel, by frame pointers.
    Chain,
    /// By the unwind tables; `cut` where it ran past the copied stack or the frame limit.
    Tables { cut: bool },
}

/// Moves a ring's samples into `rings.samples`, walking the stack
/// samples by the unwind tables, and counts what the ring lost.
pub(crate) fn drain_ring(a: &timer::Armed, rings: &mut Rings, lost: &mut u64) {
    let Rings {
        samples,
        cfi,
        record,
    } = rings;
    *lost += timer::drain_ring(a, record, |tid, sample| match sample {
        timer::RingSample::Chain(ips) => samples.push(RingStack {
            tid,
            ips: ips.to_vec(),
            walk: Walk::Chain,
        }),
        timer::RingSample::Stack(regs, stack) => {
            let mut ips = Vec::new();
            let cfi = cfi.get_or_insert_with(Default::default);
            let cut = cfi.unwind(regs, stack, crate::unwind::MAX_FRAMES, &mut ips);
            if !ips.is_empty() {
                samples.push(RingStack {
                    tid,
                    ips,
                    walk: Walk::Tables { cut },
                });
            }
        }
    });
}
