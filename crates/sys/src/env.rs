//! The process's identity and its environment as tickscope reads it: the effective user,
//! whether the process is privileged (setuid or setgid), and the `TICKSCOPE_*` variables,
//! ignored in a privileged process and frozen as they were at load.

use std::sync::{Once, OnceLock};

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// True if and only if the process runs with privileges the user who started it does not
/// have (a setuid or setgid program, file capabilities): the kernel's `AT_SECURE`, which
/// glibc's `secure_getenv` checks. Such a process must not let its environment choose files
/// to write or sockets to open.
pub fn privileged() -> bool {
    static SECURE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: getauxval only reads the auxiliary vector the kernel gave the process; an
    // absent entry reads as 0.
    *SECURE.get_or_init(|| unsafe { libc::getauxval(libc::AT_SECURE) } != 0)
}

extern "C" {
    /// The process's environment (glibc's `environ`): a null-terminated array of `NAME=value`,
    /// which `setenv` may replace.
    static mut environ: *const *const libc::c_char;
}

/// The environment variables whose names begin with `prefix`, as (name, value), those that
/// are UTF-8 only; read in place from `environ`, so that nothing is allocated where none
/// matches (the preload library's constructor runs this in every program it is loaded into,
/// most of which have no `TICKSCOPE_*` variable: copying the whole environment, as
/// `std::env::vars_os` does, was the first use of malloc in a `/bin/true`, and cost it
/// ~0.15 ms). Not safe beside another thread's `setenv`, as `getenv` is not.
pub fn env_with_prefix(prefix: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    // The address of the pointer glibc keeps (taking it reads nothing).
    let slot = std::ptr::addr_of!(environ);
    // SAFETY: reads that pointer (null before the environment is set up) as a variable
    // libc may change.
    let mut entry = unsafe { slot.read_volatile() };
    if entry.is_null() {
        return out;
    }
    loop {
        // SAFETY: `entry` points into the null-terminated array `environ` names.
        let item = unsafe { *entry };
        if item.is_null() {
            return out;
        }
        // SAFETY: each item is a NUL-terminated string, valid while the environment is not
        // changed (nothing here changes it).
        let bytes = unsafe { std::ffi::CStr::from_ptr(item) }.to_bytes();
        if bytes.starts_with(prefix.as_bytes()) {
            if let Some((name, value)) = std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| text.split_once('='))
            {
                out.push((name.to_string(), value.to_string()));
            }
        }
        // SAFETY: not past the terminating null, which ended the loop above.
        entry = unsafe { entry.add(1) };
    }
}

/// The `TICKSCOPE_*` variables as they were when [`freeze_env`] ran (the preload library
/// calls it as it loads); unset until then, and then [`env_var`] reads the environment.
static FROZEN: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// From now on, [`env_var`] answers from the `TICKSCOPE_*` variables the environment holds
/// now. The preload library calls it as it loads, before any of the program's code runs:
/// what it reads later (at exit, as the sampler starts on another thread, at a first scope)
/// is then what the program was started with, whatever the program did to its environment
/// since (`clearenv`, `unsetenv`, a shell's `unset`), and is read without calling `getenv`
/// while the program's own threads may be calling `setenv` (which glibc does not make safe).
pub fn freeze_env() {
    FROZEN.get_or_init(|| env_with_prefix("TICKSCOPE_"));
}

/// A `TICKSCOPE_*` variable, as every setting of tickscope (and of the preload library)
/// reads it: `None` when unset or not UTF-8, and in a privileged process (see the module
/// docs), where the first variable found set prints one warning. After [`freeze_env`], the
/// value it saw.
pub fn env_var(name: &str) -> Option<String> {
    let v = match FROZEN.get() {
        Some(vars) => vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
        None => std::env::var(name).ok(),
    }?;
    if privileged() {
        static WARNED: Once = Once::new();
        WARNED.call_once(|| {
            crate::stderr::warn(&format!(
                "{name} and every other TICKSCOPE_* variable ignored: this is a setuid or setgid \
                 program (AT_SECURE), and they would write files with its privileges"
            ))
        });
        return None;
    }
    Some(v)
}
