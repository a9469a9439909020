//! Heap profiles of unmodified programs: the allocator's functions, interposed. Each call is
//! passed to the next object's function of the same name (libc's, or an allocator preloaded
//! after this library), and its result returned unchanged; where heap profiling was asked
//! for (`TICKSCOPE_HEAPPROFILE`, this library preloaded), the block is noted around the call
//! as `tickscope::alloc::Profiled` notes a Rust allocation: sampled by bytes, its free found
//! through the counting filter. Otherwise a call costs one load and a branch more.
//!
//! **Before the next functions are found.** They are looked up (`dlsym(RTLD_NEXT, ...)`) at
//! each one's first call. `dlsym` may allocate, and the loader allocates before any
//! constructor runs: a call made by a lookup, on its own thread, is served from a small static
//! arena, never freed (its blocks are told by their address: `free` ignores them, `realloc`
//! copies them out).
//!
//! **Blocks from elsewhere.** A pointer the program got from another allocator (or never
//! got at all) is passed on as it came: what the next `free` does with it, it does.

use super::*;

use std::sync::atomic::AtomicUsize;

/// Heap profiling asked for and this library preloaded: the hooks note blocks.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The arena that serves allocations made while a next function is looked up.
const ARENA: usize = 64 << 10;
/// Each arena block's header: its size, so that `realloc` can copy it out.
const HEADER: usize = 16;

#[repr(C, align(16))]
struct Arena(std::cell::UnsafeCell<[u8; ARENA]>);
// SAFETY: every block is handed out once, by an atomic bump of `USED`, and written only by
// the caller it went to.
unsafe impl Sync for Arena {}
static ARENA_BYTES: Arena = Arena(std::cell::UnsafeCell::new([0; ARENA]));
static USED: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    /// This thread is looking a next function up: its calls meanwhile (from `dlsym`) are
    /// served from the arena. (The library is preloaded or linked wherever these hooks are
    /// called: its thread-locals are in the static TLS block, reached without allocating.)
    static LOOKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A block of `size` bytes aligned to `align` (at most a page) from the arena, zeroed (the
/// arena is never reused); null when it is spent.
fn arena(size: usize, align: usize) -> *mut c_void {
    let align = align.clamp(HEADER, 4096);
    let base = ARENA_BYTES.0.get() as usize;
    let mut used = USED.load(Relaxed);
    loop {
        let start = (base + used + HEADER).next_multiple_of(align) - base;
        let Some(end) = start.checked_add(size).filter(|&e| e <= ARENA) else {
            return std::ptr::null_mut();
        };
        match USED.compare_exchange_weak(used, end, Relaxed, Relaxed) {
            Ok(_) => {
                let p = (base + start) as *mut u8;
                // SAFETY: [start - HEADER, end) is inside the arena and this caller's alone
                // (the bump above handed it out once); the header is 8-aligned.
                unsafe { (p.wrapping_sub(HEADER) as *mut usize).write(size) };
                return p.cast();
            }
            Err(now) => used = now,
        }
    }
}

/// Whether `p` is an arena block.
fn in_arena(p: *mut c_void) -> bool {
    let base = ARENA_BYTES.0.get() as usize;
    (base..base + ARENA).contains(&(p as usize))
}

/// An arena block's size.
fn arena_size(p: *mut c_void) -> usize {
    // SAFETY: `p` is an arena block (checked by the caller), written with its header.
    unsafe { (p as *const u8).wrapping_sub(HEADER).cast::<usize>().read() }
}

/// The next object's `name` (NUL-terminated), looked up once into `slot`; null for a call
/// made by this thread's own lookup (the caller serves the arena), or if there is none.
/// Threads that find it missing at once each look it up (`dlsym` is thread-safe, and they
/// find the same function): none waits for another, which may hold the loader's lock.
fn next(slot: &AtomicPtr<c_void>, name: &CStr, libc_name: &CStr) -> *mut c_void {
    let f = slot.load(Acquire);
    if !f.is_null() {
        return f;
    }
    if LOOKING.replace(true) {
        return std::ptr::null_mut();
    }
    // SAFETY: dlsym with RTLD_NEXT / RTLD_DEFAULT and NUL-terminated names: a function's
    // address, or null. Allocations it makes meanwhile come back here and take the arena.
    let mut f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if f.is_null() {
        // SAFETY: as above; glibc's own name for its allocator's function.
        f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, libc_name.as_ptr()) };
    }
    slot.store(f, Release);
    LOOKING.set(false);
    f
}

macro_rules! next_fn {
    ($slot:ident, $name:literal, $libc:literal, $ty:ty) => {{
        static $slot: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
        let f = next(&$slot, $name, $libc);
        // SAFETY: `f` is null or the next object's function of this name, whose C
        // signature `$ty` spells.
        (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, $ty>(f) })
    }};
}

type Malloc = unsafe extern "C" fn(usize) -> *mut c_void;
type Free = unsafe extern "C" fn(*mut c_void);
type Calloc = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type Realloc = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type Memalign = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type PosixMemalign = unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> c_int;
type UsableSize = unsafe extern "C" fn(*mut c_void) -> usize;

/// Turns the hooks on where `TICKSCOPE_HEAPPROFILE` asks for a heap profile and this library
/// was preloaded (loaded at start: its thread-local state then lives in the static TLS
/// block, which the allocator's hooks may touch on any thread without allocating). A
/// program exec'd by the profiled one writes `<path>.<pid>`.
pub(super) fn start_from_env() {
    let pid = std::process::id();
    let root = tickscope_sys::env::env_var(tickscope_fmt::protocol::env::ROOT_PID)
        .and_then(|p| p.parse::<u32>().ok());
    let Some(path) = tickscope_sys::env::env_var(tickscope_fmt::protocol::env::HEAP_PROFILE)
        .filter(|p| !p.is_empty())
    else {
        return;
    };
    let preloaded = std::env::var_os("LD_PRELOAD").is_some_and(|v| {
        v.to_string_lossy()
            .split([':', ' '])
            .any(|l| l.rsplit('/').next() == Some("libtickscope.so"))
    });
    if !preloaded {
        tickscope_sys::stderr::say(&format!(
            "tickscope: {}: a C program's heap is profiled with libtickscope.so in LD_PRELOAD \
             only; not profiling the heap",
            tickscope_fmt::protocol::env::HEAP_PROFILE
        ));
        return;
    }
    match root {
        Some(r) if r != pid => {
            ts::alloc::write_at_exit_to(profile::file_of(std::path::Path::new(&path), pid))
        }
        Some(_) => {}
        // The run's root: the programs it execs write files of their own.
        None => std::env::set_var(tickscope_fmt::protocol::env::ROOT_PID, pid.to_string()),
    }
    ACTIVE.store(true, Relaxed);
}

/// Interposes `malloc(3)`.
///
/// # Safety
/// As `malloc(3)`.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    let Some(f) = next_fn!(MALLOC, c"malloc", c"__libc_malloc", Malloc) else {
        return arena(size, 16);
    };
    // SAFETY: the caller's arguments, as given.
    let p = unsafe { f(size) };
    if ACTIVE.load(Relaxed) && !p.is_null() {
        ts::alloc::note_allocated(p as usize, size);
    }
    p
}

/// Interposes `free(3)`.
///
/// # Safety
/// As `free(3)`.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() || in_arena(p) {
        return;
    }
    if ACTIVE.load(Relaxed) {
        ts::alloc::note_freed(p as usize);
    }
    if let Some(f) = next_fn!(FREE, c"free", c"__libc_free", Free) {
        // SAFETY: the caller's pointer, as given.
        unsafe { f(p) }
    }
}

/// Interposes `calloc(3)`.
///
/// # Safety
/// As `calloc(3)`.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    let Some(f) = next_fn!(CALLOC, c"calloc", c"__libc_calloc", Calloc) else {
        return match n.checked_mul(size) {
            Some(bytes) => arena(bytes, 16),
            None => std::ptr::null_mut(),
        };
    };
    // SAFETY: the caller's arguments, as given.
    let p = unsafe { f(n, size) };
    if ACTIVE.load(Relaxed) && !p.is_null() {
        ts::alloc::note_allocated(p as usize, n.wrapping_mul(size));
    }
    p
}

/// Interposes `realloc(3)`.
///
/// # Safety
/// As `realloc(3)`.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if in_arena(p) {
        // SAFETY: a new block from this library's `malloc`, as `realloc` gives.
        let q = unsafe { malloc(size) };
        if !q.is_null() {
            let n = arena_size(p).min(size);
            // SAFETY: both blocks hold at least `n` bytes, and are distinct.
            unsafe { std::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, n) };
        }
        return q;
    }
    let Some(f) = next_fn!(REALLOC, c"realloc", c"__libc_realloc", Realloc) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's arguments, as given.
    let q = unsafe { f(p, size) };
    if ACTIVE.load(Relaxed) {
        // The old block is gone (moved, or freed by a size of 0) unless the call failed.
        if !p.is_null() && (!q.is_null() || size == 0) {
            ts::alloc::note_freed(p as usize);
        }
        if !q.is_null() {
            ts::alloc::note_allocated(q as usize, size);
        }
    }
    q
}

/// Interposes `reallocarray(3)`: `realloc` of `n * size` bytes, refused (`ENOMEM`) where
/// that overflows.
///
/// # Safety
/// As `reallocarray(3)`.
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: the caller's pointer, as given.
        Some(bytes) => unsafe { realloc(p, bytes) },
        None => {
            // SAFETY: __errno_location has no preconditions.
            let errno = unsafe { libc::__errno_location() };
            // SAFETY: the calling thread's errno slot, valid and aligned for its life.
            unsafe { *errno = libc::ENOMEM };
            std::ptr::null_mut()
        }
    }
}

/// An aligned allocation through `f` (`memalign`'s shape: alignment, then size), noted.
///
/// # Safety
/// `f` is the next object's function, called with the caller's arguments.
unsafe fn aligned(f: Option<Memalign>, align: usize, size: usize) -> *mut c_void {
    let Some(f) = f else {
        return arena(size, align);
    };
    // SAFETY: the caller's arguments, as given.
    let p = unsafe { f(align, size) };
    if ACTIVE.load(Relaxed) && !p.is_null() {
        ts::alloc::note_allocated(p as usize, size);
    }
    p
}

/// Interposes `memalign(3)`.
///
/// # Safety
/// As `memalign(3)`.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    let f = next_fn!(MEMALIGN, c"memalign", c"__libc_memalign", Memalign);
    // SAFETY: the caller's arguments, to the next `memalign`.
    unsafe { aligned(f, align, size) }
}

/// Interposes `aligned_alloc(3)`.
///
/// # Safety
/// As `aligned_alloc(3)`.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    let f = next_fn!(
        ALIGNED_ALLOC,
        c"aligned_alloc",
        c"__libc_memalign",
        Memalign
    );
    // SAFETY: the caller's arguments, to the next `aligned_alloc`.
    unsafe { aligned(f, align, size) }
}

/// A page-aligned allocation through `f` (`valloc`'s shape), noted.
///
/// # Safety
/// `f` is the next object's function, called with the caller's argument.
unsafe fn paged(f: Option<Malloc>, size: usize) -> *mut c_void {
    let Some(f) = f else {
        return arena(size, 4096);
    };
    // SAFETY: the caller's argument, as given.
    let p = unsafe { f(size) };
    if ACTIVE.load(Relaxed) && !p.is_null() {
        ts::alloc::note_allocated(p as usize, size);
    }
    p
}

/// Interposes `valloc(3)`.
///
/// # Safety
/// As `valloc(3)`.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    let f = next_fn!(VALLOC, c"valloc", c"__libc_valloc", Malloc);
    // SAFETY: the caller's argument, to the next `valloc`.
    unsafe { paged(f, size) }
}

/// Interposes `pvalloc(3)`.
///
/// # Safety
/// As `pvalloc(3)`.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let f = next_fn!(PVALLOC, c"pvalloc", c"__libc_pvalloc", Malloc);
    // SAFETY: the caller's argument, to the next `pvalloc`.
    unsafe { paged(f, size) }
}

/// Interposes `posix_memalign(3)`.
///
/// # Safety
/// As `posix_memalign(3)`.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    let f = next_fn!(
        POSIX_MEMALIGN,
        c"posix_memalign",
        c"posix_memalign",
        PosixMemalign
    );
    let Some(f) = f else {
        let p = arena(size, align);
        if p.is_null() {
            return libc::ENOMEM;
        }
        // SAFETY: the caller's out pointer, which `posix_memalign` writes.
        unsafe { out.write(p) };
        return 0;
    };
    // SAFETY: the caller's arguments, as given.
    let r = unsafe { f(out, align, size) };
    if r == 0 && ACTIVE.load(Relaxed) {
        // SAFETY: on success `posix_memalign` wrote the block's address through `out`.
        let p = unsafe { out.read() };
        if !p.is_null() {
            ts::alloc::note_allocated(p as usize, size);
        }
    }
    r
}

/// Interposes `malloc_usable_size(3)`: an arena block's own size, else the next one's answer.
///
/// # Safety
/// As `malloc_usable_size(3)`.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if in_arena(p) {
        return arena_size(p);
    }
    match next_fn!(
        USABLE,
        c"malloc_usable_size",
        c"malloc_usable_size",
        UsableSize
    ) {
        // SAFETY: the caller's pointer, as given.
        Some(f) => unsafe { f(p) },
        None => 0,
    }
}
