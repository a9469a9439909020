//! The writer: a [`Profile`] as profile.proto's protobuf bytes ([`encode`]), gzipped as
//! `go tool pprof` expects ([`write_gz`]).
//!
//! Hand-written, like Go's `runtime/pprof/protobuf.go`, so that neither the library nor the
//! tools carry a protobuf dependency. Only the wire types pprof uses appear: varints (type 0)
//! and length-delimited fields (type 2); repeated scalars are written packed, zero fields are
//! left out (proto3's default), and each message's fields come in field-number order.
//!
//! Output is deterministic: the string table holds `""` first, then every string in the order
//! of first use by a fixed walk of the profile, so the same profile gives the same bytes.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::fields::{function, label, line, location, mapping, profile, sample, value_type};
use crate::{LabelValue, Profile, ValueType};

/// Protobuf writer with the string table being built.
struct Enc {
    buf: Vec<u8>,
    strings: Vec<String>,
    index: HashMap<String, i64>,
}

const VARINT: u64 = 0;
const BYTES: u64 = 2;

/// Appends `v` to `buf` as a protobuf varint.
fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

impl Enc {
    fn varint(&mut self, v: u64) {
        put_varint(&mut self.buf, v)
    }

    fn key(&mut self, field: u64, wire: u64) {
        self.varint(field << 3 | wire);
    }

    /// A varint field, omitted when zero (proto3 default).
    fn u64(&mut self, field: u64, v: u64) {
        if v != 0 {
            self.key(field, VARINT);
            self.varint(v);
        }
    }

    fn i64(&mut self, field: u64, v: i64) {
        self.u64(field, v as u64)
    }

    fn bool(&mut self, field: u64, v: bool) {
        self.u64(field, v as u64)
    }

    /// A packed repeated varint field.
    fn packed(&mut self, field: u64, vs: impl Iterator<Item = u64>) {
        let mut body = Vec::new();
        for v in vs {
            put_varint(&mut body, v);
        }
        if !body.is_empty() {
            self.key(field, BYTES);
            self.varint(body.len() as u64);
            self.buf.extend_from_slice(&body);
        }
    }

    /// The string's index in the table, adding it on first use.
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }

    /// A string-index field (omitted for `""`, index 0).
    fn str(&mut self, field: u64, s: &str) {
        let i = self.string(s);
        self.i64(field, i);
    }

    /// A length-delimited sub-message written by `f`.
    fn message(&mut self, field: u64, f: impl FnOnce(&mut Enc)) {
        let start = self.buf.len();
        f(self);
        let body: Vec<u8> = self.buf.drain(start..).collect();
        self.key(field, BYTES);
        self.varint(body.len() as u64);
        self.buf.extend_from_slice(&body);
    }

    fn value_type(&mut self, field: u64, vt: &ValueType) {
        self.message(field, |e| {
            e.str(value_type::TYPE, &vt.ty);
            e.str(value_type::UNIT, &vt.unit);
        });
    }
}

/// `p` as profile.proto's protobuf bytes, not compressed.
pub fn encode(p: &Profile) -> Vec<u8> {
    let mut e = Enc {
        buf: Vec::new(),
        strings: Vec::new(),
        index: HashMap::new(),
    };
    e.string("");
    for vt in &p.sample_types {
        e.value_type(profile::SAMPLE_TYPE, vt);
    }
    for s in &p.samples {
        e.message(profile::SAMPLE, |e| {
            e.packed(sample::LOCATION_ID, s.location_ids.iter().copied());
            e.packed(sample::VALUE, s.values.iter().map(|&v| v as u64));
            for l in &s.labels {
                e.message(sample::LABEL, |e| {
                    e.str(label::KEY, &l.key);
                    match &l.value {
                        LabelValue::Str(v) => e.str(label::STR, v),
                        LabelValue::Num(n, unit) => {
                            e.i64(label::NUM, *n);
                            e.str(label::NUM_UNIT, unit);
                        }
                    }
                });
            }
        });
    }
    for m in &p.mappings {
        e.message(profile::MAPPING, |e| {
            e.u64(mapping::ID, m.id);
            e.u64(mapping::MEMORY_START, m.start);
            e.u64(mapping::MEMORY_LIMIT, m.limit);
            e.u64(mapping::FILE_OFFSET, m.offset);
            e.str(mapping::FILENAME, &m.file);
            e.str(mapping::BUILD_ID, &m.build_id);
            e.bool(mapping::HAS_FUNCTIONS, m.has_functions);
            e.bool(mapping::HAS_FILENAMES, m.has_filenames);
            e.bool(mapping::HAS_LINE_NUMBERS, m.has_line_numbers);
            e.bool(mapping::HAS_INLINE_FRAMES, m.has_inline_frames);
        });
    }
    for l in &p.locations {
        e.message(profile::LOCATION, |e| {
            e.u64(location::ID, l.id);
            e.u64(location::MAPPING_ID, l.mapping_id);
            e.u64(location::ADDRESS, l.address);
            for line in &l.lines {
                e.message(location::LINE, |e| {
                    e.u64(line::FUNCTION_ID, line.function_id);
                    e.i64(line::LINE, line.line);
                });
            }
            e.bool(location::IS_FOLDED, l.is_folded);
        });
    }
    for f in &p.functions {
        e.message(profile::FUNCTION, |e| {
            e.u64(function::ID, f.id);
            e.str(function::NAME, &f.name);
            e.str(function::SYSTEM_NAME, &f.system_name);
            e.str(function::FILENAME, &f.filename);
            e.i64(function::START_LINE, f.start_line);
        });
    }
    e.str(profile::DROP_FRAMES, &p.drop_frames);
    e.str(profile::KEEP_FRAMES, &p.keep_frames);
    e.i64(profile::TIME_NANOS, p.time_nanos);
    e.i64(profile::DURATION_NANOS, p.duration_nanos);
    if let Some(pt) = &p.period_type {
        e.value_type(profile::PERIOD_TYPE, pt);
    }
    e.i64(profile::PERIOD, p.period);
    let comments: Vec<i64> = p.comments.iter().map(|c| e.string(c)).collect();
    e.packed(profile::COMMENT, comments.into_iter().map(|i| i as u64));
    e.str(profile::DEFAULT_SAMPLE_TYPE, &p.default_sample_type);
    // The string table goes last: every index above has been assigned by now.
    let strings = std::mem::take(&mut e.strings);
    for s in &strings {
        e.key(profile::STRING_TABLE, BYTES);
        e.varint(s.len() as u64);
        e.buf.extend_from_slice(s.as_bytes());
    }
    e.buf
}

/// Writes `p` gzip-compressed to `w`, the form `go tool pprof` and Pyroscope read: in stored
/// blocks up to 32 KiB encoded, deflated above.
pub fn write_gz(p: &Profile, mut w: impl Write) -> io::Result<()> {
    let raw = encode(p);
    if raw.len() <= STORED_UP_TO {
        w.write_all(&gzip_stored(&raw))?;
        return w.flush();
    }
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
    gz.write_all(&raw)?;
    gz.finish()?.flush()
}

/// Profiles up to this size (encoded) are gzipped without compression: setting up deflate's
/// state (~300 KiB, zeroed) cost a short-lived program more than the rest of writing its
/// profile, which is a few KiB.
const STORED_UP_TO: usize = 32 << 10;

/// `data` as a gzip member of stored (uncompressed) deflate blocks: what every gzip reader
/// reads.
fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 0xffff * 5 + 25);
    // Magic, deflate, no flags, no time, no extra flags, OS unknown.
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
    let mut blocks = data.chunks(0xffff).peekable();
    if data.is_empty() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        // BFINAL on the last; BTYPE 00 (stored); then LEN and its complement.
        out.push(u8::from(blocks.peek().is_none()));
        let n = block.len() as u16;
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(!n).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// gzip's CRC-32 (IEEE, reflected), a byte at a time from a table built at compile time.
/// Not `flate2::Crc`: its SIMD path asks the CPU which features it has on first use, about
/// ten `cpuid` instructions at 3.5 µs each in a virtual machine, at the exit of every
/// profiled process; a profile stored this way is at most 32 KiB, a few µs here.
fn crc32(data: &[u8]) -> u32 {
    crc32_update(0, data)
}

/// [`crc32`] of the bytes whose CRC is `crc`, then `data`: a file's, a piece at a time
/// (`elf`'s debug-file check, which needs no more speed than a table a byte at a time gives
/// it: it reads the rare debug file of a binary without a build id).
pub(crate) fn crc32_update(crc: u32, data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    !data.iter().fold(!crc, |c, &b| {
        TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Function, Label, Line, Location, Mapping, Sample};

    /// Small profiles are stored, large ones compressed: both read back by a gzip reader.
    #[test]
    fn gzip_stored_and_compressed_read_back() {
        use std::io::Read;
        // The CRC's check value, and flate2's on other data.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        let mut other = flate2::Crc::new();
        other.update(&[7u8; 3000]);
        assert_eq!(crc32(&[7u8; 3000]), other.sum());
        for n in [0usize, 1, 1000, 0xffff, 0x10000, 200_000] {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
            let gz = gzip_stored(&data);
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&gz[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, data, "{n} bytes");
        }
        let p = sample_profile();
        let mut out = Vec::new();
        write_gz(&p, &mut out).unwrap();
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&out[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, encode(&p));
    }

    /// A minimal protobuf reader for the tests: (field, wire type, varint or bytes).
    fn fields(mut b: &[u8]) -> Vec<(u64, u64, u64, Vec<u8>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let mut v = 0u64;
            let mut shift = 0;
            loop {
                let byte = b[0];
                *b = &b[1..];
                v |= ((byte & 0x7f) as u64) << shift;
                if byte < 0x80 {
                    return v;
                }
                shift += 7;
            }
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let k = varint(&mut b);
            let (field, wire) = (k >> 3, k & 7);
            if wire == 0 {
                out.push((field, wire, varint(&mut b), Vec::new()));
            } else {
                assert_eq!(wire, 2, "only varint and bytes are written");
                let n = varint(&mut b) as usize;
                out.push((field, wire, 0, b[..n].to_vec()));
                b = &b[n..];
            }
        }
        out
    }

    fn sample_profile() -> Profile {
        Profile {
            sample_types: vec![
                ValueType::new("samples", "count"),
                ValueType::new("cpu", "nanoseconds"),
            ],
            samples: vec![Sample {
                location_ids: vec![1, 2],
                values: vec![3, 30_000_000],
                labels: vec![
                    Label {
                        key: "thread".into(),
                        value: LabelValue::Str("main".into()),
                    },
                    Label {
                        key: "tid".into(),
                        value: LabelValue::Num(42, String::new()),
                    },
                ],
            }],
            mappings: vec![Mapping {
                id: 1,
                start: 0x1000,
                limit: 0x2000,
                file: "/bin/x".into(),
                has_functions: true,
                ..Mapping::default()
            }],
            locations: vec![
                Location {
                    id: 1,
                    mapping_id: 1,
                    address: 0x1234,
                    lines: vec![
                        Line {
                            function_id: 2,
                            line: 7,
                        },
                        Line {
                            function_id: 1,
                            line: 3,
                        },
                    ],
                    is_folded: false,
                },
                Location {
                    id: 2,
                    mapping_id: 1,
                    address: 0x1300,
                    lines: vec![Line {
                        function_id: 1,
                        line: 9,
                    }],
                    is_folded: false,
                },
            ],
            functions: vec![
                Function {
                    id: 1,
                    name: "main".into(),
                    system_name: "main".into(),
                    filename: "/src/main.rs".into(),
                    start_line: 1,
                },
                Function {
                    id: 2,
                    name: "inlined".into(),
                    system_name: "inlined".into(),
                    filename: "/src/main.rs".into(),
                    start_line: 5,
                },
            ],
            drop_frames: String::new(),
            keep_frames: String::new(),
            time_nanos: 1_700_000_000_000_000_000,
            duration_nanos: 1_000_000_000,
            period_type: Some(ValueType::new("cpu", "nanoseconds")),
            period: 10_000_000,
            comments: vec!["source: timer_create".into()],
            default_sample_type: "cpu".into(),
        }
    }

    #[test]
    fn encoding_is_deterministic_and_string_table_starts_empty() {
        let p = sample_profile();
        let a = encode(&p);
        assert_eq!(a, encode(&p));
        let strings: Vec<String> = fields(&a)
            .into_iter()
            .filter(|f| f.0 == 6)
            .map(|f| String::from_utf8(f.3).unwrap())
            .collect();
        assert_eq!(strings[0], "");
        assert_eq!(strings[1..3], ["samples", "count"]);
        // Every string once.
        let mut sorted = strings.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), strings.len());
    }

    #[test]
    fn samples_locations_and_labels_round_trip_through_the_wire_format() {
        let bytes = encode(&sample_profile());
        let top = fields(&bytes);
        let strings: Vec<String> = top
            .iter()
            .filter(|f| f.0 == 6)
            .map(|f| String::from_utf8(f.3.clone()).unwrap())
            .collect();
        let sample = &top.iter().find(|f| f.0 == 2).unwrap().3;
        let sf = fields(sample);
        assert_eq!(sf[0].0, 1);
        assert_eq!(sf[0].3, vec![1, 2], "packed location ids");
        // 30_000_000 as a varint: 0x80 0x87 0xa7 0x0e.
        assert_eq!(sf[1].3, vec![3, 0x80, 0x87, 0xa7, 0x0e]);
        let label = fields(&sf[3].3);
        assert_eq!(strings[label[0].2 as usize], "tid");
        assert_eq!((label[1].0, label[1].2), (3, 42), "numeric label");
        let loc = &top.iter().find(|f| f.0 == 4).unwrap().3;
        let lines: Vec<_> = fields(loc).into_iter().filter(|f| f.0 == 4).collect();
        assert_eq!(lines.len(), 2, "inlined frames are Lines of one Location");
        let period = top.iter().find(|f| f.0 == 12).unwrap().2;
        assert_eq!(period, 10_000_000);
        let dst = top.iter().find(|f| f.0 == 14).unwrap().2;
        assert_eq!(strings[dst as usize], "cpu");
    }

    #[test]
    fn gzip_output_starts_with_the_gzip_magic_and_inflates_to_the_encoding() {
        use std::io::Read;
        let p = sample_profile();
        let mut gz = Vec::new();
        write_gz(&p, &mut gz).unwrap();
        assert_eq!(gz[..2], [0x1f, 0x8b]);
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut raw)
            .unwrap();
        assert_eq!(raw, encode(&p));
    }
}
