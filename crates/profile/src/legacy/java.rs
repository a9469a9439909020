//! The Java agent's profiles, as pprof's legacy_java_profile.go reads them: heap
//! (`--- heapz 1 ---`) and contention (`--- contentionz 1 ---`) text, and the symbol table
//! that follows the samples in those and in the agent's binary CPU profile.
//!
//! The header's `name = value` attributes give the units and period; each sample line is
//! `VALUE COUNT @ 0xADDR ...` (root last); after the samples, lines `0xADDR function
//! (file:line)` name the addresses. Locations keep the names and lose their addresses (pprof
//! aggregates them away); heap values are unsampled for the agent's fixed 512 KiB rate.

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;

use super::build::{remap_functions, remap_locations, scale_heap_sample, Builder, Outcome};
use super::maps;
use super::scan::{
    excerpt, go_parse_int, go_parse_uint, group, is_address_list_byte, is_go_space,
    parse_hex_addresses, regex, Scan,
};
use crate::error::ErrorKind;
use crate::model::{Format, Label, Line, Profile, ValueType};

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Heap,
    Contention,
}

impl Kind {
    fn format(self) -> &'static str {
        match self {
            Kind::Heap => "Java heap",
            Kind::Contention => "Java contention",
        }
    }
}

/// The lines of `data` from byte `pos` that end with `\n` (pprof stops the header and
/// sample sections at the last newline): (offset, line without `\n`).
fn terminated_lines(data: &[u8], pos: usize) -> impl Iterator<Item = (usize, &[u8])> {
    let mut pos = pos;
    std::iter::from_fn(move || {
        let rest = data.get(pos..)?;
        let i = rest.iter().position(|&b| b == b'\n')?;
        let start = pos;
        pos += i + 1;
        Some((start, &rest[..i]))
    })
}

/// The 1-based number of the line starting at byte `offset`.
fn line_number(data: &[u8], offset: usize) -> usize {
    data.get(..offset)
        .map_or(0, |d| d.iter().filter(|&&b| b == b'\n').count())
        + 1
}

/// Reads a Java heap or contention profile.
pub(super) fn parse(data: &[u8]) -> Outcome {
    let Some(nl) = data.iter().position(|&b| b == b'\n') else {
        return Outcome::No;
    };
    let kind = match String::from_utf8_lossy(&data[..nl]).trim() {
        "--- heapz 1 ---" => Kind::Heap,
        "--- contentionz 1 ---" => Kind::Contention,
        _ => return Outcome::No,
    };
    let mut p = Profile {
        format: Format::LegacyText,
        ..Profile::default()
    };
    let bad = |offset: usize, what: String| ErrorKind::BadLine {
        format: kind.format(),
        line: line_number(data, offset),
        what,
    };
    let samples_at = match read_header(kind, data, nl + 1, &mut p) {
        Ok(pos) => pos,
        Err((offset, what, fatal)) => {
            let e = bad(offset, what);
            return if fatal {
                Outcome::Done(Err(e))
            } else {
                Outcome::Rejected(e)
            };
        }
    };
    let mut b = Builder::new(p);
    let symbols_at = match read_samples(kind, data, samples_at, &mut b) {
        Ok(pos) => pos,
        Err((offset, what)) => return Outcome::Done(Err(bad(offset, what))),
    };
    if let Err(e) = read_locations(&mut b, data.get(symbols_at..).unwrap_or_default()) {
        return Outcome::Done(Err(bad(symbols_at + e.offset, e.what)));
    }
    Outcome::Done(finish(b.p))
}

/// Reads the `name = value` lines; returns where the first other line starts. An error is
/// (offset, what, whether pprof fails rather than tries another format).
fn read_header(
    kind: Kind,
    data: &[u8],
    pos: usize,
    p: &mut Profile,
) -> Result<usize, (usize, String, bool)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = regex(&RE, "([0-9A-Za-z_ ]+)=([0-9A-Za-z_ ]+)");
    for (offset, raw) in terminated_lines(data, pos) {
        let text = String::from_utf8_lossy(raw);
        let line = text.trim();
        if line.is_empty() {
            continue;
        }
        let Some(c) = re.captures(line) else {
            return Ok(offset);
        };
        let (attribute, value) = (group(&c, 1).trim(), group(&c, 2).trim());
        match (kind, attribute) {
            (_, "format") => {
                if value != "java" {
                    return Err((
                        offset,
                        format!("format is {:?}, not \"java\"", excerpt(value)),
                        false,
                    ));
                }
            }
            (Kind::Heap, "resolution") => {
                p.sample_types = vec![
                    ValueType::new("inuse_objects", "count"),
                    ValueType::new("inuse_space", value),
                ];
            }
            (Kind::Contention, "resolution") => {
                p.sample_types = vec![
                    ValueType::new("contentions", "count"),
                    ValueType::new("delay", value),
                ];
            }
            (Kind::Contention, "sampling period") => {
                p.period_type = ValueType::new("contentions", "count");
                p.period = go_parse_int(value, 0).ok_or_else(|| {
                    (
                        offset,
                        format!("sampling period {:?} is not an integer", excerpt(value)),
                        true,
                    )
                })?;
            }
            (Kind::Contention, "ms since reset") => {
                let ms = go_parse_int(value, 0).ok_or_else(|| {
                    (
                        offset,
                        format!("ms since reset {:?} is not an integer", excerpt(value)),
                        true,
                    )
                })?;
                p.duration_nanos = ms.wrapping_mul(1_000_000);
            }
            _ => {
                return Err((
                    offset,
                    format!("unknown attribute {:?}", excerpt(attribute)),
                    false,
                ));
            }
        }
    }
    // Every line ended with a newline were attributes: the samples start after the last.
    Ok(data
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(pos, |i| (i + 1).max(pos)))
}

/// Reads the sample lines; returns where the first other line starts.
fn read_samples(
    kind: Kind,
    data: &[u8],
    pos: usize,
    b: &mut Builder,
) -> Result<usize, (usize, String)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = regex(&RE, " *([0-9]+) +([0-9]+) +@ +([ x0-9a-f]*)");
    for (offset, raw) in terminated_lines(data, pos) {
        let text = String::from_utf8_lossy(raw);
        let line = text.trim();
        if line.is_empty() {
            continue;
        }
        let fast = || {
            let mut s = Scan::new(line);
            s.spaces();
            let value = s.digits()?;
            s.run1(|b| b == b' ')?;
            let count = s.digits()?;
            s.run1(|b| b == b' ')?;
            s.literal("@")?;
            s.run1(|b| b == b' ')?;
            Some([value, count, s.run(is_address_list_byte)])
        };
        let Some(g) = fast().or_else(|| {
            let c = re.captures(line)?;
            Some(std::array::from_fn(|i| group(&c, i + 1)))
        }) else {
            return Ok(offset);
        };
        let addresses = parse_hex_addresses(g[2]).map_err(|e| (offset, e))?;
        let locations: Vec<u32> = addresses.into_iter().map(|a| b.location(a)).collect();
        // The line is `VALUE COUNT @ ...`: the count is the first sample value.
        let number = |s: &str| {
            go_parse_int(s, 0).ok_or_else(|| {
                (
                    offset,
                    format!("{} is not an integer pprof accepts", excerpt(s)),
                )
            })
        };
        let (mut count, mut value) = (number(g[1])?, number(g[0])?);
        let mut labels = Vec::new();
        match kind {
            Kind::Heap => {
                const JAVA_HEAP_SAMPLING_RATE: i64 = 524_288;
                if count == 0 {
                    return Err((offset, "the count (second number) must not be 0".into()));
                }
                labels.push(Label::Num {
                    key: "bytes".into(),
                    value: value.wrapping_div(count),
                    unit: String::new(),
                });
                (count, value) = scale_heap_sample(count, value, JAVA_HEAP_SAMPLING_RATE);
            }
            Kind::Contention => {
                let period = b.p.period;
                if period != 0 {
                    count = count.wrapping_mul(period);
                    value = value.wrapping_mul(period);
                }
            }
        }
        b.p.push_sample(locations.iter().copied(), &[count, value], &labels);
    }
    Ok(data
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(pos, |i| (i + 1).max(pos)))
}

/// A problem in the symbol lines: byte offset in the text given, and what.
pub(super) struct LocationError {
    pub(super) offset: usize,
    pub(super) what: String,
}

/// Reads the `0xADDR name (file:line)` lines after the samples: each names the location at
/// that address (addresses no sample uses are skipped), which then loses its address.
pub(super) fn read_locations(b: &mut Builder, text: &[u8]) -> Result<(), LocationError> {
    static LOCATION: OnceLock<Regex> = OnceLock::new();
    let location = regex(
        &LOCATION,
        r"^[\t\n\f\r ]*0x([[:xdigit:]]+)[\t\n\f\r ]+(.*)[\t\n\f\r ]*$",
    );
    let mut functions: HashMap<String, u32> = HashMap::new();
    let mut pos = 0;
    while pos < text.len() {
        let offset = pos;
        let rest = text.get(pos..).unwrap_or_default();
        let raw = match rest.iter().position(|&c| c == b'\n') {
            Some(i) => {
                pos += i + 1;
                &rest[..i]
            }
            None => {
                pos = text.len();
                rest
            }
        };
        let line = String::from_utf8_lossy(raw);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let fast = || {
            let mut s = Scan::new(line);
            s.literal("0x")?;
            let hex = s.run1(|b| b.is_ascii_hexdigit())?;
            s.run1(is_go_space)?;
            Some((hex, s.rest()))
        };
        let Some((hex, rest)) = fast().or_else(|| {
            let c = location.captures(line)?;
            Some((group(&c, 1), group(&c, 2)))
        }) else {
            continue;
        };
        let Some(address) = go_parse_uint(hex, 16) else {
            return Err(LocationError {
                offset,
                what: format!("address 0x{} is over 64 bits", excerpt(hex)),
            });
        };
        let Some(&index) = b.by_address.get(&address) else {
            continue;
        };
        let (name, file, number) = if let Some((name, file, n)) = split_file_line(rest) {
            let n = go_parse_int(n, 10).filter(|&n| n > 0).unwrap_or(0);
            (name, file.to_string(), n)
        } else if let Some((name, path)) = split_path(rest) {
            // A shared library: only its name is of interest.
            (name, base_name(path), 0)
        } else if rest.contains("generated stub/JIT") {
            ("STUB", String::new(), 0)
        } else {
            // The agent's states: "GC", "VM", ...
            (rest, String::new(), 0)
        };
        let function = match functions.get(name) {
            Some(&f) => f,
            None => {
                let f = b.p.push_function(0, name, name, &file, 0);
                functions.insert(name.to_string(), f);
                f
            }
        };
        if (index as usize) < b.p.locations.len() {
            let line = Line {
                function,
                line: number,
            };
            b.p.set_lines(index as usize, &[line]);
            b.p.locations[index as usize].address = 0;
        }
    }
    Ok(())
}

/// pprof's `^(.*)\s+\((.+):(-?[[:digit:]]+)\)$` on `name (file:line)`: (name, file, line).
///
/// Matched by hand, with the regex's choices: the line number follows the last `:`; the
/// name is as long as it can be, so the `(` is the last one that follows a space and leaves
/// a file name before the `:`, and the name keeps all but one of the spaces before it.
fn split_file_line(s: &str) -> Option<(&str, &str, &str)> {
    let body = s.strip_suffix(')')?;
    let colon = body.rfind(':')?;
    let number = body.get(colon + 1..)?;
    let digits = number.strip_prefix('-').unwrap_or(number);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let open = last_open_after_space(body, colon.checked_sub(1)?)?;
    Some((s.get(..open - 1)?, s.get(open + 1..colon)?, number))
}

/// pprof's `^(.*)\s+\((.*)\)$` on `name (path)`: (name, path), matched by hand as
/// [`split_file_line`].
fn split_path(s: &str) -> Option<(&str, &str)> {
    let body = s.strip_suffix(')')?;
    let open = last_open_after_space(body, body.len())?;
    Some((s.get(..open - 1)?, body.get(open + 1..)?))
}

/// The last `(` before byte `end` that follows a Go space (so at 1 or later).
fn last_open_after_space(s: &str, end: usize) -> Option<usize> {
    let bytes = s.as_bytes();
    (1..end.min(bytes.len()))
        .rev()
        .find(|&i| bytes[i] == b'(' && is_go_space(bytes[i - 1]))
}

/// Go's `filepath.Base` on Unix.
fn base_name(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".into();
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed).to_string()
}

/// Numbers locations and functions by first use, attaches the unnamed ones to a catch-all
/// mapping, then drops every address (pprof's Aggregate keeping all but addresses).
pub(super) fn finish(mut p: Profile) -> Result<Profile, ErrorKind> {
    remap_locations(&mut p);
    remap_functions(&mut p);
    maps::attach(&mut p);
    for l in &mut p.locations {
        l.address = 0;
    }
    p.check()?;
    Ok(p)
}
