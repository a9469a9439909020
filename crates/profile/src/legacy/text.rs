//! gperftools' and Go's text profiles, as pprof reads them: heap (`heap profile: ... @
//! heap_v2/524288`), growth and fragmentation, Go's count profiles (`threadcreate profile:
//! total 7`), threadz dumps (`--- threadz 1 ---`) and contention (`--- contentionz 1 ---`).
//!
//! Each is a header, sample lines ending in `@ 0xADDR ...` (leaf first), and optionally a
//! memory map after a `--- Memory map: ---` or `MAPPED_LIBRARIES:` line. Callers' addresses
//! are moved back by one to land on the call instruction.

use std::sync::OnceLock;

use regex::{Captures, Regex};

use super::build::{cleanup_duplicate_locations, scale_heap_sample, Builder, Outcome};
use super::maps::finish_with_maps;
use super::scan::{
    excerpt, go_f64_to_i64, go_parse_int, go_parse_uint, group, is_address_list_byte,
    is_memory_map_sentinel, is_space_or_comment, parse_hex_addresses, regex, Lines, Scan,
};
use crate::error::ErrorKind;
use crate::model::{Format, Label, Profile, ValueType};

fn bad_line(format: &'static str, line: usize, what: impl Into<String>) -> ErrorKind {
    ErrorKind::BadLine {
        format,
        line,
        what: what.into(),
    }
}

fn new_profile(period_type: ValueType, period: i64, sample_types: Vec<ValueType>) -> Profile {
    Profile {
        period_type,
        period,
        sample_types,
        format: Format::LegacyText,
        ..Profile::default()
    }
}

/// Adds a sample whose addresses are all callers (moved back by one).
fn push_sample(b: &mut Builder, addresses: &[u64], values: Vec<i64>, labels: Vec<Label>) {
    let mut locations = Vec::with_capacity(addresses.len());
    for a in addresses {
        locations.push(b.location(a.wrapping_sub(1)));
    }
    b.p.push_sample(locations.iter().copied(), &values, &labels);
}

/// pprof's parseAdditionalSections: skips to the memory-map line, reads the map after it and
/// renumbers.
fn finish_sections(p: &mut Profile, s: &mut Lines) {
    while !is_memory_map_sentinel(&s.text()) && s.scan() {}
    finish_with_maps(p, s);
}

const HEAP: &str = "heap";

/// Reads a heap, growth or fragmentation profile.
pub(super) fn parse_heap(data: &[u8]) -> Outcome {
    static HEADER: OnceLock<Regex> = OnceLock::new();
    static GROWTH: OnceLock<Regex> = OnceLock::new();
    static FRAGMENTATION: OnceLock<Regex> = OnceLock::new();
    let counts = r"heap profile: *([0-9]+): *([0-9]+) *\[ *([0-9]+): *([0-9]+) *\]";
    let mut s = Lines::new(data);
    if !s.scan() {
        return Outcome::No;
    }
    let first = s.text();
    let (v2, period, has_alloc) = if let Some(c) =
        regex(&HEADER, &format!("{counts} *@ *(heap[_a-z0-9]*)/?([0-9]*)")).captures(&first)
    {
        match heap_header(&c) {
            Ok(h) => h,
            Err(what) => return Outcome::Rejected(bad_line(HEAP, 1, what)),
        }
    } else if regex(&GROWTH, &format!("{counts} @ growthz?")).is_match(&first)
        || regex(&FRAGMENTATION, &format!("{counts} @ fragmentationz?")).is_match(&first)
    {
        (false, 1, false)
    } else {
        return Outcome::No;
    };
    let sample_types = if has_alloc {
        // Alloc before inuse, so that the default (last) type is inuse_space.
        vec![
            ValueType::new("alloc_objects", "count"),
            ValueType::new("alloc_space", "bytes"),
            ValueType::new("inuse_objects", "count"),
            ValueType::new("inuse_space", "bytes"),
        ]
    } else {
        vec![
            ValueType::new("objects", "count"),
            ValueType::new("space", "bytes"),
        ]
    };
    let mut b = Builder::new(new_profile(
        ValueType::new("space", "bytes"),
        period,
        sample_types,
    ));
    while s.scan() {
        let text = s.text();
        let line = text.trim();
        if is_space_or_comment(line) {
            continue;
        }
        if is_memory_map_sentinel(line) {
            break;
        }
        match heap_sample(line, period, v2, has_alloc) {
            Ok((values, block_size, addresses)) => {
                let label = Label::Num {
                    key: "bytes".into(),
                    value: block_size,
                    unit: String::new(),
                };
                push_sample(&mut b, &addresses, values, vec![label]);
            }
            Err(what) => return Outcome::Done(Err(bad_line(HEAP, s.line_number(), what))),
        }
    }
    let mut p = b.p;
    finish_sections(&mut p, &mut s);
    Outcome::Done(Ok(p))
}

/// pprof's parseHeapHeader: (values are sampled "v2"-style, the sampling period, whether the
/// allocation counts differ from the in-use ones).
fn heap_header(c: &Captures) -> Result<(bool, i64, bool), String> {
    let rate = group(c, 6);
    let period = if rate.is_empty() {
        0
    } else {
        go_parse_int(rate, 10)
            .ok_or_else(|| format!("sampling period {} is over 63 bits", excerpt(rate)))?
    };
    // pprof compares the numbers as text.
    let has_alloc = (group(c, 3) != group(c, 1) && group(c, 3) != "0")
        || (group(c, 4) != group(c, 2) && group(c, 4) != "0");
    match group(c, 5) {
        "heapz_v2" | "heap_v2" => Ok((true, period, has_alloc)),
        "heapprofile" => Ok((false, 1, has_alloc)),
        "heap" => Ok((true, period / 2, has_alloc)),
        other => Err(format!(
            "unknown heap profile type {:?} (heap, heap_v2, heapz_v2 or heapprofile expected)",
            excerpt(other)
        )),
    }
}

/// pprof's parseHeapSample: `inuse_count: inuse_bytes [alloc_count: alloc_bytes] @ addrs`,
/// giving the values (alloc first when wanted, unsampled for "v2"), the block size label
/// and the addresses.
fn heap_sample(
    line: &str,
    rate: i64,
    v2: bool,
    include_alloc: bool,
) -> Result<(Vec<i64>, i64, Vec<u64>), String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = regex(
        &RE,
        r"(-?[0-9]+): *(-?[0-9]+) *\[ *([0-9]+): *([0-9]+) *\] @([ x0-9a-f]*)",
    );
    let fast = || {
        let mut s = Scan::new(line);
        let inuse_count = s.signed_digits()?;
        s.literal(":")?;
        s.spaces();
        let inuse_bytes = s.signed_digits()?;
        s.spaces();
        s.literal("[")?;
        s.spaces();
        let alloc_count = s.digits()?;
        s.literal(":")?;
        s.spaces();
        let alloc_bytes = s.digits()?;
        s.spaces();
        s.literal("] @")?;
        let addresses = s.run(is_address_list_byte);
        Some([
            inuse_count,
            inuse_bytes,
            alloc_count,
            alloc_bytes,
            addresses,
        ])
    };
    let Some(g) = fast().or_else(|| {
        let c = re.captures(line)?;
        Some(std::array::from_fn(|i| group(&c, i + 1)))
    }) else {
        return Err("expected `COUNT: BYTES [COUNT: BYTES] @ 0xADDR ...`".into());
    };
    let mut values = Vec::with_capacity(4);
    let mut block_size = 0;
    let mut add = |count: &str, size: &str, what: &str| -> Result<(), String> {
        let number = |s: &str| {
            go_parse_int(s, 10)
                .ok_or_else(|| format!("{what} value {} is over 63 bits", excerpt(s)))
        };
        let (mut count, mut size) = (number(count)?, number(size)?);
        if count == 0 && size != 0 {
            return Err(format!("{what} count was 0 but {what} bytes was {size}"));
        }
        if count != 0 {
            block_size = size.wrapping_div(count);
            if v2 {
                (count, size) = scale_heap_sample(count, size, rate);
            }
        }
        values.extend([count, size]);
        Ok(())
    };
    if include_alloc {
        add(g[2], g[3], "allocation")?;
    }
    add(g[0], g[1], "inuse")?;
    let addresses = parse_hex_addresses(g[4])?;
    Ok((values, block_size, addresses))
}

const GO_COUNT: &str = "Go count";

/// Reads a Go count profile (`goroutine profile: total 12`, `threadcreate ...`).
pub(super) fn parse_go_count(data: &[u8]) -> Outcome {
    static START: OnceLock<Regex> = OnceLock::new();
    static SAMPLE: OnceLock<Regex> = OnceLock::new();
    let mut s = Lines::new(data);
    while s.scan() && is_space_or_comment(&s.text()) {}
    let first = s.text();
    let Some(c) = regex(&START, r"\A([^\t\n\f\r ]+) profile: total [0-9]+\z").captures(&first)
    else {
        return Outcome::No;
    };
    let ty = group(&c, 1);
    let mut b = Builder::new(new_profile(
        ValueType::new(ty, "count"),
        1,
        vec![ValueType::new(ty, "count")],
    ));
    let sample = regex(&SAMPLE, r"\A([0-9]+) @(( 0x[0-9a-f]+)+)\z");
    while s.scan() {
        let line = s.text();
        if is_space_or_comment(&line) {
            continue;
        }
        if line.starts_with("---") {
            break;
        }
        let n = s.line_number();
        let Some(c) = sample.captures(&line) else {
            let what = "expected `COUNT @ 0xADDR ...`";
            return Outcome::Done(Err(bad_line(GO_COUNT, n, what)));
        };
        let Some(count) = go_parse_int(group(&c, 1), 0) else {
            let what = format!(
                "count {} is not a number pprof accepts",
                excerpt(group(&c, 1))
            );
            return Outcome::Done(Err(bad_line(GO_COUNT, n, what)));
        };
        let mut addresses = Vec::new();
        for field in group(&c, 2).split_whitespace() {
            let Some(a) = go_parse_uint(field, 0) else {
                let what = format!("address {} is over 64 bits", excerpt(field));
                return Outcome::Done(Err(bad_line(GO_COUNT, n, what)));
            };
            addresses.push(a);
        }
        push_sample(&mut b, &addresses, vec![count], Vec::new());
    }
    let mut p = b.p;
    finish_sections(&mut p, &mut s);
    Outcome::Done(Ok(p))
}

const THREADZ: &str = "threadz";

fn thread_start_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    regex(
        &RE,
        r"--- Thread ([[:xdigit:]]+) \(name: (.*)/([0-9]+)\) stack: ---",
    )
}

/// Reads a threadz dump: one sample per thread (`--- Thread ...` then its stack), a thread
/// "same as previous" counting again for the previous sample.
pub(super) fn parse_thread(data: &[u8]) -> Outcome {
    static THREADZ_START: OnceLock<Regex> = OnceLock::new();
    let mut s = Lines::new(data);
    while s.scan() && is_space_or_comment(&s.text()) {}
    let mut line = s.text().into_owned();
    if regex(&THREADZ_START, "--- threadz [0-9]+ ---").is_match(&line) {
        while s.scan() {
            line = s.text().into_owned();
            if is_memory_map_sentinel(&line) || line.starts_with('-') {
                break;
            }
        }
    } else if !thread_start_re().is_match(&line) {
        return Outcome::No;
    }
    let mut b = Builder::new(new_profile(
        ValueType::new("thread", "count"),
        1,
        vec![ValueType::new("thread", "count")],
    ));
    while !is_memory_map_sentinel(&line) {
        if line.starts_with("---- no stack trace for") {
            break;
        }
        if !thread_start_re().is_match(&line) {
            let what = "expected a `--- Thread ... stack: ---` line or the memory map";
            return Outcome::Rejected(bad_line(THREADZ, s.line_number(), what));
        }
        let (next, addresses) = match thread_sample(&mut s) {
            Ok(r) => r,
            Err(e) => return Outcome::Done(Err(e)),
        };
        line = next;
        if addresses.is_empty() {
            // "same as previous thread": one more of the last sample.
            if let Some(s) = b.p.samples.last().copied() {
                if let Some(v) = b.p.values_mut(&s).first_mut() {
                    *v = v.wrapping_add(1);
                }
            }
            continue;
        }
        // The leaf is where the thread is, not a return address.
        let locations: Vec<u32> = addresses
            .iter()
            .enumerate()
            .map(|(i, &a)| b.location(if i > 0 { a.wrapping_sub(1) } else { a }))
            .collect();
        b.p.push_sample(locations.iter().copied(), &[1], &[]);
    }
    let mut p = b.p;
    finish_sections(&mut p, &mut s);
    cleanup_duplicate_locations(&mut p);
    Outcome::Done(Ok(p))
}

/// pprof's parseThreadSample: the addresses of one thread's stack (none when it is the same
/// as the previous thread's) and the line after it.
fn thread_sample(s: &mut Lines) -> Result<(String, Vec<u64>), ErrorKind> {
    let mut line = String::new();
    let mut same_as_previous = false;
    let mut addresses = Vec::new();
    while s.scan() {
        line = s.text().trim().to_string();
        if line.is_empty() {
            continue;
        }
        if line.starts_with("---") {
            break;
        }
        if line.contains("same as previous thread") {
            same_as_previous = true;
            continue;
        }
        let more = parse_hex_addresses(&line).map_err(|e| bad_line(THREADZ, s.line_number(), e))?;
        addresses.extend(more);
    }
    if same_as_previous {
        addresses.clear();
    }
    Ok((line, addresses))
}

const CONTENTION: &str = "contention";

/// Reads a C++ (or old Go) contention profile: `name = value` attributes, then
/// `CYCLES COUNT @ 0xADDR ...` lines.
pub(super) fn parse_contention(data: &[u8]) -> Outcome {
    let mut s = Lines::new(data);
    if !s.scan() {
        return Outcome::No;
    }
    let first = s.text();
    if !["--- contentionz ", "--- mutex:", "--- contention:"]
        .iter()
        .any(|h| first.starts_with(h))
    {
        return Outcome::No;
    }
    let mut p = new_profile(
        ValueType::new("contentions", "count"),
        1,
        vec![
            ValueType::new("contentions", "count"),
            ValueType::new("delay", "nanoseconds"),
        ],
    );
    let mut cpu_hz: i64 = 0;
    while s.scan() {
        let text = s.text();
        let line = text.trim();
        if is_space_or_comment(line) {
            continue;
        }
        if line.starts_with("---") {
            break;
        }
        let Some((key, value)) = line.split_once('=') else {
            break;
        };
        let (key, value) = (key.trim(), value.trim());
        let n = s.line_number();
        let number = || {
            go_parse_int(value, 0).ok_or_else(|| {
                bad_line(
                    CONTENTION,
                    n,
                    format!("{} {:?} is not an integer", excerpt(key), excerpt(value)),
                )
            })
        };
        let parsed = match key {
            "cycles/second" => number().map(|v| cpu_hz = v),
            "sampling period" => number().map(|v| p.period = v),
            "ms since reset" => number().map(|ms| p.duration_nanos = ms.wrapping_mul(1_000_000)),
            "discarded samples" => Ok(()),
            // "format" and "resolution" mark the Java agent's profiles.
            _ => Err(bad_line(
                CONTENTION,
                n,
                format!("unknown attribute {:?}", excerpt(key)),
            )),
        };
        if let Err(e) = parsed {
            return Outcome::Rejected(e);
        }
    }
    let mut b = Builder::new(p);
    loop {
        let text = s.text();
        let line = text.trim();
        if line.starts_with("---") {
            break;
        }
        if !is_space_or_comment(line) {
            match contention_sample(line, b.p.period, cpu_hz) {
                Ok((values, addresses)) => push_sample(&mut b, &addresses, values, Vec::new()),
                Err((what, fatal)) => {
                    let e = bad_line(CONTENTION, s.line_number(), what);
                    return if fatal {
                        Outcome::Done(Err(e))
                    } else {
                        Outcome::Rejected(e)
                    };
                }
            }
        }
        if !s.scan() {
            break;
        }
    }
    let mut p = b.p;
    finish_sections(&mut p, &mut s);
    Outcome::Done(Ok(p))
}

/// pprof's parseContentionSample: `[contentions, delay]` unsampled to counts and nanoseconds,
/// and the addresses. An error says whether pprof fails (true) or tries another format.
fn contention_sample(
    line: &str,
    period: i64,
    cpu_hz: i64,
) -> Result<(Vec<i64>, Vec<u64>), (String, bool)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let fast = || {
        let mut s = Scan::new(line);
        let delay = s.digits()?;
        s.spaces();
        let count = s.digits()?;
        s.literal(" @")?;
        Some([delay, count, s.run(is_address_list_byte)])
    };
    let Some(g) = fast().or_else(|| {
        let c = regex(&RE, "([0-9]+) *([0-9]+) @([ x0-9a-f]*)").captures(line)?;
        Some(std::array::from_fn(|i| group(&c, i + 1)))
    }) else {
        return Err(("expected `DELAY COUNT @ 0xADDR ...`".into(), false));
    };
    let number = |s: &str| {
        go_parse_int(s, 10).ok_or_else(|| (format!("value {} is over 63 bits", excerpt(s)), true))
    };
    let (mut delay, mut count) = (number(g[0])?, number(g[1])?);
    if period > 0 {
        if cpu_hz > 0 {
            let cpu_ghz = cpu_hz as f64 / 1e9;
            delay = go_f64_to_i64(delay as f64 * period as f64 / cpu_ghz);
        }
        count = count.wrapping_mul(period);
    }
    let addresses = parse_hex_addresses(g[2]).map_err(|e| (e, true))?;
    Ok((vec![count, delay], addresses))
}
