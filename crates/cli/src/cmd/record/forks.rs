//! The run's fork children that do not exec, sampled from outside as the program is: found as
//! the process tree grows, with no thread of tickscope's in them.
//!
//! A program the run execs samples itself (the library in it); a fork child that does not exec
//! runs no sampler of its own (one would cost a thread in every fork child, which a shell that
//! forks for each command pays at each fork). `record`'s sampling thread walks the tree from
//! the program every poll (`/proc/PID/task/TID/children`) and attaches to each new process
//! that is a fork child: its image (the start of its code and of its stack) is its parent's.
//! One that execs later is left to the program it exec'd, which holds its time from its start
//! (`[not sampled: before the profiler started]`): its samples here are dropped, never counted
//! twice. Decision: docs/decisions/0034-record-follows-fork-children-from-outside.md.

use std::collections::HashSet;

use tickscope::sampler::Attached;
use tickscope_sys::procfs;

use super::*;

/// A fork child sampled from outside.
pub(super) struct Followed {
    pub(super) pid: u32,
    attached: Attached,
    /// Its image when it was found: one that differs later means it exec'd.
    mark: (u64, u64),
}

/// The run's fork children, followed from outside (see the module docs).
pub(super) struct Forks {
    root: u32,
    hz: u32,
    /// Every process of the tree seen so far: each is judged once, when first seen.
    seen: HashSet<u32>,
    live: Vec<Followed>,
    ended: Vec<Followed>,
    /// Fork children followed until they exec'd: left to the programs they exec'd.
    pub(super) exec_left: u64,
    /// Fork children that could not be attached to, and the last reason.
    pub(super) failed: (u64, Option<String>),
}

impl Forks {
    pub(super) fn new(root: u32, hz: u32) -> Forks {
        Forks {
            root,
            hz,
            seen: HashSet::from([root]),
            live: Vec::new(),
            ended: Vec::new(),
            exec_left: 0,
            failed: (0, None),
        }
    }

    /// Polls the fork children followed (a child that exec'd is let go), then walks the
    /// tree for new ones.
    pub(super) fn poll(&mut self) {
        let mut i = 0;
        while i < self.live.len() {
            let f = &mut self.live[i];
            let running = f.attached.poll();
            if running && procfs::image_mark(f.pid).is_some_and(|m| m != f.mark) {
                self.live.swap_remove(i);
                self.exec_left += 1;
                continue;
            }
            if !running {
                let f = self.live.swap_remove(i);
                self.ended.push(f);
                continue;
            }
            i += 1;
        }
        self.find();
    }

    /// Attaches to the fork children the tree gained since the last walk.
    fn find(&mut self) {
        let mut stack = vec![self.root];
        while let Some(parent) = stack.pop() {
            for child in procfs::children_of(parent) {
                stack.push(child);
                if !self.seen.insert(child) {
                    continue;
                }
                let (Some(theirs), Some(mark)) =
                    (procfs::image_mark(parent), procfs::image_mark(child))
                else {
                    continue;
                };
                if theirs != mark {
                    // It exec'd: the library in it samples it.
                    continue;
                }
                match Attached::from_fork(child, self.hz) {
                    // An exec between the look and the attachment: its events count the
                    // program it exec'd, which samples itself.
                    Ok(_) if procfs::image_mark(child).is_some_and(|m| m != mark) => {
                        self.exec_left += 1;
                    }
                    Ok(attached) => self.live.push(Followed {
                        pid: child,
                        attached,
                        mark,
                    }),
                    // Ended meanwhile: its line says its time.
                    Err(_) if procfs::image_mark(child).is_none() => {}
                    Err(e) => {
                        self.failed.0 += 1;
                        self.failed.1 = Some(e.to_string());
                    }
                }
            }
        }
    }

    /// Every fork child followed, those still running included (sampled until now).
    pub(super) fn into_followed(self) -> Vec<Followed> {
        let mut all = self.ended;
        all.extend(self.live);
        all
    }
}

/// Writes the profiles of the fork children followed into the run's directory
/// (`profile.<pid>`, beside the programs' own), each with the CPU time its line said (`forks`:
/// the lines of the fork children that ended unprofiled, taken out of it for each one
/// written). A child whose pid holds a profile of the library's, or a line of a program that
/// ended before its first sample, exec'd after its last poll: it is the program's, and
/// dropped. Returns how many were written.
pub(super) fn write_followed(
    followed: Vec<Followed>,
    forks: &mut Vec<(u32, String, u64)>,
    unsampled: &[(u32, String, u64)],
    run_dir: &RunDir,
) -> usize {
    let mut written = 0;
    for Followed { pid, attached, .. } in followed {
        if unsampled.iter().any(|u| u.0 == pid) {
            continue;
        }
        // Its line (written as it exited) holds what it used to its end; the last poll
        // may be 10 ms before that.
        let profile = match forks.iter().position(|f| f.0 == pid) {
            Some(i) => attached.finish_ended(forks.remove(i).2),
            None => attached.finish(),
        };
        let mut bytes = Vec::new();
        if profile.write_pprof_to(&mut bytes).is_err() {
            continue;
        }
        let path = run_dir.profile_of(pid);
        // Never over a file there: one is the library's (the child exec'd), and holds it.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path);
        match file.and_then(|mut f| std::io::Write::write_all(&mut f, &bytes)) {
            Ok(()) => written += 1,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => say!("tickscope: warning: cannot write the profile of fork child {pid}: {e}"),
        }
    }
    written
}

/// Says how many fork children could not be followed, and why (the last reason): their time
/// is in the fork children's line, not in a profile.
pub(super) fn say_not_followed(forks: &Forks) {
    if let (n @ 1.., Some(why)) = &forks.failed {
        say!("tickscope: warning: {n} fork children could not be sampled from outside ({why})");
    }
}
