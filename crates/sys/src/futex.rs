//! Waiting on a word without a lock: futexes, and a one-slot hand-off between threads.

/// One value handed from a thread to another without a lock (a fork child never finds it
/// taken): a leaked `Box` behind an atomic pointer.
pub struct Handoff<T: Send>(std::sync::atomic::AtomicPtr<T>);

impl<T: Send> Default for Handoff<T> {
    fn default() -> Handoff<T> {
        Handoff::new()
    }
}

impl<T: Send> Handoff<T> {
    /// An empty hand-off.
    pub const fn new() -> Handoff<T> {
        Handoff(std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()))
    }

    /// Leaves `value` here, dropping what was left before.
    pub fn put(&self, value: T) {
        let old = self.0.swap(
            Box::into_raw(Box::new(value)),
            std::sync::atomic::Ordering::SeqCst,
        );
        // SAFETY: a non-null pointer here is a Box leaked by `put`, and the swap made this
        // its only owner.
        (!old.is_null()).then(|| drop(unsafe { Box::from_raw(old) }));
    }

    /// Takes what was left, if anything.
    pub fn take(&self) -> Option<T> {
        let p = self
            .0
            .swap(std::ptr::null_mut(), std::sync::atomic::Ordering::SeqCst);
        // SAFETY: as in `put`.
        (!p.is_null()).then(|| *unsafe { Box::from_raw(p) })
    }
}

/// Sleeps until `word` may have changed from 0 (woken by [`futex_wake`]), or `timeout`.
pub fn futex_wait(word: &std::sync::atomic::AtomicU32, timeout: std::time::Duration) {
    futex_wait_while(word, 0, timeout)
}

/// Sleeps while `word` holds `expected`, until woken ([`futex_wake`]), `timeout` passes or a
/// signal interrupts; returns at once if it holds something else already.
pub fn futex_wait_while(
    word: &std::sync::atomic::AtomicU32,
    expected: u32,
    timeout: std::time::Duration,
) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT on a live, aligned u32 with a valid relative timeout; the kernel
    // compares the word with `expected` atomically before it sleeps.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        )
    };
}

/// Wakes the thread waiting on `word` in [`futex_wait`] or [`futex_wait_while`].
/// Async-signal-safe (one system call).
pub fn futex_wake(word: &std::sync::atomic::AtomicU32) {
    futex_wake_up_to(word, 1);
}

/// Wakes every thread waiting on `word` in [`futex_wait_while`]. Async-signal-safe (one
/// system call).
pub fn futex_wake_all(word: &std::sync::atomic::AtomicU32) {
    futex_wake_up_to(word, i32::MAX);
}

fn futex_wake_up_to(word: &std::sync::atomic::AtomicU32, waiters: i32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32; no memory is written.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            waiters,
        )
    };
}
