//! Reaping children: `wait4`, `waitpid`, `wait`, `wait3` interposed, so that a profiled parent
//! tells `record` what its children's ends took.

use super::*;

// A process `record` runs writes its line (or profile) before it ends; the kernel's work as it
// ends (unmapping its memory: a tenth of a `/bin/true`'s CPU time) comes after, and only its
// parent learns of it, from the CPU time `wait4` gives as it reaps it. Under `record`, a
// profiled parent passes that on (see `protocol::marks::REAPED`), whichever of the four calls it reaps
// with. `waitid` is left alone: it gives no CPU time finer than clock ticks.

pub(super) type Wait4 =
    unsafe extern "C" fn(libc::pid_t, *mut c_int, c_int, *mut libc::rusage) -> libc::pid_t;

/// Interposes `wait4` (see above).
///
/// # Safety
/// As `wait4(2)`.
#[no_mangle]
pub unsafe extern "C" fn wait4(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
    usage: *mut libc::rusage,
) -> libc::pid_t {
    reap(pid, status, options, usage)
}

/// Interposes `waitpid`: `wait4` without the CPU time, as glibc's.
///
/// # Safety
/// As `waitpid(2)`.
#[no_mangle]
pub unsafe extern "C" fn waitpid(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
) -> libc::pid_t {
    reap(pid, status, options, std::ptr::null_mut())
}

/// Interposes `wait`: `wait4(-1, status, 0, NULL)`, as glibc's.
///
/// # Safety
/// As `wait(2)`.
#[no_mangle]
pub unsafe extern "C" fn wait(status: *mut c_int) -> libc::pid_t {
    reap(-1, status, 0, std::ptr::null_mut())
}

/// Interposes `wait3`: `wait4(-1, ...)`, as glibc's.
///
/// # Safety
/// As `wait3(2)`.
#[no_mangle]
pub unsafe extern "C" fn wait3(
    status: *mut c_int,
    options: c_int,
    usage: *mut libc::rusage,
) -> libc::pid_t {
    reap(-1, status, options, usage)
}

/// libc's `wait4` with the caller's arguments (the status and CPU time into buffers of ours
/// where the caller passed none); a child that ended is said to `record` with its CPU time.
/// Async-signal-safe (shells reap in their SIGCHLD handler): libc's `wait4` or the system
/// call, and a line written from the stack; errno as `wait4` left it.
pub(super) fn reap(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
    usage: *mut libc::rusage,
) -> libc::pid_t {
    let mut own_status: c_int = 0;
    // SAFETY: all-zero bytes are a valid `rusage` (integers and timevals only).
    let mut own_usage: libc::rusage = unsafe { std::mem::zeroed() };
    let status = if status.is_null() {
        &mut own_status
    } else {
        status
    };
    let usage = if usage.is_null() {
        &mut own_usage
    } else {
        usage
    };
    let f = REAL_WAIT4.load(Relaxed);
    let reaped = if f.is_null() || f == wait4 as *mut c_void {
        // SAFETY: wait4's system call with valid status and rusage buffers.
        unsafe {
            libc::syscall(
                libc::SYS_wait4,
                pid as libc::c_long,
                status,
                options as libc::c_long,
                usage,
            ) as libc::pid_t
        }
    } else {
        // SAFETY: `f` is libc's wait4 (found by dlsym under that name), of this type.
        let f = unsafe { std::mem::transmute::<*mut c_void, Wait4>(f) };
        // SAFETY: valid status and rusage buffers (the caller's, or ours).
        unsafe { f(pid, status, options, usage) }
    };
    if reaped > 0 {
        // SAFETY: wait4 wrote the status of the child it returned.
        let st = unsafe { *status };
        if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
            keeping_errno(|| {
                // SAFETY: wait4 filled in the rusage of the child it reaped.
                let cpu = tickscope_sys::clock::rusage_cpu_ns(unsafe { &*usage });
                let line = Line::reaped(Reaped {
                    pid: reaped as u32,
                    cpu_ns: cpu,
                });
                tickscope_sys::stderr::write_messages_file_in_signal(line.bytes());
            });
        }
    }
    reaped
}
