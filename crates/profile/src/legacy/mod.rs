//! pprof's legacy (pre-profile.proto) formats, read as Go's pprof reads them
//! (`github.com/google/pprof/profile`, `legacy_profile.go` and `legacy_java_profile.go`):
//!
//! - gperftools' binary CPU profile (32- or 64-bit words, either byte order), followed by the
//!   text of `/proc/self/maps`; with a Java flag in its header, the Java agent's CPU profile
//!   followed by its symbol table ([`cpu`]);
//! - gperftools' text heap (`heap profile: ... @ heap_v2/524288`), growth and fragmentation
//!   profiles, Go's count profiles (`threadcreate profile: total 7`), threadz dumps and
//!   contention profiles (`--- contentionz 1 ---`) ([`text`]);
//! - the Java agent's heap and contention profiles (`--- heapz 1 ---`) ([`java`]).
//!
//! The readers are tried in pprof's order and the first that accepts the data wins. A reader
//! whose header matched but which then finds something pprof rejects as "unrecognized" does
//! not end the search (pprof would go on to the next format); its reason is kept and reported
//! when no later reader accepts the data. Errors pprof reports as errors end the search.
//!
//! Numbers are parsed with Go's `strconv` rules (base prefixes, underscores) and computed
//! with Go's wrapping integer arithmetic, so that odd values give what pprof gives.

mod build;
mod cpu;
mod java;
mod maps;
mod scan;
#[cfg(test)]
mod tests;
mod text;

use crate::error::ErrorKind;
use crate::model::Profile;
use build::Outcome;

/// Parses a legacy profile; `None` when no legacy format recognises the data.
pub(super) fn parse(data: &[u8]) -> Option<Result<Profile, ErrorKind>> {
    if data.is_empty() {
        return None;
    }
    // pprof's parseLegacy order.
    let readers: [fn(&[u8]) -> Outcome; 6] = [
        cpu::parse,
        text::parse_heap,
        text::parse_go_count,
        text::parse_thread,
        text::parse_contention,
        java::parse,
    ];
    let mut rejected = None;
    for reader in readers {
        match reader(data) {
            Outcome::No => {}
            Outcome::Rejected(e) => {
                rejected.get_or_insert(e);
            }
            Outcome::Done(Ok(mut p)) => {
                add_frame_info(&mut p);
                return Some(Ok(p));
            }
            Outcome::Done(Err(e)) => return Some(Err(e)),
        }
    }
    rejected.map(Err)
}

/// pprof's addLegacyFrameInfo: the frames views drop, by kind of profile.
fn add_frame_info(p: &mut Profile) {
    let types: Vec<&str> = p.sample_types.iter().map(|t| t.ty.as_str()).collect();
    let heap: [&[&str]; 5] = [
        &["allocations", "size"],
        &["objects", "space"],
        &["inuse_objects", "inuse_space"],
        &["alloc_objects", "alloc_space"],
        &[
            "alloc_objects",
            "alloc_space",
            "inuse_objects",
            "inuse_space",
        ],
    ];
    let (drop, keep) = if heap.iter().any(|h| *h == types) {
        (ALLOC_FRAMES.join("|"), ALLOC_KEEP_FRAMES.join("|"))
    } else if types == ["contentions", "delay"] {
        (LOCK_FRAMES.join("|"), String::new())
    } else {
        (CPU_PROFILER_FRAMES.join("|"), String::new())
    };
    p.drop_frames = drop;
    p.keep_frames = keep;
}

const ALLOC_FRAMES: &[&str] = &[
    "calloc",
    "cfree",
    "malloc",
    "free",
    "memalign",
    "do_memalign",
    "(__)?posix_memalign",
    "pvalloc",
    "valloc",
    "realloc",
    "tcmalloc::.*",
    "tc_calloc",
    "tc_cfree",
    "tc_malloc",
    "tc_free",
    "tc_memalign",
    "tc_posix_memalign",
    "tc_pvalloc",
    "tc_valloc",
    "tc_realloc",
    "tc_new",
    "tc_delete",
    "tc_newarray",
    "tc_deletearray",
    "tc_new_nothrow",
    "tc_newarray_nothrow",
    "malloc_zone_malloc",
    "malloc_zone_calloc",
    "malloc_zone_valloc",
    "malloc_zone_realloc",
    "malloc_zone_memalign",
    "malloc_zone_free",
    r"runtime\..*",
    "BaseArena::.*",
    "(::)?do_malloc_no_errno",
    "(::)?do_malloc_pages",
    "(::)?do_malloc",
    "DoSampledAllocation",
    "MallocedMemBlock::MallocedMemBlock",
    "_M_allocate",
    "__builtin_(vec_)?delete",
    "__builtin_(vec_)?new",
    "__gnu_cxx::new_allocator::allocate",
    "__libc_malloc",
    "__malloc_alloc_template::allocate",
    "allocate",
    "cpp_alloc",
    r"operator new(\[\])?",
    "simple_alloc::allocate",
];

const ALLOC_KEEP_FRAMES: &[&str] = &[
    r"runtime\.panic",
    r"runtime\.reflectcall",
    r"runtime\.call[0-9]*",
];

const CPU_PROFILER_FRAMES: &[&str] = &[
    "ProfileData::Add",
    "ProfileData::prof_handler",
    "CpuProfiler::prof_handler",
    "__pthread_sighandler",
    "__restore",
];

const LOCK_FRAMES: &[&str] = &[
    "RecordLockProfileData",
    "(base::)?RecordLockProfileData.*",
    "(base::)?SubmitMutexProfileData.*",
    "(base::)?SubmitSpinLockProfileData.*",
    "(base::Mutex::)?AwaitCommon.*",
    "(base::Mutex::)?Unlock.*",
    "(base::Mutex::)?UnlockSlow.*",
    "(base::Mutex::)?ReaderUnlock.*",
    "(base::MutexLock::)?~MutexLock.*",
    "(Mutex::)?AwaitCommon.*",
    "(Mutex::)?Unlock.*",
    "(Mutex::)?UnlockSlow.*",
    "(Mutex::)?ReaderUnlock.*",
    "(MutexLock::)?~MutexLock.*",
    "(SpinLock::)?Unlock.*",
    "(SpinLock::)?SlowUnlock.*",
    "(SpinLockHolder::)?~SpinLockHolder.*",
];
