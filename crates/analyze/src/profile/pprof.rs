//! profile.proto decoding, by hand: one pass over the message collecting records with string
//! indices, then one pass resolving strings and ids.
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

use super::{
    ErrorKind, Format, Function, Label, Line, Location, Mapping, Profile, Sample, ValueType,
};

/// A protobuf cursor over a message's bytes; `base` is the message's offset in the file, for
/// error messages.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    base: usize,
}

type Result<T> = std::result::Result<T, ErrorKind>;

fn malformed(offset: usize, what: impl Into<String>) -> ErrorKind {
    ErrorKind::Malformed {
        format: "pprof",
        offset: offset as u64,
        what: what.into(),
    }
}

/// A field's value, by wire type.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8], usize),
    Fixed,
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8], base: usize) -> Cursor<'a> {
        Cursor { data, pos: 0, base }
    }

    fn at(&self) -> usize {
        self.base + self.pos
    }

    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn varint(&mut self) -> Result<u64> {
        let start = self.at();
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(&b) = self.data.get(self.pos) else {
                return Err(malformed(start, "varint runs past the end of its message"));
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(malformed(start, "varint over 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(malformed(start, "varint longer than 10 bytes"))
    }

    /// The next field: (number, value).
    fn field(&mut self) -> Result<(u64, Value<'a>)> {
        let start = self.at();
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 {
            return Err(malformed(start, "field number 0"));
        }
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.fixed(8, start)?;
                Value::Fixed
            }
            2 => {
                let len_at = self.at();
                let len = self.varint()?;
                let remain = (self.data.len() - self.pos) as u64;
                if len > remain {
                    return Err(malformed(
                        len_at,
                        format!(
                            "field {number} claims {len} bytes but its message has {remain} left"
                        ),
                    ));
                }
                let off = self.at();
                let bytes = &self.data[self.pos..self.pos + len as usize];
                self.pos += len as usize;
                Value::Bytes(bytes, off)
            }
            5 => {
                self.fixed(4, start)?;
                Value::Fixed
            }
            t => {
                return Err(malformed(
                    start,
                    format!("field {number} has unsupported wire type {t}"),
                ))
            }
        };
        Ok((number, value))
    }

    fn fixed(&mut self, n: usize, start: usize) -> Result<u64> {
        if self.data.len() - self.pos < n {
            return Err(malformed(start, "fixed-width field runs past the end"));
        }
        let mut v = 0u64;
        for i in 0..n {
            v |= u64::from(self.data[self.pos + i]) << (8 * i);
        }
        self.pos += n;
        Ok(v)
    }
}

/// Appends a repeated integer field's values, packed or not.
fn push_repeated(v: Value<'_>, number: u64, at: usize, out: &mut Vec<u64>) -> Result<()> {
    match v {
        Value::Varint(x) => out.push(x),
        Value::Bytes(b, off) => {
            let mut c = Cursor::new(b, off);
            // Exactly as many as there are varints (each ends with a byte below 0x80).
            out.reserve(b.iter().filter(|&&x| x < 0x80).count());
            while !c.done() {
                out.push(c.varint()?);
            }
        }
        Value::Fixed => {
            return Err(malformed(
                at,
                format!("field {number}: fixed-width integer"),
            ));
        }
    }
    Ok(())
}

fn varint_of(v: Value<'_>, number: u64, at: usize) -> Result<u64> {
    match v {
        Value::Varint(x) => Ok(x),
        _ => Err(malformed(at, format!("field {number} should be a varint"))),
    }
}

fn bytes_of<'a>(v: Value<'a>, number: u64, at: usize) -> Result<(&'a [u8], usize)> {
    match v {
        Value::Bytes(b, off) => Ok((b, off)),
        _ => Err(malformed(
            at,
            format!("field {number} should be length-delimited"),
        )),
    }
}

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

struct RawLocation {
    id: u64,
    mapping: u64,
    address: u64,
    lines: Vec<(u64, i64)>,
    is_folded: bool,
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
pub(super) fn looks_like_proto(data: &[u8]) -> bool {
    matches!(data.first(), Some(0x0a | 0x12 | 0x1a | 0x22 | 0x2a | 0x32))
}

/// Decodes a raw (not gzip) profile.proto message.
pub(super) fn decode(data: &[u8]) -> Result<Profile> {
    let mut c = Cursor::new(data, 0);
    let mut strings: Vec<&[u8]> = Vec::new();
    let mut sample_types = Vec::new();
    let mut samples = Vec::new();
    let mut mappings = Vec::new();
    let mut locations = Vec::new();
    let mut functions = Vec::new();
    let mut comments = Vec::new();
    let mut period_type = RawValueType::default();
    let (mut drop_frames, mut keep_frames, mut default_sample_type) = (0u64, 0u64, 0u64);
    let mut p = Profile {
        format: Format::Pprof,
        ..Profile::default()
    };
    while !c.done() {
        let at = c.at();
        let (number, v) = c.field()?;
        match number {
            1 => sample_types.push(value_type(bytes_of(v, number, at)?)?),
            // Samples are decoded last, straight into their final form, once the locations
            // they point at are known (Go writes samples before locations).
            2 => samples.push(bytes_of(v, number, at)?),
            3 => mappings.push(mapping(bytes_of(v, number, at)?)?),
            4 => locations.push(location(bytes_of(v, number, at)?)?),
            5 => functions.push(function(bytes_of(v, number, at)?)?),
            6 => strings.push(bytes_of(v, number, at)?.0),
            7 => drop_frames = varint_of(v, number, at)?,
            8 => keep_frames = varint_of(v, number, at)?,
            9 => p.time_nanos = varint_of(v, number, at)? as i64,
            10 => p.duration_nanos = varint_of(v, number, at)? as i64,
            11 => period_type = value_type(bytes_of(v, number, at)?)?,
            12 => p.period = varint_of(v, number, at)? as i64,
            13 => push_repeated(v, number, at, &mut comments)?,
            14 => default_sample_type = varint_of(v, number, at)?,
            _ => {} // unknown fields are skipped, as protobuf requires
        }
    }
    if data.is_empty() {
        return Err(ErrorKind::Empty);
    }
    if strings.is_empty() {
        return Err(ErrorKind::Invalid {
            what: "no string table (not a pprof profile?)".into(),
        });
    }
    if !strings[0].is_empty() {
        return Err(ErrorKind::Invalid {
            what: format!(
                "string_table[0] must be \"\" but is {:?}",
                String::from_utf8_lossy(&strings[0][..strings[0].len().min(40)])
            ),
        });
    }
    let table = Strings { strings };
    resolve(
        &mut p,
        &table,
        Raw {
            sample_types,
            samples,
            mappings,
            locations,
            functions,
            comments,
            period_type,
            drop_frames,
            keep_frames,
            default_sample_type,
        },
    )?;
    Ok(p)
}

struct Strings<'a> {
    strings: Vec<&'a [u8]>,
}

impl Strings<'_> {
    fn get(&self, i: u64, what: &str) -> Result<String> {
        match usize::try_from(i).ok().and_then(|i| self.strings.get(i)) {
            Some(s) => Ok(String::from_utf8_lossy(s).into_owned()),
            _ => Err(ErrorKind::Invalid {
                what: format!(
                    "{what} refers to string {i}, but the string table has {} entries",
                    self.strings.len()
                ),
            }),
        }
    }
}

struct Raw<'a> {
    sample_types: Vec<RawValueType>,
    samples: Vec<(&'a [u8], usize)>,
    mappings: Vec<RawMapping>,
    locations: Vec<RawLocation>,
    functions: Vec<RawFunction>,
    comments: Vec<u64>,
    period_type: RawValueType,
    drop_frames: u64,
    keep_frames: u64,
    default_sample_type: u64,
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

fn resolve(p: &mut Profile, s: &Strings<'_>, raw: Raw<'_>) -> Result<()> {
    for t in &raw.sample_types {
        p.sample_types.push(ValueType {
            ty: s.get(t.ty, "a sample type")?,
            unit: s.get(t.unit, "a sample unit")?,
        });
    }
    p.period_type = ValueType {
        ty: s.get(raw.period_type.ty, "the period type")?,
        unit: s.get(raw.period_type.unit, "the period unit")?,
    };
    p.drop_frames = s.get(raw.drop_frames, "drop_frames")?;
    p.keep_frames = s.get(raw.keep_frames, "keep_frames")?;
    p.default_sample_type = s.get(raw.default_sample_type, "default_sample_type")?;
    for &c in &raw.comments {
        p.comments.push(s.get(c, "a comment")?);
    }

    let mapping_ids = index_ids(raw.mappings.iter().map(|m| m.m.id), "mapping")?;
    for m in raw.mappings {
        let mut mapping = m.m;
        mapping.file = s.get(m.file, "a mapping's file")?;
        mapping.build_id = s.get(m.build_id, "a mapping's build id")?;
        p.mappings.push(mapping);
    }
    let function_ids = index_ids(raw.functions.iter().map(|f| f.id), "function")?;
    for f in raw.functions {
        p.functions.push(Function {
            id: f.id,
            name: s.get(f.name, "a function name")?,
            system_name: s.get(f.system_name, "a function's system name")?,
            filename: s.get(f.filename, "a function's file name")?,
            start_line: f.start_line,
        });
    }
    let location_ids = index_ids(raw.locations.iter().map(|l| l.id), "location")?;
    for l in raw.locations {
        let mut lines = Vec::with_capacity(l.lines.len());
        for (fid, line) in l.lines {
            let Some(function) = function_ids.get(fid) else {
                return Err(invalid(format!(
                    "location {} has a line in function {fid}, which is not in the profile",
                    l.id
                )));
            };
            lines.push(Line { function, line });
        }
        p.locations.push(Location {
            id: l.id,
            // pprof tolerates a mapping id with no mapping: the location has none.
            mapping: if l.mapping == 0 {
                None
            } else {
                mapping_ids.get(l.mapping)
            },
            address: l.address,
            lines,
            is_folded: l.is_folded,
        });
    }
    p.samples.reserve_exact(raw.samples.len());
    for (i, &range) in raw.samples.iter().enumerate() {
        p.samples.push(sample(range, i, &location_ids, s)?);
    }
    Ok(())
}

/// Number of varints in packed bytes (each ends with a byte below 0x80).
fn packed_len(v: &Value<'_>) -> usize {
    match v {
        Value::Bytes(b, _) => b.iter().filter(|&&x| x < 0x80).count(),
        _ => 1,
    }
}

/// Decodes sample `i`, resolving location ids and label strings.
fn sample(
    (b, off): (&[u8], usize),
    i: usize,
    location_ids: &IdMap,
    s: &Strings<'_>,
) -> Result<Sample> {
    let mut c = Cursor::new(b, off);
    let mut locations: Vec<u32> = Vec::new();
    let mut values: Vec<i64> = Vec::new();
    let mut labels = Vec::new();
    let mut ids = Vec::new();
    while !c.done() {
        let at = c.at();
        match c.field()? {
            (1, v) => {
                locations.reserve_exact(packed_len(&v));
                ids.clear();
                push_repeated(v, 1, at, &mut ids)?;
                for &id in &ids {
                    match location_ids.get(id) {
                        Some(l) => locations.push(l),
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
            (2, v) => {
                values.reserve_exact(packed_len(&v));
                ids.clear();
                push_repeated(v, 2, at, &mut ids)?;
                values.extend(ids.iter().map(|&x| x as i64));
            }
            (3, v) => {
                let (lb, loff) = bytes_of(v, 3, at)?;
                let mut lc = Cursor::new(lb, loff);
                let mut l = RawLabel::default();
                while !lc.done() {
                    let at = lc.at();
                    match lc.field()? {
                        (1, v) => l.key = varint_of(v, 1, at)?,
                        (2, v) => l.str = varint_of(v, 2, at)?,
                        (3, v) => l.num = varint_of(v, 3, at)? as i64,
                        (4, v) => l.unit = varint_of(v, 4, at)?,
                        _ => {}
                    }
                }
                let key = s.get(l.key, "a label key")?;
                if l.str != 0 {
                    labels.push(Label::Str {
                        key,
                        value: s.get(l.str, "a label value")?,
                    });
                } else if l.num != 0 || l.unit != 0 {
                    labels.push(Label::Num {
                        key,
                        value: l.num,
                        unit: s.get(l.unit, "a label unit")?,
                    });
                }
            }
            _ => {}
        }
    }
    Ok(Sample {
        locations,
        values,
        labels,
    })
}

fn value_type((b, off): (&[u8], usize)) -> Result<RawValueType> {
    let mut c = Cursor::new(b, off);
    let mut t = RawValueType::default();
    while !c.done() {
        let at = c.at();
        match c.field()? {
            (1, v) => t.ty = varint_of(v, 1, at)?,
            (2, v) => t.unit = varint_of(v, 2, at)?,
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
        if !(1..=10).contains(&n) {
            continue;
        }
        let x = varint_of(v, n, at)?;
        match n {
            1 => m.m.id = x,
            2 => m.m.start = x,
            3 => m.m.limit = x,
            4 => m.m.offset = x,
            5 => m.file = x,
            6 => m.build_id = x,
            7 => m.m.has_functions = x != 0,
            8 => m.m.has_filenames = x != 0,
            9 => m.m.has_line_numbers = x != 0,
            _ => m.m.has_inline_frames = x != 0,
        }
    }
    Ok(m)
}

fn location((b, off): (&[u8], usize)) -> Result<RawLocation> {
    let mut c = Cursor::new(b, off);
    let mut l = RawLocation {
        id: 0,
        mapping: 0,
        address: 0,
        lines: Vec::new(),
        is_folded: false,
    };
    while !c.done() {
        let at = c.at();
        match c.field()? {
            (1, v) => l.id = varint_of(v, 1, at)?,
            (2, v) => l.mapping = varint_of(v, 2, at)?,
            (3, v) => l.address = varint_of(v, 3, at)?,
            (4, v) => {
                let (lb, loff) = bytes_of(v, 4, at)?;
                let mut lc = Cursor::new(lb, loff);
                let (mut f, mut line) = (0u64, 0i64);
                while !lc.done() {
                    let at = lc.at();
                    match lc.field()? {
                        (1, v) => f = varint_of(v, 1, at)?,
                        (2, v) => line = varint_of(v, 2, at)? as i64,
                        _ => {}
                    }
                }
                l.lines.push((f, line));
            }
            (5, v) => l.is_folded = varint_of(v, 5, at)? != 0,
            _ => {}
        }
    }
    Ok(l)
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
        if !(1..=5).contains(&n) {
            continue;
        }
        let x = varint_of(v, n, at)?;
        match n {
            1 => f.id = x,
            2 => f.name = x,
            3 => f.system_name = x,
            4 => f.filename = x,
            _ => f.start_line = x as i64,
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
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
    fn a_claimed_length_past_the_end_is_an_error_not_an_allocation() {
        let mut p = Vec::new();
        varint(6 << 3 | 2, &mut p);
        varint(u64::MAX >> 1, &mut p);
        let err = decode(&p).unwrap_err();
        assert!(err.to_string().contains("claims"), "{err}");
    }
}
