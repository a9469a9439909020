//! The heap benches' workload (`--bench heap`, and `dhat-beside`, which runs it beside
//! dhat-rs): allocations and frees through one allocator, 64 live at a time.

use std::alloc::{GlobalAlloc, Layout};

/// `ops` allocations and frees through `a`, 64 live at a time, sizes cycling 16..1024.
pub fn churn(a: &'static (dyn GlobalAlloc + Sync), ops: usize) {
    let mut live = [(std::ptr::null_mut::<u8>(), Layout::new::<u8>()); 64];
    for i in 0..ops {
        let slot = i % 64;
        let (p, l) = live[slot];
        if !p.is_null() {
            // SAFETY: `p` came from `a` with layout `l` and is freed once.
            unsafe { a.dealloc(p, l) };
        }
        let size = 16 + (i * 37) % 1009;
        let layout = Layout::from_size_align(size, 8).unwrap();
        // SAFETY: a non-zero size.
        let q = unsafe { a.alloc(layout) };
        std::hint::black_box(q);
        live[slot] = (q, layout);
    }
    for (p, l) in live {
        if !p.is_null() {
            // SAFETY: as above.
            unsafe { a.dealloc(p, l) };
        }
    }
}
