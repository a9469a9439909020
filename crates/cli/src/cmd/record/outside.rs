//! The program `record` starts, sampled from outside it by a thread of `record`'s own.

use super::*;

/// The program `record` started, sampled from outside it (see `run`) on a thread of
/// `record`'s own until it ends; or why it could not be.
pub(super) enum Outside {
    Sampling {
        thread: std::thread::JoinHandle<(tickscope::sampler::Profile, Option<Forks>)>,
        ask: std::sync::mpsc::Sender<Ask>,
        /// The thread's answer to [`Ask::Ended`] (taken by [`Outside::before_reap`]).
        answer: Option<std::sync::mpsc::Receiver<()>>,
    },
    Failed(String),
}

/// What the sampling thread is told.
pub(super) enum Ask {
    /// The program has ended and is not reaped yet: take the last readings now, while its
    /// threads' figures and its CPU clock can still be read (a zombie's), then answer.
    Ended,
    Stop,
}

impl Outside {
    /// Attaches to the program `pid`, started at `spawned` (before it is waited for), and
    /// with `follow`, to the fork children of its tree that do not exec ([`Forks`]).
    pub(super) fn start(
        pid: u32,
        hz: u32,
        spawned: std::time::Instant,
        program: Option<PathBuf>,
        follow: bool,
    ) -> Outside {
        use std::sync::mpsc::{channel, RecvTimeoutError};
        let mut attached = match tickscope::sampler::Attached::from_start(pid, hz, spawned) {
            Ok(a) => match program {
                Some(p) => a.program(p),
                None => a,
            },
            Err(e) => return Outside::Failed(e.to_string()),
        };
        let (ask, asked) = channel();
        let (answer_tx, answer) = channel();
        let thread = std::thread::Builder::new()
            .name("sampler".into())
            .spawn(move || {
                let mut final_cpu = None;
                let mut forks = follow.then(|| Forks::new(pid, hz));
                loop {
                    match asked.recv_timeout(std::time::Duration::from_millis(10)) {
                        Err(RecvTimeoutError::Timeout) => {
                            attached.poll();
                        }
                        Ok(Ask::Ended) => {
                            attached.poll();
                            final_cpu = tickscope::sampler::Attached::process_cpu_ns(pid);
                            let _ = answer_tx.send(());
                        }
                        Ok(Ask::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                    }
                    if let Some(forks) = &mut forks {
                        forks.poll();
                    }
                }
                let profile = match final_cpu {
                    Some(ns) => attached.finish_ended(ns),
                    None => attached.finish(),
                };
                (profile, forks)
            });
        match thread {
            Ok(thread) => Outside::Sampling {
                thread,
                ask,
                answer: Some(answer),
            },
            Err(e) => Outside::Failed(format!("cannot start a thread: {e}")),
        }
    }

    /// What runs once the program has ended, before it is reaped: the sampling thread's
    /// last readings (waited for, at most 5 s: the program is reaped after them either way).
    pub(super) fn before_reap(&mut self) -> impl FnMut() {
        let (ask, answer) = match self {
            Outside::Sampling { ask, answer, .. } => (Some(ask.clone()), answer.take()),
            Outside::Failed(_) => (None, None),
        };
        move || {
            if let (Some(ask), Some(answer)) = (&ask, &answer) {
                if ask.send(Ask::Ended).is_ok() {
                    let _ = answer.recv_timeout(std::time::Duration::from_secs(5));
                }
            }
        }
    }

    /// Once the program has ended: its profile, and the fork children followed.
    pub(super) fn finish(self) -> Result<(tickscope::sampler::Profile, Option<Forks>), String> {
        match self {
            Outside::Sampling { thread, ask, .. } => {
                let _ = ask.send(Ask::Stop);
                thread
                    .join()
                    .map_err(|_| "the sampling thread panicked".to_string())
            }
            Outside::Failed(e) => Err(e),
        }
    }
}

/// Writes the profile of the program sampled from outside to the run's directory; false,
/// said, if it could not be written. The fork children followed are handed back, their
/// profiles to be written once the run's lines are read ([`write_followed`]).
pub(super) fn write_sampled(
    sampling: Outside,
    run_dir: &RunDir,
    prog: &OsString,
    output: &Path,
) -> (bool, Option<Forks>) {
    match sampling.finish() {
        Ok((profile, forks)) => {
            for w in profile.warnings() {
                say!("tickscope: warning: {w}");
            }
            if let Err(e) = profile.write_pprof(run_dir.profile()) {
                say!(
                    "tickscope: error: cannot write the profile of {} to {}: {}",
                    Path::new(prog).display(),
                    output.display(),
                    std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string())
                );
                return (false, forks);
            }
            (true, forks)
        }
        Err(e) => {
            say!(
                "tickscope: error: cannot sample {} from outside: {e}",
                Path::new(prog).display()
            );
            (true, None)
        }
    }
}
