//! profile.proto decoding, by hand, from a stream read twice: the first pass decodes
//! everything but the samples (which it only counts), the second decodes the samples straight
//! into pools allocated once at their exact size. Neither holds the message itself.
//!
//! Why not `prost`: the views need indices, not pointers or id maps, and strings resolved
//! once; decoding straight into that shape keeps peak memory near the profile's own size
//! (the 3x-the-decompressed-size budget) and avoids a second copy of every message. The
//! protobuf wire format is small: varints, fixed 32/64-bit fields and length-delimited
//! fields, repeated scalars packed or not.
//!
//! Every length is checked against the bytes that remain before anything is allocated, and
//! nested messages are decoded by bounded loops (profile.proto nests at most three deep), so a
//! hostile file costs time and memory in proportion to its size only.

use std::collections::HashMap;

// profile.proto's field numbers, named once for this reader and the writer.
use tickscope_pprof::fields::{
    function, label, line, location, mapping, profile, sample, value_type,
};

mod wire;
use crate::error::ErrorKind;
use crate::model::{
    Format, Function, Label, Line, Location, Mapping, Profile, Sample, ValueType, MAX_STACK_DEPTH,
};
use crate::store::{Span, Stacks, StrId};
use wire::*;
pub(super) use wire::{read_error, Open};

#[derive(Default)]
struct RawValueType {
    ty: u64,
    unit: u64,
}

#[derive(Default)]
struct RawLabel {
    key: u64,
    str: u64,
    num: i64,
    unit: u64,
}

struct RawMapping {
    m: Mapping,
    file: u64,
    build_id: u64,
}

struct RawFunction {
    id: u64,
    name: u64,
    system_name: u64,
    filename: u64,
    start_line: i64,
}

/// Returns true if the bytes start like a profile.proto message: a valid key for one of its
/// fields. Used only to choose which error to report when no reader accepts the data.
///
/// Its first two fields must have keys that profile.proto defines, with their wire types (a
/// value running past the end counts: that is a cut-off profile). Text rarely passes:
/// "Hello" starts with field 9 (a varint, 'e'), then 'l', which is no key of profile.proto.
pub(super) fn looks_like_proto(data: &[u8]) -> bool {
    use profile::*;
    // Messages, strings and packed lists are length-delimited (2); scalars are varints (0);
    // the comments are packed or not.
    let wire_type = |key: u64| match (key >> 3, key & 7) {
        (SAMPLE_TYPE..=STRING_TABLE | PERIOD_TYPE, 2)
        | (DROP_FRAMES..=DURATION_NANOS | PERIOD | DEFAULT_SAMPLE_TYPE, 0)
        | (COMMENT, 0 | 2) => Some(key & 7),
        _ => None,
    };
    let mut c = Cursor::new(data, 0);
    for _ in 0..2 {
        if c.done() {
            return true;
        }
        let Some(wt) = c.varint().ok().and_then(wire_type) else {
            return false;
        };
        let Ok(v) = c.varint() else {
            // Cut off inside the value: protobuf as far as it goes.
            return c.done();
        };
        if wt == 2 {
            let left = (c.data.len() - c.pos) as u64;
            if v > left {
                return true;
            }
            c.pos += v as usize;
        }
    }
    true
}

/// Decodes a raw (not gzip) profile.proto message held in memory.
pub(super) fn decode(data: &[u8]) -> Result<Profile> {
    decode_stream(&|| Ok(Box::new(data)), false, u64::MAX)
}

/// What the first pass counts, so the second allocates each pool once, exactly.
#[derive(Default)]
struct Counts {
    samples: usize,
    stack: usize,
    values: usize,
    labels: usize,
}

/// Decodes a profile.proto message read from `open` (twice: first everything but the
/// samples, which are only counted, then the samples straight into their pools), refusing
/// one longer than `limit` bytes. Peak memory is the profile itself plus its largest field.
pub(super) fn decode_stream(open: &Open<'_>, gz: bool, limit: u64) -> Result<Profile> {
    let mut p = Profile {
        format: Format::Pprof,
        ..Profile::default()
    };
    let source = Source { open, gz, limit };
    let mut buf = Vec::new();
    let mut first = FirstPass::default();
    first.read(&mut p, source.stream()?, &mut buf)?;
    let str_map = std::mem::take(&mut first.str_map);
    let table = StrMap(&str_map);
    first.resolve_header(&mut p, &table)?;
    let (counts, end) = (std::mem::take(&mut first.counts), first.end);
    let location_ids = first.resolve_tables(&mut p, &table)?;
    p.strings.seal();
    p.locations.shrink_to_fit();
    if counts.samples > 0 {
        read_samples(
            &mut p,
            &source,
            &mut buf,
            &counts,
            end,
            &location_ids,
            &table,
        )?;
    }
    Ok(p)
}

/// The message's bytes, opened once for each pass.
struct Source<'s, 'a> {
    open: &'s Open<'a>,
    gz: bool,
    limit: u64,
}

impl<'a> Source<'_, 'a> {
    fn stream(&self) -> Result<Stream<'a>> {
        Stream::open(self.open, self.gz, self.limit)
    }
}

/// What the first pass reads: everything but the samples, which it only counts. References
/// are still the file's: string table indices, mapping and function ids.
#[derive(Default)]
struct FirstPass {
    /// The string table: indices in the file -> interned strings.
    str_map: Vec<StrId>,
    sample_types: Vec<RawValueType>,
    mappings: Vec<RawMapping>,
    functions: Vec<RawFunction>,
    /// Every location's lines, (function id, line), in the order of the locations.
    lines: Vec<(u64, i64)>,
    /// Every location's mapping id, likewise.
    loc_mappings: Vec<u64>,
    comments: Vec<u64>,
    counts: Counts,
    period_type: RawValueType,
    drop_frames: u64,
    keep_frames: u64,
    default_sample_type: u64,
    /// Where the message ends: the second pass must end there too.
    end: u64,
}

impl FirstPass {
    /// Reads the message from `s`: locations into `p` (their mappings and lines still ids),
    /// strings interned into `p`, the rest kept here.
    fn read(&mut self, p: &mut Profile, mut s: Stream<'_>, buf: &mut Vec<u8>) -> Result<()> {
        loop {
            let at = s.pos as usize;
            let Some((number, v)) = s.field(buf, |_| true)? else {
                break;
            };
            match number {
                profile::SAMPLE_TYPE => self
                    .sample_types
                    .push(value_type(bytes_of(v, number, at)?)?),
                // Samples are only counted here and decoded in the second pass, once the
                // locations they point at are known (Go writes samples before locations).
                profile::SAMPLE => count_sample(bytes_of(v, number, at)?, &mut self.counts)?,
                profile::MAPPING => self.mappings.push(mapping(bytes_of(v, number, at)?)?),
                profile::LOCATION => {
                    let (id, mapping, address, lines, is_folded) =
                        location(bytes_of(v, number, at)?, &mut self.lines)?;
                    p.locations.push(Location {
                        id,
                        mapping: None,
                        address,
                        lines,
                        is_folded,
                    });
                    self.loc_mappings.push(mapping);
                }
                profile::FUNCTION => self.functions.push(function(bytes_of(v, number, at)?)?),
                profile::STRING_TABLE => {
                    let (b, off) = bytes_of(v, number, at)?;
                    if self.str_map.is_empty() && !b.is_empty() {
                        return Err(ErrorKind::Invalid {
                            what: format!(
                                "string_table[0] must be \"\" but is {:?} (offset {off})",
                                String::from_utf8_lossy(&b[..b.len().min(40)])
                            ),
                        });
                    }
                    self.str_map
                        .push(p.strings.intern(&String::from_utf8_lossy(b)));
                }
                profile::DROP_FRAMES => self.drop_frames = varint_of(v, number, at)?,
                profile::KEEP_FRAMES => self.keep_frames = varint_of(v, number, at)?,
                profile::TIME_NANOS => p.time_nanos = varint_of(v, number, at)? as i64,
                profile::DURATION_NANOS => p.duration_nanos = varint_of(v, number, at)? as i64,
                profile::PERIOD_TYPE => self.period_type = value_type(bytes_of(v, number, at)?)?,
                profile::PERIOD => p.period = varint_of(v, number, at)? as i64,
                profile::COMMENT => push_repeated(v, number, at, &mut self.comments)?,
                profile::DEFAULT_SAMPLE_TYPE => {
                    self.default_sample_type = varint_of(v, number, at)?
                }
                _ => {} // unknown fields are skipped, as protobuf requires
            }
        }
        if s.pos == 0 {
            return Err(ErrorKind::Empty);
        }
        self.end = s.pos;
        drop(s);
        if self.str_map.is_empty() {
            return Err(ErrorKind::Invalid {
                what: "no string table (not a pprof profile?)".into(),
            });
        }
        Ok(())
    }

    /// The profile's own strings: sample and period types, frame filters, the default
    /// sample type and the comments.
    fn resolve_header(&self, p: &mut Profile, table: &StrMap<'_>) -> Result<()> {
        let text = |p: &Profile, i: u64, what: &str| -> Result<String> {
            Ok(p.str(table.id(i, what)?).to_string())
        };
        for t in &self.sample_types {
            let vt = ValueType {
                ty: text(p, t.ty, "a sample type")?,
                unit: text(p, t.unit, "a sample unit")?,
            };
            p.sample_types.push(vt);
        }
        p.period_type = ValueType {
            ty: text(p, self.period_type.ty, "the period type")?,
            unit: text(p, self.period_type.unit, "the period unit")?,
        };
        p.drop_frames = text(p, self.drop_frames, "drop_frames")?;
        p.keep_frames = text(p, self.keep_frames, "keep_frames")?;
        p.default_sample_type = text(p, self.default_sample_type, "default_sample_type")?;
        for &c in &self.comments {
            let c = text(p, c, "a comment")?;
            p.comments.push(c);
        }
        Ok(())
    }

    /// The mappings and functions into `p`, and the locations' mapping and line references
    /// resolved; returns the location ids' map, for the samples.
    fn resolve_tables(self, p: &mut Profile, table: &StrMap<'_>) -> Result<IdMap> {
        let text = |p: &Profile, i: u64, what: &str| -> Result<String> {
            Ok(p.str(table.id(i, what)?).to_string())
        };
        let mapping_ids = index_ids(self.mappings.iter().map(|m| m.m.id), "mapping")?;
        for m in self.mappings {
            let mut mapping = m.m;
            mapping.file = text(p, m.file, "a mapping's file")?;
            mapping.build_id = text(p, m.build_id, "a mapping's build id")?;
            p.mappings.push(mapping);
        }
        let function_ids = index_ids(self.functions.iter().map(|f| f.id), "function")?;
        p.functions.reserve_exact(self.functions.len());
        for f in self.functions {
            p.functions.push(Function {
                id: f.id,
                name: table.id(f.name, "a function name")?,
                system_name: table.id(f.system_name, "a function's system name")?,
                filename: table.id(f.filename, "a function's file name")?,
                start_line: f.start_line,
            });
        }
        let location_ids = index_ids(p.locations.iter().map(|l| l.id), "location")?;
        p.lines.reserve_exact(self.lines.len());
        for (loc, &m) in p.locations.iter_mut().zip(&self.loc_mappings) {
            // pprof tolerates a mapping id with no mapping: the location has none.
            loc.mapping = if m == 0 { None } else { mapping_ids.get(m) };
            // Locations were read in order, so each one's lines land where its span says.
            for &(fid, line) in &self.lines[loc.lines.range()] {
                let Some(function) = function_ids.get(fid) else {
                    return Err(invalid(format!(
                        "location {} has a line in function {fid}, which is not in the profile",
                        loc.id
                    )));
                };
                p.lines.push(Line { function, line });
            }
        }
        Ok(location_ids)
    }
}

/// The second pass: the samples, straight into their pools (allocated once, at the sizes the
/// first pass counted), their location ids and label strings resolved. The message must be
/// what the first pass read.
fn read_samples(
    p: &mut Profile,
    source: &Source<'_, '_>,
    buf: &mut Vec<u8>,
    counts: &Counts,
    end: u64,
    location_ids: &IdMap,
    table: &StrMap<'_>,
) -> Result<()> {
    p.samples.reserve_exact(counts.samples);
    p.stacks = Stacks::with_capacity(counts.stack, p.locations.len());
    p.values.reserve_exact(counts.values);
    p.labels.reserve_exact(counts.labels);
    let mut s = source.stream()?;
    let (mut ids, mut locs) = (Vec::new(), Vec::new());
    loop {
        let at = s.pos as usize;
        let Some((number, v)) = s.field(buf, |n| n == 2)? else {
            break;
        };
        if number == 2 {
            let i = p.samples.len();
            let bytes = bytes_of(v, number, at)?;
            sample(p, bytes, i, location_ids, table, &mut ids, &mut locs)?;
        }
    }
    if s.pos != end || p.samples.len() != counts.samples {
        return Err(invalid(format!(
            "the data changed while it was read: {} bytes and {} samples, then {} bytes \
             and {} samples",
            end,
            counts.samples,
            s.pos,
            p.samples.len()
        )));
    }
    Ok(())
}

/// Counts a sample's stack entries, values and labels (validated in the second pass).
fn count_sample((b, off): (&[u8], usize), counts: &mut Counts) -> Result<()> {
    let mut c = Cursor::new(b, off);
    counts.samples += 1;
    while !c.done() {
        let (n, v) = c.field()?;
        let k = packed_len(&v);
        match n {
            sample::LOCATION_ID => counts.stack += k,
            sample::VALUE => counts.values += k,
            sample::LABEL => counts.labels += 1,
            _ => {}
        }
    }
    Ok(())
}

/// The string table: indices in the file -> interned strings.
struct StrMap<'a>(&'a [StrId]);

impl StrMap<'_> {
    fn id(&self, i: u64, what: &str) -> Result<StrId> {
        match usize::try_from(i).ok().and_then(|i| self.0.get(i)) {
            Some(&s) => Ok(s),
            _ => Err(ErrorKind::Invalid {
                what: format!(
                    "{what} refers to string {i}, but the string table has {} entries",
                    self.0.len()
                ),
            }),
        }
    }
}

fn invalid(what: String) -> ErrorKind {
    ErrorKind::Invalid { what }
}

/// Id -> index. Writers number ids 1..=n, so a dense table is the usual case (as pprof
/// does); a sparse map is the fallback for ids far above the count.
enum IdMap {
    Dense(Vec<u32>),
    Sparse(HashMap<u64, u32>),
}

impl IdMap {
    fn get(&self, id: u64) -> Option<u32> {
        match self {
            IdMap::Dense(v) => usize::try_from(id)
                .ok()
                .and_then(|i| v.get(i))
                .copied()
                .filter(|&i| i != u32::MAX),
            IdMap::Sparse(m) => m.get(&id).copied(),
        }
    }
}

/// Builds an id -> index map, refusing id 0 and duplicates.
fn index_ids(ids: impl Iterator<Item = u64> + Clone, what: &str) -> Result<IdMap> {
    let count = ids.clone().count();
    let max = ids.clone().max().unwrap_or(0);
    let dense = max <= 2 * count as u64 + 16;
    let mut map = if dense {
        IdMap::Dense(vec![u32::MAX; max as usize + 1])
    } else {
        IdMap::Sparse(HashMap::with_capacity(count))
    };
    for (i, id) in ids.enumerate() {
        if id == 0 {
            return Err(invalid(format!("{what} with the reserved id 0")));
        }
        let duplicate = match &mut map {
            IdMap::Dense(v) => std::mem::replace(&mut v[id as usize], i as u32) != u32::MAX,
            IdMap::Sparse(m) => m.insert(id, i as u32).is_some(),
        };
        if duplicate {
            return Err(invalid(format!("two {what}s with id {id}")));
        }
    }
    Ok(map)
}

/// Decodes sample `i` into the profile's pools, resolving location ids and label strings.
fn sample(
    p: &mut Profile,
    (b, off): (&[u8], usize),
    i: usize,
    location_ids: &IdMap,
    table: &StrMap<'_>,
    ids: &mut Vec<u64>,
    locs: &mut Vec<u32>,
) -> Result<()> {
    let mut c = Cursor::new(b, off);
    locs.clear();
    let values_start = p.values.len();
    let labels_start = p.labels.len();
    while !c.done() {
        let at = c.at();
        match c.field()? {
            (sample::LOCATION_ID, v) => {
                ids.clear();
                push_repeated(v, sample::LOCATION_ID, at, ids)?;
                for &id in ids.iter() {
                    match location_ids.get(id) {
                        Some(l) => locs.push(l),
                        None if id == 0 => {
                            return Err(invalid(format!("sample {i} refers to location id 0")))
                        }
                        None => {
                            return Err(invalid(format!(
                                "sample {i} refers to location {id}, which is not in the profile"
                            )))
                        }
                    }
                }
            }
            (sample::VALUE, v) => {
                ids.clear();
                push_repeated(v, sample::VALUE, at, ids)?;
                p.values.extend(ids.iter().map(|&x| x as i64));
            }
            (sample::LABEL, v) => {
                let (lb, loff) = bytes_of(v, sample::LABEL, at)?;
                let mut lc = Cursor::new(lb, loff);
                let mut l = RawLabel::default();
                while !lc.done() {
                    let at = lc.at();
                    match lc.field()? {
                        (label::KEY, v) => l.key = varint_of(v, label::KEY, at)?,
                        (label::STR, v) => l.str = varint_of(v, label::STR, at)?,
                        (label::NUM, v) => l.num = varint_of(v, label::NUM, at)? as i64,
                        (label::NUM_UNIT, v) => l.unit = varint_of(v, label::NUM_UNIT, at)?,
                        _ => {}
                    }
                }
                let text = |i: u64, what: &str| -> Result<String> {
                    Ok(p.str(table.id(i, what)?).to_string())
                };
                let key = text(l.key, "a label key")?;
                let label = if l.str != 0 {
                    Label::Str {
                        key,
                        value: text(l.str, "a label value")?,
                    }
                } else if l.num != 0 || l.unit != 0 {
                    Label::Num {
                        key,
                        value: l.num,
                        unit: text(l.unit, "a label unit")?,
                    }
                } else {
                    continue;
                };
                p.labels.push(label);
            }
            _ => {}
        }
    }
    if locs.len() > MAX_STACK_DEPTH {
        return Err(invalid(format!(
            "sample {i} has a stack {} frames deep, more than the {MAX_STACK_DEPTH} \
             this reader accepts (runaway recursion or damage)",
            locs.len()
        )));
    }
    let sample = Sample {
        stack: p.stacks.push(locs.iter().copied()),
        values: Span {
            start: values_start as u32,
            len: (p.values.len() - values_start) as u32,
        },
        labels: Span {
            start: labels_start as u32,
            len: (p.labels.len() - labels_start) as u32,
        },
    };
    p.samples.push(sample);
    Ok(())
}

fn value_type((b, off): (&[u8], usize)) -> Result<RawValueType> {
    let mut c = Cursor::new(b, off);
    let mut t = RawValueType::default();
    while !c.done() {
        let at = c.at();
        match c.field()? {
            (value_type::TYPE, v) => t.ty = varint_of(v, value_type::TYPE, at)?,
            (value_type::UNIT, v) => t.unit = varint_of(v, value_type::UNIT, at)?,
            _ => {}
        }
    }
    Ok(t)
}

fn mapping((b, off): (&[u8], usize)) -> Result<RawMapping> {
    let mut c = Cursor::new(b, off);
    let mut m = RawMapping {
        m: Mapping::default(),
        file: 0,
        build_id: 0,
    };
    while !c.done() {
        let at = c.at();
        let (n, v) = c.field()?;
        if !(mapping::ID..=mapping::HAS_INLINE_FRAMES).contains(&n) {
            continue;
        }
        let x = varint_of(v, n, at)?;
        match n {
            mapping::ID => m.m.id = x,
            mapping::MEMORY_START => m.m.start = x,
            mapping::MEMORY_LIMIT => m.m.limit = x,
            mapping::FILE_OFFSET => m.m.offset = x,
            mapping::FILENAME => m.file = x,
            mapping::BUILD_ID => m.build_id = x,
            mapping::HAS_FUNCTIONS => m.m.has_functions = x != 0,
            mapping::HAS_FILENAMES => m.m.has_filenames = x != 0,
            mapping::HAS_LINE_NUMBERS => m.m.has_line_numbers = x != 0,
            _ => m.m.has_inline_frames = x != 0,
        }
    }
    Ok(m)
}

/// A location: (id, mapping id, address, its lines' span in `lines`, is_folded).
fn location(
    (b, off): (&[u8], usize),
    lines: &mut Vec<(u64, i64)>,
) -> Result<(u64, u64, u64, Span, bool)> {
    let mut c = Cursor::new(b, off);
    let (mut id, mut mapping, mut address, mut is_folded) = (0, 0, 0, false);
    let start = lines.len();
    while !c.done() {
        let at = c.at();
        match c.field()? {
            (location::ID, v) => id = varint_of(v, location::ID, at)?,
            (location::MAPPING_ID, v) => mapping = varint_of(v, location::MAPPING_ID, at)?,
            (location::ADDRESS, v) => address = varint_of(v, location::ADDRESS, at)?,
            (location::LINE, v) => {
                let (lb, loff) = bytes_of(v, location::LINE, at)?;
                let mut lc = Cursor::new(lb, loff);
                let (mut f, mut line) = (0u64, 0i64);
                while !lc.done() {
                    let at = lc.at();
                    match lc.field()? {
                        (line::FUNCTION_ID, v) => f = varint_of(v, line::FUNCTION_ID, at)?,
                        (line::LINE, v) => line = varint_of(v, line::LINE, at)? as i64,
                        _ => {}
                    }
                }
                lines.push((f, line));
            }
            (location::IS_FOLDED, v) => is_folded = varint_of(v, location::IS_FOLDED, at)? != 0,
            _ => {}
        }
    }
    let span = Span {
        start: start as u32,
        len: (lines.len() - start) as u32,
    };
    Ok((id, mapping, address, span, is_folded))
}

fn function((b, off): (&[u8], usize)) -> Result<RawFunction> {
    let mut c = Cursor::new(b, off);
    let mut f = RawFunction {
        id: 0,
        name: 0,
        system_name: 0,
        filename: 0,
        start_line: 0,
    };
    while !c.done() {
        let at = c.at();
        let (n, v) = c.field()?;
        if !(function::ID..=function::START_LINE).contains(&n) {
            continue;
        }
        let x = varint_of(v, n, at)?;
        match n {
            function::ID => f.id = x,
            function::NAME => f.name = x,
            function::SYSTEM_NAME => f.system_name = x,
            function::FILENAME => f.filename = x,
            _ => f.start_line = x as i64,
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn field_bytes(n: u64, b: &[u8], out: &mut Vec<u8>) {
        varint(n << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    #[test]
    fn decodes_a_minimal_profile_and_rejects_bad_string_zero() {
        let mut vt = Vec::new();
        varint(1 << 3, &mut vt);
        varint(1, &mut vt);
        varint(2 << 3, &mut vt);
        varint(2, &mut vt);
        let mut p = Vec::new();
        field_bytes(1, &vt, &mut p);
        for s in ["", "samples", "count"] {
            field_bytes(6, s.as_bytes(), &mut p);
        }
        let prof = decode(&p).unwrap();
        assert_eq!(prof.sample_types, vec![ValueType::new("samples", "count")]);

        let mut bad = Vec::new();
        field_bytes(6, b"x", &mut bad);
        let err = decode(&bad).unwrap_err();
        assert!(err.to_string().contains("string_table[0]"), "{err}");
    }

    #[test]
    fn the_limit_stops_a_long_field_as_it_is_read() {
        // One string of 1 MiB, with a limit of 4 KiB: refused as too large after reading
        // just past the limit, not after buffering the field.
        let mut p = Vec::new();
        field_bytes(6, b"", &mut p);
        field_bytes(6, &vec![b'x'; 1 << 20], &mut p);
        let open = || -> std::io::Result<Box<dyn Read + '_>> { Ok(Box::new(&p[..])) };
        let err = decode_stream(&open, false, 4096).unwrap_err();
        assert_eq!(err, ErrorKind::TooLarge { limit: 4096 });
    }

    #[test]
    fn what_looks_like_protobuf() {
        assert!(!looks_like_proto(b"Hello world"));
        assert!(!looks_like_proto(b"Process 12: started"));
        assert!(!looks_like_proto(b"PK\x03\x04zipfile"));
        // time_nanos, then a sample type cut off: still protobuf.
        assert!(looks_like_proto(&[0x48, 0x85, 0x01, 0x0a, 40, 0x08]));
        assert!(looks_like_proto(&[0x0a, 4, 0x08, 1, 0x10, 2, 0x32, 0]));
    }

    #[test]
    fn a_claimed_length_past_the_end_is_an_error_not_an_allocation() {
        let mut p = Vec::new();
        varint(6 << 3 | 2, &mut p);
        varint(u64::MAX >> 1, &mut p);
        let err = decode(&p).unwrap_err();
        assert!(err.to_string().contains("claims"), "{err}");
    }
}
