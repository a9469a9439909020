//! Threads sampled from their first instruction: the interposed `pthread_create`.

use super::*;

/// A thread's start routine and its argument, carried to [`thread_start`].
pub(super) struct Start {
    routine: unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
}

/// The `pthread_create` this one stands in front of (libc's), found once.
pub(super) static REAL_PTHREAD_CREATE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// libc's `pthread_create`, its start routine spelt with the unwinding ABI of the same
/// calling convention (see [`pthread_create`]).
pub(super) type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void,
    *mut c_void,
) -> c_int;

/// libc's `pthread_create` (the next object's), found once; `None` if there is none.
pub(in crate::ffi) fn real_pthread_create() -> Option<PthreadCreate> {
    let mut real = REAL_PTHREAD_CREATE.load(Relaxed);
    if real.is_null() {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name: the next object's symbol,
        // libc's pthread_create (its default version), or null.
        real = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) };
        if real.is_null() {
            return None;
        }
        REAL_PTHREAD_CREATE.store(real, Relaxed);
    }
    // SAFETY: `real` is libc's pthread_create, whose signature PthreadCreate spells.
    Some(unsafe { std::mem::transmute::<*mut c_void, PthreadCreate>(real) })
}

/// Interposes libc's `pthread_create` (this library is preloaded, or linked before libc): a
/// new thread arms its sampling timer before its start routine runs, so its whole CPU time is
/// sampled, where the sampler's 10 ms poll of `/proc/self/task` would find it late (and
/// later still on a busy machine). With no sampler running, the call goes straight to libc's.
///
/// # Safety
/// As `pthread_create(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> c_int {
    let Some(real) = real_pthread_create() else {
        return libc::ENOSYS;
    };
    // SAFETY: the same function pointer with the unwinding ABI of the same calling
    // convention: a forced unwind (pthread_exit, cancellation) may pass through
    // `thread_start` into libc's frame, as it would without us.
    let routine = unsafe {
        std::mem::transmute::<
            extern "C" fn(*mut c_void) -> *mut c_void,
            unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void,
        >(routine)
    };
    // tickscope's own threads (a capture's, say) are found by the sampler's poll, if
    // they live that long: they mostly wait, and arming each at once cost every profiled
    // process a round trip to the drain thread.
    let own = tickscope_sys::thread::spawning_own_thread();
    if !own {
        // A sampler whose start was deferred starts now, so that the new thread is armed
        // from its first instruction. Not waited for if another thread is starting it (that
        // start may wait for a lock this thread holds, the loader's in a constructor): the
        // sampler's poll then finds the new thread.
        deferred::start_now_if_pending(false);
    }
    if !ts::sampler::running_here() || own {
        // SAFETY: the caller's arguments, as given.
        return unsafe { real(thread, attr, routine, arg) };
    }
    let start = Box::into_raw(Box::new(Start { routine, arg }));
    // SAFETY: the caller's thread and attributes; `thread_start` takes ownership of `start`.
    let rc = unsafe { real(thread, attr, thread_start, start.cast()) };
    if rc != 0 {
        // No thread was made: the box is still ours.
        // SAFETY: allocated just above by Box::into_raw and not handed to any thread.
        drop(unsafe { Box::from_raw(start) });
    }
    rc
}

/// The new thread's first code: asks the sampler to arm its timer (and waits for it), then
/// runs the program's start routine. Holds nothing across that call (no destructor runs on
/// the way out), so pthread_exit and cancellation unwind through it as through libc's frame.
extern "C-unwind" fn thread_start(start: *mut c_void) -> *mut c_void {
    // SAFETY: `start` is the Box that pthread_create handed to this thread alone.
    let Start { routine, arg } = *unsafe { Box::from_raw(start.cast::<Start>()) };
    let _ = catch_unwind(ts::sampler::adopt_current_thread);
    // SAFETY: the program's start routine with its own argument, as libc would call it.
    unsafe { routine(arg) }
}
