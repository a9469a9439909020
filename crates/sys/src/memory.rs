//! Memory of the sampler's own: zeroed mappings the kernel fills on first touch, kept out of
//! fork children.

/// Types whose all-zero bytes are a valid value: integers, atomics of them, and arrays and
/// `struct`s of those only.
///
/// # Safety
/// Implement it only for such types.
pub unsafe trait Zeroable: Sized {}

/// `n` values of all-zero bytes in a mapping of their own, which the kernel fills on first
/// touch: memory a sampler reserves for its busiest moments costs nothing at start. (The
/// allocator's `calloc` clears with `memset` whatever it does not map afresh, below its
/// mapping threshold: the sampler's 16 and 64 KiB tables were touched at every start, page
/// by page: 6 % of the CPU time of a profiled `/bin/true`.)
///
/// Not copied into a fork child (`MADV_DONTFORK`): see [`not_into_fork_children`].
pub fn zeroed_slice<T: Zeroable>(n: usize) -> Zeroed<T> {
    mapped_zeroed(n, 0)
}

/// [`zeroed_slice`], its mapping made with `flags` added (`MAP_POPULATE`: every page
/// allocated at once, for memory that is all written at once).
fn mapped_zeroed<T: Zeroable>(n: usize, flags: libc::c_int) -> Zeroed<T> {
    let bytes = std::mem::size_of::<T>()
        .checked_mul(n)
        .expect("a table that fits in memory");
    if bytes == 0 {
        return Zeroed {
            ptr: std::ptr::NonNull::dangling(),
            len: n,
            mapped: 0,
        };
    }
    assert!(std::mem::align_of::<T>() <= 4096, "a page-aligned mapping");
    // SAFETY: a fresh private anonymous mapping (no address asked, no descriptor): it
    // touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::alloc::handle_alloc_error(
            std::alloc::Layout::array::<T>(n).expect("a table that fits in memory"),
        );
    }
    not_into_fork_children(p, bytes);
    Zeroed {
        ptr: std::ptr::NonNull::new(p.cast()).expect("mmap never maps page 0 for us"),
        len: n,
        mapped: bytes,
    }
}

/// A table from [`zeroed_slice`]: `len` values in a mapping of `mapped` bytes of its own
/// (none for an empty table), unmapped when dropped.
pub struct Zeroed<T> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
    mapped: usize,
}

impl<T> std::ops::Deref for Zeroed<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` valid `T`s (zeroed, `T: Zeroable`, or written since
        // through `&`), or is dangling and aligned with nothing to read when empty.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for Zeroed<T> {
    fn drop(&mut self) {
        if self.mapped > 0 {
            // SAFETY: as in `deref`; each value is dropped once, here, before its memory
            // goes.
            unsafe {
                std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(
                    self.ptr.as_ptr(),
                    self.len,
                ))
            };
            // SAFETY: the mapping `zeroed_slice` made for this table, unmapped once.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.mapped) };
        }
    }
}

impl<T> std::fmt::Debug for Zeroed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Zeroed({} values, {} bytes mapped)",
            self.len, self.mapped
        )
    }
}

/// An empty table (no mapping).
impl<T: Zeroable> Default for Zeroed<T> {
    fn default() -> Self {
        zeroed_slice(0)
    }
}

// SAFETY: a `Zeroed<T>` owns its values as a `Box<[T]>` does; it is sent and shared as
// they can be.
unsafe impl<T: Send> Send for Zeroed<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Zeroed<T> {}

// SAFETY: an integer's atomic: all-zero bytes are 0.
unsafe impl Zeroable for std::sync::atomic::AtomicU32 {}
// SAFETY: as for `AtomicU32`.
unsafe impl Zeroable for std::sync::atomic::AtomicU64 {}

// SAFETY: an integer: all-zero bytes are 0.
unsafe impl Zeroable for u8 {}

/// `bytes`, copied into a mapping of their own that fork children do not get (see
/// [`not_into_fork_children`]): the unwind tables the sampler's drain thread loads, which
/// only it reads.
pub fn bytes_not_forked(bytes: &[u8]) -> Zeroed<u8> {
    // Every page is written below: allocated in one system call, not one fault each (cc1's
    // 2.8 MB of tables: 700 faults, 60 % of their loading on the drain thread).
    let copy = mapped_zeroed::<u8>(bytes.len(), libc::MAP_POPULATE);
    if !bytes.is_empty() {
        // SAFETY: `copy` owns `bytes.len()` writable bytes of a fresh mapping that nothing
        // else references yet; the two do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), copy.ptr.as_ptr(), bytes.len()) };
    }
    copy
}

/// Tells the kernel not to copy the mapping at `p` (`len` bytes, from `mmap`) into the
/// children of `fork`: there it is not mapped at all.
///
/// Why: each `fork` copies the page table entries of every page a process has touched, and
/// a child that execs at once throws them away again. A shell profiled under `record` forks
/// for every command it runs; the sampler's tables and loaded unwind tables (0.5–0.8 MiB
/// touched) cost each of its forks about 0.05 ms on a 2-core EPYC VM (1 MiB of touched
/// memory costs a `fork` and `exec` ~0.09 ms there: `crates/preload/bench/fork_memory.c`).
///
/// Safe because a fork child never reads these: it has none of the sampler's threads or
/// timers (the drain thread, which alone reads the loaded tables, is not copied by `fork`);
/// the signal handler reads the tables only for a signal from a timer or perf event, none
/// of the sampler's is inherited, and the handler forgets the parent's state in the child
/// as `fork` returns there (`sampler::forget_shared_in_fork_child`: a timer the child makes
/// with the same signal is counted stray); a sampler inherited across `fork` is leaked,
/// never stopped or read (`sampler::finish`). A child made by a raw `clone` system call,
/// which runs no fork handler, and then sent such a timer signal would fault. Failure of the
/// advice (an old kernel) changes nothing but the cost.
// madvise reads no memory through `p`: a range that is not a mapping only makes it fail.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn not_into_fork_children(p: *mut libc::c_void, len: usize) {
    // SAFETY: advice on a mapping the caller made and owns; it changes no memory.
    unsafe { libc::madvise(p, len, libc::MADV_DONTFORK) };
}
