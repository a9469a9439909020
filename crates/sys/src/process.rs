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

/// Has `$f`, an `extern "C" fn()`, run as the object that holds this entry loads: before
/// `main` in a program, as `dlopen` returns in a shared library (an entry of the ELF
/// `.init_array`, static `$name`). `$f` runs before the Rust runtime has set anything up:
/// it must not panic, and should only store atomics or call what needs no runtime.
///
/// A C program that links a static archive takes from it only the objects it names: an
/// entry in an object nothing names is left out, so the caller also does the work at first
/// use.
#[macro_export]
macro_rules! at_load {
    ($name:ident = $f:path) => {
        #[used]
        // The entry is a pointer to a function of the right type, which the loader calls
        // with no arguments, once, in the order of the section.
        #[cfg_attr(target_os = "linux", link_section = ".init_array")]
        static $name: extern "C" fn() = $f;
    };
}
