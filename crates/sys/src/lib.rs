//! The platform layer of tickscope: every call into the C library and the kernel that the
//! profiler, the preload library and the `tickscope` command make, wrapped once, each with the
//! reason it is sound. The one place the platform's `unsafe` lives: beside it only the
//! sampler's signal handler, the preload library's interposed functions and core's two
//! lock-free structures (docs/decisions/0032).
//!
//! By topic:
//! - [`clock`]: the kernel's clocks, the process's start and CPU time.
//! - [`thread`]: thread ids and names, tickscope's own threads and their signal masks.
//! - [`futex`]: waiting on a word without a lock.
//! - [`process`]: hooks at exit and in a fork child.
//! - [`procfs`]: `/proc`: a process's threads, their names and states.
//! - [`image`]: code images read in place (the program's headers, the vDSO) or mapped.
//! - [`perf`]: perf events on a thread: signalled, or sampling into a ring.
//! - [`timer`]: POSIX timers that signal one thread, and the process's profiling timer.
//! - [`env`](mod@env): the effective user, the setuid-aware `TICKSCOPE_*` environment.
//! - [`fd`]: descriptors kept off the program's 0, 1 and 2.
//! - [`stderr`]: tickscope's own messages, to the standard error the process started with
//!   (or `record`'s messages file).
//! - [`memory`]: memory that a fork child does not share, zeroed allocations.
//! - [`output`]: output files opened as a careful tool opens them.
//! - [`job`] (feature `job`): terminal and job control for a command that runs a program and
//!   outlives it (`tickscope record`); not in the library instrumented programs link.
//!
//! Not a stable API: it serves the tickscope crates, which pin its version.

#![warn(missing_docs)]

pub mod clock;
pub mod env;
pub mod fd;
pub mod futex;
pub mod image;
#[cfg(feature = "job")]
pub mod job;
pub mod memory;
pub mod output;
pub mod perf;
pub mod process;
pub mod procfs;
pub mod stderr;
pub mod thread;
pub mod timer;

#[cfg(test)]
mod tests {
    use crate::{clock::*, futex::*, memory::*, thread::*};

    /// Bytes copied into a mapping of their own (populated at once) are the bytes, at
    /// every length.
    #[test]
    fn bytes_not_forked_are_a_copy_of_the_bytes() {
        for n in [0usize, 1, 4095, 4097, 1 << 20] {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            let copy = bytes_not_forked(&bytes);
            assert_eq!(&copy[..], &bytes[..], "{n} bytes");
        }
    }

    /// A zeroed table reads as zeros, at every length, and writes stick.
    #[test]
    fn zeroed_slices_are_zero_and_usable() {
        use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
        for n in [0, 1, 7, 1 << 20] {
            let t = zeroed_slice::<AtomicU64>(n);
            assert_eq!(t.len(), n);
            assert!(t.iter().all(|c| c.load(Relaxed) == 0));
            if let Some(last) = t.last() {
                last.store(7, Relaxed);
                assert_eq!(t[n - 1].load(Relaxed), 7);
            }
        }
    }

    /// A tickscope thread blocks what the program may send the process, and keeps what it
    /// was asked to keep, the sampling signals and what a fault raises, whatever the
    /// spawning thread blocked; the spawning thread's mask is as before.
    #[test]
    fn quiet_threads_block_signals_but_those_kept() {
        fn mask(how: libc::c_int, sigs: &[libc::c_int]) {
            // SAFETY: as in `spawn_quiet`.
            let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: `set` is a valid sigset_t.
            unsafe { libc::sigemptyset(&mut set) };
            for &sig in sigs {
                // SAFETY: as above.
                unsafe { libc::sigaddset(&mut set, sig) };
            }
            // SAFETY: changes this test thread's own mask.
            unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
        }
        fn blocked(sig: libc::c_int) -> bool {
            // SAFETY: as in `spawn_quiet`.
            let mut now: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: reads this thread's mask into `now`.
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now) };
            // SAFETY: `now` is a valid sigset_t.
            unsafe { libc::sigismember(&now, sig) == 1 }
        }
        // The spawning thread blocks SIGPROF and SIGUSR2, and not SIGTERM.
        mask(libc::SIG_BLOCK, &[libc::SIGPROF, libc::SIGUSR2]);
        // A real-time signal kept (a sampler's), and one not (a program's).
        let keep = [libc::SIGUSR2, libc::SIGRTMIN() + 4];
        let there = spawn_quiet(std::thread::Builder::new(), &keep, || {
            [
                libc::SIGTERM,
                libc::SIGCHLD,
                libc::SIGINT,
                libc::SIGRTMIN() + 1,
                libc::SIGUSR2,
                libc::SIGPROF,
                libc::SIGRTMIN() + 4,
                libc::SIGSEGV,
            ]
            .map(blocked)
        })
        .unwrap()
        .join()
        .unwrap();
        let here = [libc::SIGTERM, libc::SIGPROF, libc::SIGUSR2].map(blocked);
        mask(libc::SIG_UNBLOCK, &[libc::SIGPROF, libc::SIGUSR2]);
        assert_eq!(there, [true, true, true, true, false, false, false, false]);
        assert_eq!(
            here,
            [false, true, true],
            "the spawning thread's mask changed"
        );
    }

    /// What is left is taken once, by one taker; leaving another drops the first.
    #[test]
    fn a_handoff_gives_what_was_left_once() {
        let h: Handoff<std::sync::Arc<()>> = Handoff::new();
        assert!(h.take().is_none());
        let first = std::sync::Arc::new(());
        h.put(first.clone());
        h.put(std::sync::Arc::new(()));
        assert_eq!(
            std::sync::Arc::strong_count(&first),
            1,
            "the first was not dropped"
        );
        let got = std::thread::scope(|s| s.spawn(|| h.take()).join().unwrap());
        assert!(got.is_some());
        assert!(h.take().is_none(), "taken twice");
    }

    /// A thread `spawn_quiet` starts is known as tickscope's while it runs (the sampler
    /// samples it by frame pointers), and the spawning thread is marked as starting one of
    /// ours only for the spawn (libtickscope's `pthread_create` does not have it armed).
    #[test]
    fn quiet_threads_are_known_as_ours_while_they_run() {
        assert!(!spawning_own_thread());
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let t = spawn_quiet(std::thread::Builder::new(), &[], move || {
            let tid = gettid() as i32;
            tx.send((tid, own_threads::contains(tid))).unwrap();
            go_rx.recv().unwrap();
            tid
        })
        .unwrap();
        assert!(!spawning_own_thread(), "still marked after the spawn");
        let (tid, inside) = rx.recv().unwrap();
        assert!(inside, "not known as ours from inside");
        assert!(own_threads::contains(tid), "not known as ours from outside");
        assert!(
            !own_threads::contains(gettid() as i32),
            "the test thread is not ours"
        );
        go_tx.send(()).unwrap();
        assert_eq!(t.join().unwrap(), tid);
        assert!(!own_threads::contains(tid), "still known after its end");
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b > a + 1_000_000, "{a} then {b}");
    }

    #[test]
    fn process_start_is_in_the_past() {
        let start = process_start_boottime_ns().expect("/proc/self/stat readable on Linux");
        assert!(start <= boottime_ns());
    }

    #[test]
    fn gettid_of_main_test_thread_differs_from_spawned() {
        let here = gettid();
        let there = std::thread::spawn(gettid).join().unwrap();
        assert_ne!(here, there);
    }
}
