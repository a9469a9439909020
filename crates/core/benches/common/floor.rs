//! The floor every scope-cost ratio is measured against: two raw counter reads and a
//! thread-local add, the least any timing scope can cost. Shared by `overhead.rs` (core) and
//! the capture benchmark (`crates/cli/benches/capture.rs`) with `#[path]`.

use std::cell::Cell;

thread_local! {
    static ACC: Cell<u64> = const { Cell::new(0) };
}

/// The raw counter, without tickscope's source dispatch.
#[inline(always)]
pub fn raw() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc exists on every x86_64 CPU and only reads the time-stamp counter.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        tickscope::now()
    }
}

/// The floor's thread-local add.
#[inline(always)]
#[allow(dead_code)] // used by the overhead benchmark, not by the capture one
pub fn add(v: u64) {
    ACC.with(|c| c.set(c.get().wrapping_add(v)));
}

/// `n` iterations of the floor.
#[inline(never)]
pub fn floor_loop(n: u64) {
    for _ in 0..n {
        let a = raw();
        let b = raw();
        ACC.with(|c| c.set(c.get().wrapping_add(b.wrapping_sub(a))));
    }
}
