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

mod cpu;
mod java;
mod maps;
#[cfg(test)]
mod tests;
mod text;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;

use crate::error::ErrorKind;
use crate::model::{Location, Profile};

/// What one reader made of the data.
#[allow(clippy::large_enum_variant)] // one per reader and file: moving it costs nothing
enum Outcome {
    /// Not this format.
    No,
    /// The header matched, but pprof would treat the data as not this format after all and try
    /// the next reader; the reason is reported if none accepts it.
    Rejected(ErrorKind),
    /// Parsed, or failed in a way that ends the search.
    Done(Result<Profile, ErrorKind>),
}

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

/// A regex compiled once; the patterns are constants of this module.
fn regex(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("constant pattern compiles"))
}

/// A capture group's text ("" when it did not take part, as in Go).
fn group<'t>(c: &regex::Captures<'t>, i: usize) -> &'t str {
    c.get(i).map_or("", |m| m.as_str())
}

/// Go's `bufio.Scanner` with `ScanLines`: lines split at `\n`, a trailing `\r` dropped, a last
/// line without `\n` kept; after the last line, the current text is empty.
struct Lines<'a> {
    data: &'a [u8],
    pos: usize,
    token: &'a [u8],
    /// 1-based number of the current line (0 before the first).
    number: usize,
}

impl<'a> Lines<'a> {
    fn new(data: &'a [u8]) -> Lines<'a> {
        Lines {
            data,
            pos: 0,
            token: &[],
            number: 0,
        }
    }

    /// Advances to the next line; false (and the text empty) at the end.
    fn scan(&mut self) -> bool {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        if rest.is_empty() {
            self.token = &[];
            return false;
        }
        let mut end = 0;
        while end < rest.len() && rest[end] != b'\n' {
            end += 1;
        }
        let line = &rest[..end];
        self.token = line.strip_suffix(b"\r").unwrap_or(line);
        self.pos += (end + 1).min(rest.len());
        self.number += 1;
        true
    }

    /// The current line as text (invalid UTF-8 replaced, which Go's regexps treat alike).
    fn text(&self) -> Cow<'a, str> {
        String::from_utf8_lossy(self.token)
    }

    /// The current line's number.
    fn line_number(&self) -> usize {
        self.number
    }
}

/// Text from the file as quoted in an error message: at most 40 characters.
fn excerpt(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(40) {
        Some((i, _)) => Cow::Owned(format!("{}...", &s[..i])),
        None => Cow::Borrowed(s),
    }
}

/// pprof's isSpaceOrComment.
fn is_space_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// pprof's isMemoryMapSentinel.
fn is_memory_map_sentinel(line: &str) -> bool {
    // Both contain an `M`; sample lines have none.
    line.contains('M')
        && (line.contains("--- Memory map: ---") || line.contains("MAPPED_LIBRARIES:"))
}

/// Go's `strconv.ParseUint` (base 0: `0x`, `0o`, `0b` and leading-`0` octal prefixes and
/// underscores between digits; otherwise only digits of `base`).
fn go_parse_uint(s: &str, base: u32) -> Option<u64> {
    let b = s.as_bytes();
    let base0 = base == 0;
    let (radix, digits): (u64, &[u8]) = if base0 {
        match b {
            [] => return None,
            [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'b') => (2, &b[2..]),
            [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'o') => (8, &b[2..]),
            [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'x') => (16, &b[2..]),
            [b'0', rest @ ..] => (8, rest),
            _ => (10, b),
        }
    } else {
        if b.is_empty() {
            return None;
        }
        (u64::from(base), b)
    };
    let mut n: u64 = 0;
    let mut underscores = false;
    for &c in digits {
        let d = match c {
            b'_' if base0 => {
                underscores = true;
                continue;
            }
            b'0'..=b'9' => c - b'0',
            b'a'..=b'z' | b'A'..=b'Z' => c.to_ascii_lowercase() - b'a' + 10,
            _ => return None,
        };
        if u64::from(d) >= radix {
            return None;
        }
        n = n.checked_mul(radix)?.checked_add(u64::from(d))?;
    }
    if underscores && !underscores_ok(b) {
        return None;
    }
    Some(n)
}

/// Go's rule for underscores in base-0 literals: only between digits, or between a base
/// prefix and a digit.
fn underscores_ok(s: &[u8]) -> bool {
    let s = match s {
        [b'+' | b'-', rest @ ..] => rest,
        _ => s,
    };
    // b'^': start, b'0': digit or prefix, b'_': underscore, b'!': anything else.
    let mut saw = b'^';
    let mut hex = false;
    let mut i = 0;
    if let [b'0', p, ..] = s {
        let p = p.to_ascii_lowercase();
        if matches!(p, b'b' | b'o' | b'x') {
            i = 2;
            saw = b'0';
            hex = p == b'x';
        }
    }
    for &c in s.get(i..).unwrap_or_default() {
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else if saw == b'_' {
            return false;
        } else {
            saw = b'!';
        }
    }
    saw != b'_'
}

/// Go's `strconv.ParseInt(s, base, 64)`.
fn go_parse_int(s: &str, base: u32) -> Option<i64> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let u = go_parse_uint(digits, base)?;
    if neg {
        if u > 1 << 63 {
            return None;
        }
        Some((u as i64).wrapping_neg())
    } else {
        i64::try_from(u).ok()
    }
}

/// Go's float64 to int64 conversion as amd64 does it: out of range or NaN gives the most
/// negative value.
fn go_f64_to_i64(x: f64) -> i64 {
    // -2^63 and 2^63, exactly.
    let (low, high) = (i64::MIN as f64, -(i64::MIN as f64));
    if x.is_nan() || !(low..high).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// pprof's scaleHeapSample: a sampled heap record's count and size divided by the
/// probability `1 - exp(-avg/rate)` that an allocation of the average size was sampled.
fn scale_heap_sample(count: i64, size: i64, rate: i64) -> (i64, i64) {
    if count == 0 || size == 0 {
        return (0, 0);
    }
    if rate <= 1 {
        return (count, size);
    }
    let avg = size as f64 / count as f64;
    let scale = 1.0 / (1.0 - (-avg / rate as f64).exp());
    (
        go_f64_to_i64(count as f64 * scale),
        go_f64_to_i64(size as f64 * scale),
    )
}

/// pprof's parseHexAddresses: every `0x[0-9a-f]+` in `s` (leftmost, longest, not
/// overlapping, as the regex finds them); `Err` names one over 64 bits.
fn parse_hex_addresses(s: &str) -> Result<Vec<u64>, String> {
    let is_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(rest) = bytes.get(i..) {
        if rest.len() < 3 {
            break;
        }
        if rest.starts_with(b"0x") && rest.get(2).is_some_and(|&b| is_hex(b)) {
            let mut digits = 1;
            while rest.get(2 + digits).is_some_and(|&b| is_hex(b)) {
                digits += 1;
            }
            // ASCII from `i` on: the slice is at character boundaries.
            let number = s.get(i..i + 2 + digits).unwrap_or_default();
            match go_parse_uint(number, 0) {
                Some(a) => out.push(a),
                None => return Err(format!("address {} is over 64 bits", excerpt(number))),
            }
            i += 2 + digits;
        } else {
            i += 1;
        }
    }
    Ok(out)
}

/// A cursor for matching a line the way a regex without ambiguity would: each step takes
/// the longest run it can. Readers use it for the usual shape of a line and fall back to the
/// regex when it fails (the regex then decides), so results equal the regex's.
struct Scan<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Scan<'a> {
    fn new(s: &'a str) -> Scan<'a> {
        Scan { s, i: 0 }
    }

    /// The longest run of ASCII bytes `f` accepts (possibly empty).
    fn run(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.i;
        let bytes = self.s.as_bytes();
        while let Some(&b) = bytes.get(self.i) {
            if !(b.is_ascii() && f(b)) {
                break;
            }
            self.i += 1;
        }
        self.s.get(start..self.i).unwrap_or_default()
    }

    /// As `run`, but at least one byte.
    fn run1(&mut self, f: impl Fn(u8) -> bool) -> Option<&'a str> {
        let r = self.run(f);
        (!r.is_empty()).then_some(r)
    }

    /// `-?[0-9]+`.
    fn signed_digits(&mut self) -> Option<&'a str> {
        let start = self.i;
        if self.s.as_bytes().get(start) == Some(&b'-') {
            self.i += 1;
        }
        self.run1(|b| b.is_ascii_digit())?;
        self.s.get(start..self.i)
    }

    fn digits(&mut self) -> Option<&'a str> {
        self.run1(|b| b.is_ascii_digit())
    }

    fn spaces(&mut self) -> &'a str {
        self.run(|b| b == b' ')
    }

    fn literal(&mut self, lit: &str) -> Option<()> {
        let rest = self.s.get(self.i..)?;
        rest.starts_with(lit).then(|| self.i += lit.len())
    }

    /// The rest of the line.
    fn rest(&mut self) -> &'a str {
        let r = self.s.get(self.i..).unwrap_or_default();
        self.i = self.s.len();
        r
    }
}

/// `[ x0-9a-f]`: the characters of a sample line's address list.
fn is_address_list_byte(b: u8) -> bool {
    b == b' ' || b == b'x' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// Go's `\s`.
fn is_go_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

/// A profile being read: locations are created once per address, in first-seen order.
struct Builder {
    p: Profile,
    by_address: HashMap<u64, u32>,
}

impl Builder {
    fn new(p: Profile) -> Builder {
        Builder {
            p,
            by_address: HashMap::new(),
        }
    }

    /// The index of the location at `address`, created if new.
    fn location(&mut self, address: u64) -> u32 {
        let locations = &mut self.p.locations;
        *self.by_address.entry(address).or_insert_with(|| {
            let index = index_u32(locations.len());
            locations.push(Location {
                address,
                ..Location::default()
            });
            index
        })
    }

    /// The address of the location at `index`.
    fn address(&self, index: u32) -> u64 {
        self.p
            .locations
            .get(index as usize)
            .map_or(0, |l| l.address)
    }
}

/// An index as stored in the model (indices come from vectors built from the file's bytes,
/// far below `u32::MAX` within the loader's size cap).
fn index_u32(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// pprof's ParseMemoryMapFromScanner: reads the mappings from the rest of `lines`, then
/// renumbers locations and functions by first use and attaches locations to mappings.
fn finish_with_maps(p: &mut Profile, lines: &mut Lines) {
    let mut mappings = maps::parse(lines);
    maps::massage(&mut mappings);
    p.mappings = mappings;
    remap_locations(p);
    remap_functions(p);
    maps::attach(p);
}

/// pprof's remapLocationIDs: keeps the locations samples use, in order of first use, with ids
/// 1, 2, ...
fn remap_locations(p: &mut Profile) {
    let mut new_index = vec![u32::MAX; p.locations.len()];
    let mut order = Vec::new();
    for s in &p.samples {
        p.stacks.map_span(s.stack, |l| {
            let Some(slot) = new_index.get_mut(l as usize) else {
                return l;
            };
            if *slot == u32::MAX {
                *slot = index_u32(order.len());
                order.push(l as usize);
            }
            *slot
        });
    }
    let old = std::mem::take(&mut p.locations);
    p.locations = order
        .into_iter()
        .enumerate()
        .map(|(i, o)| {
            let mut l = old.get(o).copied().unwrap_or_default();
            l.id = i as u64 + 1;
            l
        })
        .collect();
}

/// pprof's remapFunctionIDs: keeps the functions locations use, in order of first use.
fn remap_functions(p: &mut Profile) {
    let mut new_index = vec![u32::MAX; p.functions.len()];
    let mut order = Vec::new();
    for l in &p.locations {
        for line in &mut p.lines[l.lines.range()] {
            let Some(slot) = new_index.get_mut(line.function as usize) else {
                continue;
            };
            if *slot == u32::MAX {
                *slot = index_u32(order.len());
                order.push(line.function as usize);
            }
            line.function = *slot;
        }
    }
    let old = std::mem::take(&mut p.functions);
    p.functions = order
        .into_iter()
        .enumerate()
        .map(|(i, o)| {
            let mut f = old.get(o).copied().unwrap_or_default();
            f.id = i as u64 + 1;
            f
        })
        .collect();
}

/// pprof's cleanupDuplicateLocations: drops the second frame when it is the leaf again (taken
/// both from the signal context and from unwinding, and adjusted by -1).
fn cleanup_duplicate_locations(p: &mut Profile) {
    for s in &mut p.samples {
        let mut stack = p.stacks.get(s.stack);
        if let (Some(first), Some(second)) = (stack.next(), stack.next()) {
            let a0 = p.locations.get(first as usize).map_or(0, |l| l.address);
            let a1 = p.locations.get(second as usize).map_or(0, |l| l.address);
            if a0 == a1.wrapping_add(1) {
                p.stacks.remove(&mut s.stack, 1);
            }
        }
    }
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
