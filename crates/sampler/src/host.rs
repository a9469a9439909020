//! What a host that runs the sampler on a program's behalf needs beyond [`Sampler`]: the
//! preload library (`libtickscope.so`), which starts a sampler as it is loaded, stops it from
//! a signal handler or `_exit` and writes the profile from the drain thread. **Not a stable
//! API**: it serves the tickscope crates, which pin this crate's version.
//!
//! [`Sampler`]: super::Sampler

/// Asks the running sampler's drain thread to stop and run the function given to
/// [`on_stop_request`] with `code` (non-zero): for a signal handler or `_exit`, where
/// nothing that locks may run. False if no sampler runs in this process.
/// Async-signal-safe.
pub fn request_stop(code: u32) -> bool {
    super::request_stop(code)
}

/// A [`request_stop`] that came while another thread was stopping the sampler, too late for
/// the drain thread: once, for the caller of that stop to answer after writing the profile.
pub fn take_unanswered_request() -> Option<u32> {
    super::take_unanswered_request()
}

/// Leaves a request for the thread that is stopping the sampler to answer (see
/// [`take_unanswered_request`]).
pub fn leave_unanswered(code: u32) {
    super::leave_unanswered(code)
}

/// What the drain thread runs, on its own thread, when it stops at a [`request_stop`] (the
/// first setting stays).
pub fn on_stop_request(f: fn(u32)) {
    super::on_request(f)
}

/// The process's name as the kernel has it (its main thread's: the program's name after its
/// exec, cut to 15 bytes): `PR_GET_NAME` on the main thread, `/proc/self/comm` elsewhere
/// (the drain thread, writing the profile on a signal). Empty if neither can be read.
pub fn process_name() -> String {
    crate::sys::procfs::thread_name(std::process::id() as i32).unwrap_or_default()
}

/// Frames in the shared library this code is linked into are named by its symbol table
/// alone, never by its DWARF (libtickscope.so: see `symbolize::own_frames_by_symbols`).
pub fn own_frames_by_symbols() {
    crate::symbolize::own_frames_by_symbols()
}

/// In a fork child: whether the sampler's locks are free (none was held at the fork by a
/// thread the child does not have), so that a sampler of the child's own can start and stop
/// without waiting forever.
pub fn free_after_fork() -> bool {
    super::free_after_fork()
}

/// A profile of fewer samples than this is warned of: its shares are mostly noise. Under
/// `record`, the processes leave the judgment to `record`, which makes it on the run's
/// profiles together.
pub const FEW_SAMPLES: u64 = 100;
