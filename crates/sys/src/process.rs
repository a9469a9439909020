//! Hooks in the process's life: at exit, and in a fork child.

/// Registers `f` to run at process exit (after `main` returns, on `std::process::exit`, and
/// after a panic in `main`, which returns through the runtime to `exit`). Returns true if and
/// only if the registration succeeded.
pub fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: `f` is a plain `extern "C" fn()` with 'static lifetime, as atexit requires; the
    // callee catches every panic so nothing unwinds into libc.
    unsafe { libc::atexit(f) == 0 }
}

/// Registers `f` to run in the child after every `fork` (`pthread_atfork`). `f` runs in
/// the child before `fork` returns there, where only async-signal-safe work is allowed.
/// Returns true if and only if the registration succeeded.
pub fn at_fork_child(f: unsafe extern "C" fn()) -> bool {
    // SAFETY: `f` lives as long as the process and, by the caller's design, does only
    // async-signal-safe work (atomic stores).
    unsafe { libc::pthread_atfork(None, None, Some(f)) == 0 }
}
