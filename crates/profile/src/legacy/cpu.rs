//! gperftools' binary CPU profile, as pprof's parseCPU reads it.
//!
//! The file is a sequence of machine words (32 or 64 bits, either byte order; the first
//! encoding whose header reads `0, 3, 0|1, period_us, 0` is used): the header, then records
//! `count, depth, pc[depth]`, then the trailer record `0, 1, 0`, then text. With a 0 in the
//! third header word the text is the process's `/proc/self/maps`; with a 1 the profile comes
//! from the Java agent and the text names each address (see [`super::java`]).
//!
//! As pprof does for C++ profiles: callers' addresses are moved back by one to land on the
//! call instruction, a second frame shared by (nearly) every sample is dropped (twice at
//! most: frames the signal handler pushed), and a second frame that repeats the leaf is
//! dropped.

use std::collections::HashMap;

use super::build::{cleanup_duplicate_locations, Builder, Outcome};
use super::java;
use super::maps::finish_with_maps;
use super::scan::Lines;
use crate::error::ErrorKind;
use crate::model::{Format, Profile, ValueType};

const FORMAT: &str = "gperftools CPU";

fn malformed(offset: usize, what: String) -> ErrorKind {
    ErrorKind::Malformed {
        format: FORMAT,
        offset: offset as u64,
        what,
    }
}

/// A word encoding, in the order pprof tries them.
#[derive(Clone, Copy, Debug)]
enum Word {
    Little32,
    Big32,
    Little64,
    Big64,
}

impl Word {
    const ALL: [Word; 4] = [Word::Little32, Word::Big32, Word::Little64, Word::Big64];

    fn size(self) -> usize {
        match self {
            Word::Little32 | Word::Big32 => 4,
            Word::Little64 | Word::Big64 => 8,
        }
    }

    /// The word at byte `pos`, if all of it is there.
    fn read(self, data: &[u8], pos: usize) -> Option<u64> {
        let bytes = data.get(pos..)?;
        Some(match self {
            Word::Little32 => u64::from(u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?)),
            Word::Big32 => u64::from(u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?)),
            Word::Little64 => u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?),
            Word::Big64 => u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?),
        })
    }
}

/// Reads a gperftools (or Java agent) binary CPU profile.
pub(super) fn parse(data: &[u8]) -> Outcome {
    let mut near_miss = None;
    for word in Word::ALL {
        let w = word.size();
        let h: [Option<u64>; 5] = std::array::from_fn(|i| word.read(data, i * w));
        let result = match h {
            [Some(0), Some(3), Some(0), Some(period), Some(0)] if period > 0 => {
                cpp_profile(data, word, period)
            }
            [Some(0), Some(3), Some(1), Some(period), Some(0)] if period > 0 => {
                java_profile(data, word, period)
            }
            [Some(0), Some(3), ..] => {
                near_miss.get_or_insert_with(|| header_problem(&h, w, data.len()));
                continue;
            }
            _ => continue,
        };
        return match result {
            Ok(p) => Outcome::Done(Ok(p)),
            Err(Failure::Rejected(e)) => Outcome::Rejected(e),
            Err(Failure::Fatal(e)) => Outcome::Done(Err(e)),
        };
    }
    near_miss.map_or(Outcome::No, Outcome::Rejected)
}

/// What is wrong with a header that starts like a CPU profile's.
fn header_problem(h: &[Option<u64>; 5], w: usize, len: usize) -> ErrorKind {
    match *h {
        [_, _, Some(kind), Some(period), Some(pad)] => {
            if kind > 1 {
                malformed(
                    2 * w,
                    format!("header word 3 is {kind}: 0 (C++) or 1 (Java) expected"),
                )
            } else if period == 0 {
                malformed(3 * w, "the sampling period (header word 4) is 0".into())
            } else {
                malformed(4 * w, format!("header word 5 is {pad}: 0 expected"))
            }
        }
        _ => malformed(
            len,
            format!("the header is cut off: {len} bytes of the 5 {w}-byte words it needs"),
        ),
    }
}

/// Why a reader stopped: pprof takes the data for another format (`Rejected`) or fails.
pub(super) enum Failure {
    Rejected(ErrorKind),
    Fatal(ErrorKind),
}

fn new_profile(period_us: u64, format: Format) -> Profile {
    Profile {
        // Go's int64(n) * 1000, wrapping.
        period: (period_us as i64).wrapping_mul(1000),
        period_type: ValueType::new("cpu", "nanoseconds"),
        sample_types: vec![
            ValueType::new("samples", "count"),
            ValueType::new("cpu", "nanoseconds"),
        ],
        format,
        ..Profile::default()
    }
}

fn cpp_profile(data: &[u8], word: Word, period_us: u64) -> Result<Profile, Failure> {
    let mut b = Builder::new(new_profile(period_us, Format::GperftoolsCpu));
    let rest = read_samples(&mut b, data, word, true).map_err(Failure::Rejected)?;
    drop_signal_frames(&mut b);
    let mut p = b.p;
    let mut lines = Lines::new(data.get(rest..).unwrap_or_default());
    finish_with_maps(&mut p, &mut lines);
    cleanup_duplicate_locations(&mut p);
    Ok(p)
}

fn java_profile(data: &[u8], word: Word, period_us: u64) -> Result<Profile, Failure> {
    let mut b = Builder::new(new_profile(period_us, Format::LegacyText));
    let rest = read_samples(&mut b, data, word, false).map_err(Failure::Rejected)?;
    let text = data.get(rest..).unwrap_or_default();
    java::read_locations(&mut b, text).map_err(|e| {
        Failure::Fatal(ErrorKind::Malformed {
            format: "Java CPU",
            offset: (rest + e.offset) as u64,
            what: e.what,
        })
    })?;
    java::finish(b.p).map_err(Failure::Fatal)
}

/// Reads the records after the header up to the trailer (or the end of the data); returns
/// the offset where the text after the trailer starts. Callers (not the leaf) are moved back
/// by one when `adjust`.
fn read_samples(
    b: &mut Builder,
    data: &[u8],
    word: Word,
    adjust: bool,
) -> Result<usize, ErrorKind> {
    let w = word.size();
    let mut pos = 5 * w;
    let mut locations = Vec::new();
    while pos < data.len() {
        let record = pos;
        let (Some(count), Some(depth)) = (word.read(data, pos), word.read(data, pos + w)) else {
            return Err(malformed(
                record,
                format!(
                    "record cut off: {} bytes left, its count and depth need {}",
                    data.len() - pos,
                    2 * w
                ),
            ));
        };
        pos += 2 * w;
        let words_left = (data.len() - pos) / w;
        if depth > words_left as u64 {
            return Err(malformed(
                record + w,
                format!("record claims {depth} frames but only {words_left} words remain"),
            ));
        }
        // depth <= words_left, so it fits and the frames are all there.
        let depth = depth as usize;
        let frames = data.get(pos..pos + depth * w).unwrap_or_default();
        pos += depth * w;
        let address = |i: usize| word.read(frames, i * w).unwrap_or(0);
        if count == 0 && depth == 1 && address(0) == 0 {
            return Ok(pos);
        }
        locations.clear();
        for i in 0..depth {
            let mut a = address(i);
            if adjust && i > 0 {
                a = a.wrapping_sub(1);
            }
            locations.push(b.location(a));
        }
        let count = count as i64;
        let values = [count, count.wrapping_mul(b.p.period)];
        b.p.push_sample(locations.iter().copied(), &values, &[]);
    }
    Ok(pos)
}

/// pprof's heuristic for frames the signal handler pushed: when all samples but one in 32
/// share their second frame's address, that frame is dropped from them; twice at most.
fn drop_signal_frames(b: &mut Builder) {
    let n = b.p.samples.len();
    let threshold = n - n / 32;
    for _ in 0..2 {
        let mut counts: HashMap<u64, usize> = HashMap::new();
        for s in &b.p.samples {
            if let Some(second) = b.p.stack(s).nth(1) {
                *counts.entry(b.address(second)).or_default() += 1;
            }
        }
        // At most one address can reach the threshold (they share n samples).
        let Some(common) = counts
            .into_iter()
            .find(|&(_, c)| c >= threshold)
            .map(|(a, _)| a)
        else {
            continue;
        };
        let p = &mut b.p;
        for s in &mut p.samples {
            if let Some(second) = p.stacks.get(s.stack).nth(1) {
                if p.locations.get(second as usize).map_or(0, |l| l.address) == common {
                    p.stacks.remove(&mut s.stack, 1);
                }
            }
        }
    }
}
