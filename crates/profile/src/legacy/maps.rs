//! Memory maps as pprof reads them after a legacy profile (parseProcMapsFromScanner,
//! massageMappings, remapMappingIDs): `/proc/self/maps` lines and pprof's brief
//! `start-end: file` form, executable entries only, `name=value` lines defining `$name`
//! substitutions for later lines, glog prefixes removed; then adjacent pieces of one file
//! merged, the main binary moved first, and each location attached to the first mapping
//! that contains its address (or to a catch-all mapping when none does).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;

use super::build::{index_u32, remap_functions, remap_locations};
use super::scan::{go_parse_uint, group, is_go_space, regex, Lines, Scan};
use crate::model::{Mapping, Profile};

/// Go's `\s`, spelled out (Rust's `\s` is wider).
macro_rules! ws {
    () => {
        r"[\t\n\f\r ]"
    };
}

const HEX: &str = "(?:0x)?([[:xdigit:]]+)";
const PERM: &str = concat!("(?:", ws!(), "+([-rwxp]+))?");

fn proc_maps_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        let pattern = format!(
            "^{ws}*{HEX}[-{wsc}]?{ws}*{HEX}:?{PERM}(?:{ws}+([[:xdigit:]]+))?{ws}+[[:xdigit:]]+:[[:xdigit:]]+{ws}+[[:digit:]]+(?:{ws}+([^\\t\\n\\f\\r ]+))?",
            ws = ws!(),
            wsc = r"\t\n\f\r ",
        );
        Regex::new(&pattern).expect("constant pattern compiles")
    })
}

fn brief_maps_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        let pattern = format!(
            "^{ws}*{HEX}[-{wsc}]?{ws}*{HEX}:?{PERM}(?:{ws}+([^\\t\\n\\f\\r ]+))?(?:{ws}+\\(@([[:xdigit:]]+)\\))?(?:{ws}+([[:xdigit:]]+))?",
            ws = ws!(),
            wsc = r"\t\n\f\r ",
        );
        Regex::new(&pattern).expect("constant pattern compiles")
    })
}

/// Reads mappings from the rest of `lines`; lines that are not executable mappings are
/// skipped.
pub(super) fn parse(lines: &mut Lines) -> Vec<Mapping> {
    let mut out = Vec::new();
    let mut attrs = Replacer::default();
    while lines.scan() {
        let text = lines.text();
        let line = attrs.replace(remove_logging_info(&text));
        match parse_entry(&line) {
            Entry::Mapping(m) => out.push(m),
            Entry::Skip => {}
            Entry::Unrecognized => {
                if let Some((key, value)) = line.split_once('=') {
                    attrs.add(&format!("${}", key.trim()), value.trim());
                }
            }
        }
    }
    out
}

/// Strips a glog prefix (`I0102 15:04:05.000000 1234 file.cc:42] `).
fn remove_logging_info(line: &str) -> &str {
    static RE: OnceLock<Regex> = OnceLock::new();
    // The prefix ends at the line's first bracket, a `]`.
    if !line.as_bytes().contains(&b']') {
        return line;
    }
    match regex(&RE, concat!(r"^[^\[\]]+:[0-9]+\]", ws!())).find(line) {
        Some(m) => line.get(m.end()..).unwrap_or(line),
        None => line,
    }
}

enum Entry {
    Mapping(Mapping),
    /// A mapping that is not executable.
    Skip,
    Unrecognized,
}

fn parse_entry(line: &str) -> Entry {
    let (start, end, perm, offset, file, build_id);
    if let Some([s, e, p, o, f]) = canonical_proc_line(line) {
        (start, end, perm, offset, file, build_id) = (s, e, p, o, f, "");
    } else if let Some(c) = may_be_proc_line(line)
        .then(|| proc_maps_re().captures(line))
        .flatten()
    {
        (start, end, perm, offset, file, build_id) = (
            group(&c, 1),
            group(&c, 2),
            group(&c, 3),
            group(&c, 4),
            group(&c, 5),
            "",
        );
    } else if let Some([s, e, f]) = canonical_brief_line(line) {
        (start, end, perm, file, offset, build_id) = (s, e, "", f, "", "");
    } else if let Some(c) = brief_maps_re().captures(line) {
        (start, end, perm, file, offset, build_id) = (
            group(&c, 1),
            group(&c, 2),
            group(&c, 3),
            group(&c, 4),
            group(&c, 5),
            group(&c, 6),
        );
    } else {
        return Entry::Unrecognized;
    }
    if !perm.is_empty() && !perm.contains('x') {
        return Entry::Skip;
    }
    let (Some(start), Some(limit)) = (go_parse_uint(start, 16), go_parse_uint(end, 16)) else {
        return Entry::Unrecognized;
    };
    let offset = if offset.is_empty() {
        0
    } else {
        match go_parse_uint(offset, 16) {
            Some(o) => o,
            None => return Entry::Unrecognized,
        }
    };
    Entry::Mapping(Mapping {
        start,
        limit,
        offset,
        file: file.to_string(),
        build_id: build_id.to_string(),
        ..Mapping::default()
    })
}

/// A line as the kernel writes /proc/PID/maps (`start-end perm offset dev inode  path`):
/// (start, end, perm, offset, path). Where this matches, each field is the longest run the
/// /proc regex can take there, so its captures are these; other lines go to the regex.
fn canonical_proc_line(line: &str) -> Option<[&str; 5]> {
    let hex = |b: u8| b.is_ascii_hexdigit();
    let mut s = Scan::new(line);
    let start = s.run1(hex)?;
    s.literal("-")?;
    let end = s.run1(hex)?;
    s.literal(" ")?;
    let perm = s.run1(|b| matches!(b, b'-' | b'r' | b'w' | b'x' | b'p'))?;
    s.literal(" ")?;
    let offset = s.run1(hex)?;
    s.literal(" ")?;
    s.run1(hex)?;
    s.literal(":")?;
    s.run1(hex)?;
    s.literal(" ")?;
    s.run1(|b| b.is_ascii_digit())?;
    // The path: after spaces, up to the next Go space (`\S+`: any other character). With no
    // space before it, the regex's optional path group takes nothing.
    let file = if s.run(is_go_space).is_empty() {
        ""
    } else {
        let rest = s.rest();
        rest.split(|c: char| c.is_ascii() && is_go_space(c as u8))
            .next()
            .unwrap_or("")
    };
    Some([start, end, perm, offset, file])
}

/// Whether the /proc regex can match: it needs a `hex:hex` device field.
fn may_be_proc_line(line: &str) -> bool {
    line.as_bytes().windows(3).any(|w| match w {
        [a, b':', b] => a.is_ascii_hexdigit() && b.is_ascii_hexdigit(),
        _ => false,
    })
}

/// pprof's brief form `start-end: path` (as heap and contention profiles end): (start, end,
/// path), for lines the /proc regex does not match. Where this matches, the brief regex's
/// captures are these (no permissions: the path does not start with one of `-rwxp`); other
/// lines go to the regex.
fn canonical_brief_line(line: &str) -> Option<[&str; 3]> {
    let hex = |b: u8| b.is_ascii_hexdigit();
    let mut s = Scan::new(line);
    s.run(is_go_space);
    let start = s.run1(hex)?;
    s.literal("-")?;
    let end = s.run1(hex)?;
    s.literal(":")?;
    s.run1(is_go_space)?;
    let rest = s.rest();
    let file = rest
        .split(|c: char| c.is_ascii() && is_go_space(c as u8))
        .next()
        .unwrap_or("");
    let first = *file.as_bytes().first()?;
    if matches!(first, b'-' | b'r' | b'w' | b'x' | b'p') {
        return None;
    }
    let after = rest.get(file.len()..)?;
    if !after.bytes().all(is_go_space) {
        return None;
    }
    Some([start, end, file])
}

/// The most `$name` substitutions kept, and the longest name: bounds the work per byte of a
/// hostile file (pprof has no such limits; real maps define none or a few short ones).
const MAX_ATTRS: usize = 64;
const MAX_ATTR_KEY: usize = 64;

/// Go's `strings.Replacer` over `$name` keys: at each position the earliest-defined key that
/// matches is replaced, scanning left to right without overlaps. A byte trie of the keys.
#[derive(Default)]
struct Replacer {
    /// (node, byte) -> child node; node 0 is the root.
    edges: HashMap<(u32, u8), u32>,
    /// Per node, the index into `values` of the first key ending there.
    ends: Vec<Option<u32>>,
    values: Vec<String>,
}

impl Replacer {
    fn add(&mut self, key: &str, value: &str) {
        if self.values.len() >= MAX_ATTRS || key.len() > MAX_ATTR_KEY {
            return;
        }
        if self.ends.is_empty() {
            self.ends.push(None);
        }
        let mut node = 0u32;
        for &b in key.as_bytes() {
            let next = self.ends.len() as u32;
            node = *self.edges.entry((node, b)).or_insert(next);
            if node == next {
                self.ends.push(None);
            }
        }
        if let Some(end @ None) = self.ends.get_mut(node as usize) {
            *end = Some(self.values.len() as u32);
            self.values.push(value.to_string());
        }
    }

    fn replace<'a>(&self, line: &'a str) -> Cow<'a, str> {
        if self.values.is_empty() || !line.contains('$') {
            return Cow::Borrowed(line);
        }
        let bytes = line.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            if b == b'$' {
                if let Some((value, len)) = self.lookup(&bytes[i..]) {
                    out.extend_from_slice(value.as_bytes());
                    i += len;
                    continue;
                }
            }
            out.push(b);
            i += 1;
        }
        // Keys and values are whole strings and keys start with an ASCII `$`, so the result
        // is valid UTF-8.
        Cow::Owned(
            String::from_utf8(out)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        )
    }

    /// The earliest-defined key that `text` starts with: its value and length.
    fn lookup(&self, text: &[u8]) -> Option<(&str, usize)> {
        let mut node = 0u32;
        let mut best: Option<(u32, usize)> = None;
        for (n, &b) in text.iter().enumerate() {
            let Some(&next) = self.edges.get(&(node, b)) else {
                break;
            };
            node = next;
            if let Some(Some(v)) = self.ends.get(node as usize) {
                if best.map_or(true, |(bv, _)| *v < bv) {
                    best = Some((*v, n + 1));
                }
            }
        }
        let (v, len) = best?;
        Some((self.values.get(v as usize)?.as_str(), len))
    }
}

/// pprof's massageMappings (before any location refers to a mapping): merges adjacent
/// pieces of one mapping, moves the likely main binary first, numbers them 1, 2, ...
pub(super) fn massage(mappings: &mut Vec<Mapping>) {
    if mappings.len() > 1 {
        let mut merged: Vec<Mapping> = Vec::with_capacity(mappings.len());
        for m in mappings.drain(..) {
            if let Some(last) = merged.last_mut() {
                if adjacent(last, &m) {
                    last.limit = m.limit;
                    if !m.file.is_empty() {
                        last.file = m.file;
                    }
                    if !m.build_id.is_empty() {
                        last.build_id = m.build_id;
                    }
                    continue;
                }
            }
            merged.push(m);
        }
        *mappings = merged;
    }
    static LIB: OnceLock<Regex> = OnceLock::new();
    let lib = regex(&LIB, r"([.]so$|[.]so[._][0-9]+)");
    for i in 0..mappings.len() {
        let file = mappings[i].file.replace("(deleted)", "");
        let file = file.trim();
        if file.is_empty() || lib.is_match(file) || file.starts_with('[') {
            continue;
        }
        mappings.swap(0, i);
        break;
    }
    for (i, m) in mappings.iter_mut().enumerate() {
        m.id = i as u64 + 1;
    }
}

/// Whether `m2` continues `m1` (a mapping split in two).
fn adjacent(m1: &Mapping, m2: &Mapping) -> bool {
    if !m1.file.is_empty() && !m2.file.is_empty() && m1.file != m2.file {
        return false;
    }
    if !m1.build_id.is_empty() && !m2.build_id.is_empty() && m1.build_id != m2.build_id {
        return false;
    }
    if m1.limit != m2.start {
        return false;
    }
    if m1.offset != 0 && m2.offset != 0 {
        let offset = m1.offset.wrapping_add(m1.limit.wrapping_sub(m1.start));
        if offset != m2.offset {
            return false;
        }
    }
    true
}

/// pprof's remapMappingIDs: fixes up the main mapping, attaches every location with an
/// address to the first mapping (in list order) that contains it, or else to the first one
/// whose offset puts the address just before it (that mapping then grows down to cover its
/// offset), or else to a catch-all mapping added last; numbers the mappings 1, 2, ...
///
/// pprof scans every mapping for every location; this finds the same answers with two
/// segment trees over the mappings' boundaries, so hostile files with many of both stay fast.
pub(super) fn attach(p: &mut Profile) {
    let maps = &mut p.mappings;
    let hugepage = match &maps[..] {
        [first, second, ..] => {
            first.file.starts_with("/anon_hugepage") && first.limit == second.start
        }
        _ => false,
    };
    if hugepage {
        maps.remove(0);
    }
    if let Some(m) = maps.first_mut() {
        const EXPECTED_START: u64 = 0x40_0000;
        if m.start.wrapping_sub(m.offset) == EXPECTED_START {
            m.start = EXPECTED_START;
            m.offset = 0;
        }
    }

    // The range a mapping covers once its offset is folded in, when it has one.
    let grown = |m: &Mapping| (m.offset != 0 && m.offset <= m.start).then(|| m.start - m.offset);
    let mut coords: Vec<u64> = Vec::with_capacity(maps.len() * 3);
    for m in maps.iter() {
        coords.extend([m.start, m.limit]);
        coords.extend(grown(m));
    }
    coords.sort_unstable();
    coords.dedup();
    // Elementary segment k is [coords[k], coords[k+1]); `at` finds a boundary's k.
    let at = |c: u64| coords.partition_point(|&x| x < c);
    let segments = coords.len().saturating_sub(1);
    let mut containing = MinTree::new(segments);
    let mut below = ListTree::new(segments);
    for (i, m) in maps.iter().enumerate() {
        let i = index_u32(i);
        if m.start < m.limit {
            containing.update(at(m.start), at(m.limit), i);
        }
        if let Some(low) = grown(m) {
            below.insert(at(low), at(m.start), i);
        }
    }
    let mut grown_already = vec![false; maps.len()];
    let mut fake = None;
    for l in &mut p.locations {
        let a = l.address;
        if l.mapping.is_some() || a == 0 {
            continue;
        }
        let k = coords.partition_point(|&x| x <= a);
        let segment = (k > 0 && k < coords.len()).then(|| k - 1);
        if let Some(i) = segment.and_then(|s| containing.query(s)) {
            l.mapping = Some(i);
            continue;
        }
        // Once added, the catch-all mapping (last, covering [0, 2^64-1)) contains the address
        // before any mapping could grow down to it.
        if let (Some(f), true) = (fake, a != u64::MAX) {
            l.mapping = Some(f);
            continue;
        }
        if let Some(i) = segment.and_then(|s| below.query(s, &grown_already)) {
            if let (Some(m), Some(done)) =
                (maps.get_mut(i as usize), grown_already.get_mut(i as usize))
            {
                m.start = m.start.wrapping_sub(m.offset);
                m.offset = 0;
                *done = true;
                if m.start < m.limit {
                    containing.update(at(m.start), at(m.limit), i);
                }
                l.mapping = Some(i);
                continue;
            }
        }
        let index = *fake.get_or_insert_with(|| {
            maps.push(Mapping {
                limit: u64::MAX,
                ..Mapping::default()
            });
            index_u32(maps.len() - 1)
        });
        l.mapping = Some(index);
    }
    for (i, m) in maps.iter_mut().enumerate() {
        m.id = i as u64 + 1;
    }
}

/// Range "keep the minimum" updates, point queries.
struct MinTree {
    n: usize,
    t: Vec<u32>,
}

impl MinTree {
    fn new(n: usize) -> MinTree {
        MinTree {
            n,
            t: vec![u32::MAX; 2 * n],
        }
    }

    /// Every point in `[l, r)` is covered by `v`.
    fn update(&mut self, l: usize, r: usize, v: u32) {
        let (mut l, mut r) = (l + self.n, r.min(self.n) + self.n);
        while l < r {
            if l & 1 == 1 {
                if let Some(x) = self.t.get_mut(l) {
                    *x = (*x).min(v);
                }
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                if let Some(x) = self.t.get_mut(r) {
                    *x = (*x).min(v);
                }
            }
            l >>= 1;
            r >>= 1;
        }
    }

    /// The least value covering point `i`.
    fn query(&self, i: usize) -> Option<u32> {
        let mut i = i + self.n;
        let mut best = u32::MAX;
        while i > 0 {
            best = best.min(self.t.get(i).copied().unwrap_or(u32::MAX));
            i >>= 1;
        }
        (best != u32::MAX).then_some(best)
    }
}

/// Range inserts (in increasing value order), point queries for the least value not yet
/// retired.
struct ListTree {
    n: usize,
    lists: Vec<Vec<u32>>,
    /// Per node, how many leading entries are known retired.
    skip: Vec<usize>,
}

impl ListTree {
    fn new(n: usize) -> ListTree {
        ListTree {
            n,
            lists: vec![Vec::new(); 2 * n],
            skip: vec![0; 2 * n],
        }
    }

    fn insert(&mut self, l: usize, r: usize, v: u32) {
        let (mut l, mut r) = (l + self.n, r.min(self.n) + self.n);
        while l < r {
            if l & 1 == 1 {
                if let Some(list) = self.lists.get_mut(l) {
                    list.push(v);
                }
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                if let Some(list) = self.lists.get_mut(r) {
                    list.push(v);
                }
            }
            l >>= 1;
            r >>= 1;
        }
    }

    fn query(&mut self, i: usize, retired: &[bool]) -> Option<u32> {
        let mut i = i + self.n;
        let mut best: Option<u32> = None;
        while i > 0 {
            if let (Some(list), Some(skip)) = (self.lists.get(i), self.skip.get_mut(i)) {
                while list
                    .get(*skip)
                    .is_some_and(|&v| retired.get(v as usize).copied().unwrap_or(true))
                {
                    *skip += 1;
                }
                if let Some(&v) = list.get(*skip) {
                    best = Some(best.map_or(v, |b| b.min(v)));
                }
            }
            i >>= 1;
        }
        best
    }
}

/// pprof's ParseMemoryMapFromScanner: reads the mappings from the rest of `lines`, then
/// renumbers locations and functions by first use and attaches locations to mappings.
pub(super) fn finish_with_maps(p: &mut Profile, lines: &mut Lines) {
    let mut mappings = parse(lines);
    massage(&mut mappings);
    p.mappings = mappings;
    remap_locations(p);
    remap_functions(p);
    attach(p);
}
