//! Perf events (perf_event_open(2)): an event opened on a thread, signalled to that thread
//! or sampling into a ring shared with the kernel, its count and its id.
//!
//! Events are held as raw descriptors, not owned handles: a program may close every
//! descriptor it did not open and reuse the number, so the caller checks [`id`] before it
//! disables, reads or closes one (the sampler's `still_ours`); a handle that closed itself
//! on drop would close one of the program's files.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering::*};

/// `perf_event_attr` up to `clockid` (`PERF_ATTR_SIZE_VER3`, 96 bytes). The libc crate does
/// not declare it; the kernel accepts every published size (perf_event_open(2), "size").
#[repr(C)]
#[derive(Default, Debug, Clone)]
pub struct Attr {
    /// `PERF_TYPE_*`.
    pub ty: u32,
    /// Set by [`open`].
    pub size: u32,
    /// The event of that type (`PERF_COUNT_SW_*`, ...).
    pub config: u64,
    /// Events (nanoseconds for a clock) between two samples.
    pub sample_period: u64,
    /// `PERF_SAMPLE_*`: what a sample record carries.
    pub sample_type: u64,
    /// `PERF_FORMAT_*`: what a read returns.
    pub read_format: u64,
    /// The bitfield: [`DISABLED`], [`EXCLUDE_KERNEL`], ...
    pub flags: u64,
    /// Samples between two wake-ups (or signals).
    pub wakeup_events: u32,
    /// Breakpoint type (unused here).
    pub bp_type: u32,
    /// Extensions of `config`.
    pub config1: u64,
    /// Extensions of `config1`.
    pub config2: u64,
    /// `PERF_SAMPLE_BRANCH_*`.
    pub branch_sample_type: u64,
    /// Which user registers a [`SAMPLE_REGS_USER`] sample carries (the arch's `perf_regs.h`
    /// numbering).
    pub sample_regs_user: u64,
    /// Bytes of user stack a [`SAMPLE_STACK_USER`] sample copies.
    pub sample_stack_user: u32,
    /// The clock of sample times.
    pub clockid: i32,
}

/// `PERF_TYPE_SOFTWARE`.
pub const TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_TASK_CLOCK`: the thread's CPU time, an hrtimer while it runs.
pub const COUNT_SW_TASK_CLOCK: u64 = 1;
/// `attr.flags` bit: opened disabled.
pub const DISABLED: u64 = 1;
/// `attr.flags` bit: not counting in kernel mode (required of unprivileged users by
/// `perf_event_paranoid` = 2, the usual default).
pub const EXCLUDE_KERNEL: u64 = 1 << 5;
/// `attr.flags` bit: not counting in the hypervisor.
pub const EXCLUDE_HV: u64 = 1 << 6;
/// `attr.flags` bit: no kernel part in sampled call chains.
pub const EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
/// `PERF_SAMPLE_TID`.
pub const SAMPLE_TID: u64 = 1 << 1;
/// `PERF_SAMPLE_CALLCHAIN`.
pub const SAMPLE_CALLCHAIN: u64 = 1 << 5;
/// `PERF_SAMPLE_REGS_USER`.
pub const SAMPLE_REGS_USER: u64 = 1 << 12;
/// `PERF_SAMPLE_STACK_USER`.
pub const SAMPLE_STACK_USER: u64 = 1 << 13;
/// `perf_event_header.type` of a sample.
pub const RECORD_SAMPLE: u32 = 9;
/// `perf_event_header.type` of a loss (samples the kernel found no room for).
pub const RECORD_LOST: u32 = 2;
/// Call-chain entries at or above this are context markers (`PERF_CONTEXT_USER`, ...).
pub const CONTEXT_MAX: u64 = -4095i64 as u64;

const FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
/// `_IOR('$', 7, __u64 *)`: the event's id, unique for the kernel's lifetime (Linux 3.12+).
const IOC_ID: libc::c_ulong = 0x8008_2407;
/// fcntl(2) commands the libc crate does not declare for glibc targets.
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;

/// `struct f_owner_ex` (fcntl(2)); not declared by the libc crate for glibc targets.
#[repr(C)]
struct FOwnerEx {
    ty: libc::c_int,
    pid: libc::pid_t,
}

/// Opens the event `attr` on thread `tid` (0: the calling one), any CPU, close-on-exec,
/// never on descriptors 0-2 (a program started with them closed opens its own there).
pub fn open(attr: &Attr, tid: i32) -> io::Result<libc::c_int> {
    let attr = Attr {
        size: std::mem::size_of::<Attr>() as u32,
        ..attr.clone()
    };
    // SAFETY: `attr` is a valid perf_event_attr of the size it declares; the kernel copies it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const Attr,
            tid as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            FLAG_FD_CLOEXEC,
        )
    } as libc::c_int;
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    crate::fd::above_stdio(fd)
}

/// Whether perf events may be opened here (the kernel's `perf_event_paranoid`, a seccomp
/// filter), asked without making one: an event of a type no PMU has gets `ENOENT` once the
/// checks that refuse it are passed. A real event is not the probe: the first per-task event
/// after a second without any waits for an RCU grace period (the kernel switches its
/// context-switch hooks on), 10-20 ms that a caller about to start a program would make it
/// wait.
pub fn permitted() -> bool {
    let attr = Attr {
        ty: u32::MAX - 1,
        sample_period: 10_000_000,
        // What the real events ask.
        flags: DISABLED | EXCLUDE_KERNEL | EXCLUDE_HV,
        ..Attr::default()
    };
    match open(&attr, 0) {
        Ok(fd) => {
            close(fd);
            true
        }
        Err(e) => matches!(
            e.raw_os_error(),
            Some(libc::ENOENT | libc::EINVAL | libc::EOPNOTSUPP)
        ),
    }
}

fn ioctl(fd: libc::c_int, request: libc::c_ulong) -> io::Result<()> {
    // SAFETY: an argument-less perf ioctl; on any other kind of descriptor it fails and
    // touches no memory.
    match unsafe { libc::ioctl(fd, request as _, 0) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Starts the event open as `fd` counting (and sampling).
pub fn enable(fd: libc::c_int) -> io::Result<()> {
    ioctl(fd, IOC_ENABLE)
}

/// Stops the event open as `fd`; its count stays readable.
pub fn disable(fd: libc::c_int) -> io::Result<()> {
    ioctl(fd, IOC_DISABLE)
}

/// Closes `fd`. The caller knows it is its own event (see the module docs).
pub fn close(fd: libc::c_int) {
    // SAFETY: closes a descriptor the caller owns, once; no memory involved.
    unsafe { libc::close(fd) };
}

/// The id of the perf event open as `fd`, if it is one.
pub fn id(fd: libc::c_int) -> Option<u64> {
    let mut id: u64 = 0;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64 into `id`, valid for the call; on a
    // descriptor that is not a perf event it fails and writes nothing.
    let r = unsafe { libc::ioctl(fd, IOC_ID as _, &mut id as *mut u64) };
    (r == 0).then_some(id)
}

/// The count of the event open as `fd` (one u64: an event without a read format), which
/// stays readable after its thread exits. The caller knows `fd` is its perf event.
pub fn count(fd: libc::c_int) -> Option<u64> {
    let mut count: u64 = 0;
    // SAFETY: reads at most 8 bytes into `count`, valid for the call.
    let n = unsafe { libc::read(fd, &mut count as *mut u64 as *mut libc::c_void, 8) };
    (n == 8).then_some(count)
}

/// Has the event open as `fd` send `signal` to thread `tid` at each wake-up (`O_ASYNC`,
/// `F_SETSIG`, `F_SETOWN_EX` with `F_OWNER_TID`), the descriptor non-blocking.
pub fn signal_thread(fd: libc::c_int, signal: libc::c_int, tid: i32) -> io::Result<()> {
    let owner = FOwnerEx {
        ty: F_OWNER_TID,
        pid: tid,
    };
    // Three calls on a descriptor with valid arguments (`owner` outlives its call); on a
    // descriptor of another kind they fail or change only its flags.
    // SAFETY: as just said.
    let ok = unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_ASYNC | libc::O_NONBLOCK) } == 0
        // SAFETY: as above.
        && unsafe { libc::fcntl(fd, F_SETSIG, signal) } == 0
        // SAFETY: as above.
        && unsafe { libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) } == 0;
    match ok {
        true => Ok(()),
        false => Err(io::Error::last_os_error()),
    }
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize
}

/// An event's ring (a control page, then a power of two of data pages), mapped shared with
/// the kernel, which writes sample records into it; unmapped when dropped (its descriptor
/// is not touched). `mem::forget` keeps it mapped to the process's end.
#[derive(Debug)]
pub struct Ring {
    /// The mapping's address (an integer: the ring moves between threads).
    at: usize,
    len: usize,
}

/// Offsets in the control page (struct perf_event_mmap_page) of `data_head`, how far the
/// kernel has written, and `data_tail`, how far the reader has read.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

impl Ring {
    /// Maps the ring of the event open as `fd`, with `data_pages` (a power of two) of data.
    pub fn map(fd: libc::c_int, data_pages: usize) -> io::Result<Ring> {
        let len = page_size() * (1 + data_pages);
        // SAFETY: maps the event's ring as perf_event_open(2) describes, shared with the
        // kernel, at an address the kernel picks; checked against MAP_FAILED.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Ring {
            at: at as usize,
            len,
        })
    }

    /// Its data pages.
    pub fn data_pages(&self) -> usize {
        self.len / page_size() - 1
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        let word = (self.at as *const u8).wrapping_add(offset) as *const AtomicU64;
        // SAFETY: in the control page of the mapping, live while `self` is (unmapped only on
        // drop), 8-aligned; the kernel reads or writes it concurrently, hence an atomic.
        unsafe { &*word }
    }

    /// True if and only if the kernel has written no record into it (no sample, no loss)
    /// since it was mapped.
    pub fn untouched(&self) -> bool {
        self.word(DATA_HEAD).load(Acquire) == 0
    }

    /// Calls `record` with each record the kernel has finished, oldest first (its
    /// `perf_event_header` included, copied whole into `scratch` even where it wraps
    /// around the end of the data pages), then gives their room back to the kernel. Stops
    /// at a record whose header is malformed, giving back what came before it.
    pub fn drain(&self, scratch: &mut Vec<u8>, mut record: impl FnMut(&[u8])) {
        let size = self.len - page_size();
        // The data pages follow the control page inside the mapping.
        let data = (self.at as *const u8).wrapping_add(page_size());
        let end = self.word(DATA_HEAD).load(Acquire);
        let mut at = self.word(DATA_TAIL).load(Relaxed);
        // Copies `n` (at most `size`) bytes from `from`, in up to two pieces.
        let copy = |from: u64, n: usize, out: &mut Vec<u8>| {
            out.clear();
            out.reserve(n);
            let start = (from % size as u64) as usize;
            let first = n.min(size - start);
            let to = out.as_mut_ptr();
            // SAFETY: `start..start + first` lies inside the data pages (`n <= size`); the
            // bytes between tail and head are the kernel's finished records; `out` has room
            // for `n` bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.wrapping_add(start), to, first) };
            // SAFETY: as above, for `0..n - first`, the part that wrapped, after the first.
            unsafe { std::ptr::copy_nonoverlapping(data, to.wrapping_add(first), n - first) };
            // SAFETY: the `n` bytes were just written.
            unsafe { out.set_len(n) };
        };
        while at + 8 <= end {
            copy(at, 8, scratch);
            let n = u16::from_ne_bytes([scratch[6], scratch[7]]) as usize;
            if n < 8 || n > size || at + n as u64 > end {
                break;
            }
            copy(at, n, scratch);
            record(scratch);
            at += n as u64;
        }
        self.word(DATA_TAIL).store(at, Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping `map` made, once (on drop); nothing borrows it then.
        unsafe { libc::munmap(self.at as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event's ring holds the samples the kernel wrote, each drained once, with the
    /// thread's id; its count is the thread's CPU time. Skipped only where perf events are
    /// not permitted (the kernel's setting, not ours).
    #[test]
    fn a_task_clock_ring_holds_this_threads_samples() {
        if !permitted() {
            eprintln!("perf events not permitted here: skipped");
            return;
        }
        let attr = Attr {
            ty: TYPE_SOFTWARE,
            config: COUNT_SW_TASK_CLOCK,
            sample_period: 100_000,
            sample_type: SAMPLE_TID,
            flags: DISABLED | EXCLUDE_KERNEL | EXCLUDE_HV,
            ..Attr::default()
        };
        let fd = open(&attr, 0).expect("open");
        let id0 = id(fd).expect("an id");
        let ring = Ring::map(fd, 2).expect("map");
        assert_eq!(ring.data_pages(), 2);
        assert!(ring.untouched());
        enable(fd).expect("enable");
        let tid = crate::thread::gettid() as u32;
        let (mut seen, mut scratch) = (0, Vec::new());
        let start = std::time::Instant::now();
        // Spin until ten samples (1 ms of CPU) have come, with a deadline for a machine
        // that starves this thread.
        while seen < 10 && start.elapsed() < std::time::Duration::from_secs(60) {
            std::hint::black_box((0..10_000u64).sum::<u64>());
            ring.drain(&mut scratch, |r| {
                let ty = u32::from_ne_bytes(r[0..4].try_into().unwrap());
                if ty == RECORD_SAMPLE {
                    assert_eq!(u32::from_ne_bytes(r[12..16].try_into().unwrap()), tid);
                    seen += 1;
                }
            });
        }
        assert!(seen >= 10, "{seen} samples");
        assert!(!ring.untouched());
        disable(fd).unwrap();
        assert!(
            count(fd).expect("a count") >= 1_000_000,
            "1 ms of CPU or more"
        );
        assert_eq!(id(fd), Some(id0));
        drop(ring);
        close(fd);
        assert_eq!(id(fd), None, "closed");
    }
}
