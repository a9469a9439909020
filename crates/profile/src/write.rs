//! Writing a [`Profile`] as profile.proto (what `record --merge` writes, for `go tool
//! pprof` and every reader of pprof files): the message encoded field by field, its strings
//! gathered into the string table (index 0 the empty string), gzipped.

use std::collections::HashMap;
use std::io::Write;

use crate::{Label, Profile, ValueType};

/// The profile as a gzipped profile.proto, written to `w`.
pub fn write_gz(p: &Profile, w: impl Write) -> std::io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
    gz.write_all(&encode(p))?;
    gz.finish()?.flush()
}

/// The profile as profile.proto's bytes (not compressed).
pub fn encode(p: &Profile) -> Vec<u8> {
    let mut e = Enc::default();
    e.strings.insert(String::new(), 0);
    e.order.push(String::new());
    let mut out = Vec::new();
    for t in &p.sample_types {
        let m = e.value_type(t);
        msg(&mut out, 1, &m);
    }
    for s in &p.samples {
        let mut m = Vec::new();
        // Location ids, leaf first (the stack holds location indices).
        let ids: Vec<u64> = p.stack(s).map(|l| p.locations[l as usize].id).collect();
        packed(&mut m, 1, ids.iter().copied());
        packed(&mut m, 2, p.values(s).iter().map(|&v| v as u64));
        for l in p.labels(s) {
            let mut lm = Vec::new();
            match l {
                Label::Str { key, value } => {
                    int(&mut lm, 1, e.str(key));
                    int(&mut lm, 2, e.str(value));
                }
                Label::Num { key, value, unit } => {
                    int(&mut lm, 1, e.str(key));
                    int(&mut lm, 3, *value as u64);
                    int(&mut lm, 4, e.str(unit));
                }
            }
            msg(&mut m, 3, &lm);
        }
        msg(&mut out, 2, &m);
    }
    for mp in &p.mappings {
        let mut m = Vec::new();
        int(&mut m, 1, mp.id);
        int(&mut m, 2, mp.start);
        int(&mut m, 3, mp.limit);
        int(&mut m, 4, mp.offset);
        int(&mut m, 5, e.str(&mp.file));
        int(&mut m, 6, e.str(&mp.build_id));
        int(&mut m, 7, u64::from(mp.has_functions));
        int(&mut m, 8, u64::from(mp.has_filenames));
        int(&mut m, 9, u64::from(mp.has_line_numbers));
        int(&mut m, 10, u64::from(mp.has_inline_frames));
        msg(&mut out, 3, &m);
    }
    for l in &p.locations {
        let mut m = Vec::new();
        int(&mut m, 1, l.id);
        if let Some(mp) = l.mapping {
            int(&mut m, 2, p.mappings[mp as usize].id);
        }
        int(&mut m, 3, l.address);
        for line in p.lines(l) {
            let mut lm = Vec::new();
            int(&mut lm, 1, p.functions[line.function as usize].id);
            int(&mut lm, 2, line.line as u64);
            msg(&mut m, 4, &lm);
        }
        int(&mut m, 5, u64::from(l.is_folded));
        msg(&mut out, 4, &m);
    }
    for f in &p.functions {
        let mut m = Vec::new();
        int(&mut m, 1, f.id);
        int(&mut m, 2, e.str(p.str(f.name)));
        int(&mut m, 3, e.str(p.str(f.system_name)));
        int(&mut m, 4, e.str(p.str(f.filename)));
        int(&mut m, 5, f.start_line as u64);
        msg(&mut out, 5, &m);
    }
    int(&mut out, 7, e.str(&p.drop_frames));
    int(&mut out, 8, e.str(&p.keep_frames));
    int(&mut out, 9, p.time_nanos as u64);
    int(&mut out, 10, p.duration_nanos as u64);
    if !p.period_type.ty.is_empty() || !p.period_type.unit.is_empty() {
        let m = e.value_type(&p.period_type);
        msg(&mut out, 11, &m);
    }
    int(&mut out, 12, p.period as u64);
    let comments: Vec<u64> = p.comments.iter().map(|c| e.str(c)).collect();
    packed(&mut out, 13, comments.into_iter());
    int(&mut out, 14, e.str(&p.default_sample_type));
    // The string table last: every string is known by now (readers take it in any order).
    for s in &e.order {
        bytes(&mut out, 6, s.as_bytes());
    }
    out
}

/// The string table being gathered.
#[derive(Default)]
struct Enc {
    strings: HashMap<String, u64>,
    order: Vec<String>,
}

impl Enc {
    fn str(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.order.len() as u64;
        self.strings.insert(s.to_string(), i);
        self.order.push(s.to_string());
        i
    }

    fn value_type(&mut self, t: &ValueType) -> Vec<u8> {
        let mut m = Vec::new();
        int(&mut m, 1, self.str(&t.ty));
        int(&mut m, 2, self.str(&t.unit));
        m
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A varint field (left out when 0, as proto3 does).
fn int(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        varint(out, u64::from(field) << 3);
        varint(out, v);
    }
}

/// A length-delimited field.
fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    varint(out, (u64::from(field) << 3) | 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn msg(out: &mut Vec<u8>, field: u32, m: &[u8]) {
    bytes(out, field, m);
}

/// A packed repeated varint field (left out when empty).
fn packed(out: &mut Vec<u8>, field: u32, vals: impl Iterator<Item = u64>) {
    let mut b = Vec::new();
    for v in vals {
        varint(&mut b, v);
    }
    if !b.is_empty() {
        bytes(out, field, &b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile written and read again is the same profile.
    #[test]
    fn a_written_profile_reads_back_the_same() {
        let data = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/pprof/large.cpu.pb.gz"
        ))
        .unwrap();
        let p = crate::parse(&data, "large.cpu.pb.gz").unwrap();
        let mut out = Vec::new();
        write_gz(&p, &mut out).unwrap();
        let q = crate::parse(&out, "written.pb.gz").unwrap();
        assert_eq!(p.sample_types, q.sample_types);
        assert_eq!(p.samples.len(), q.samples.len());
        assert_eq!(p.mappings, q.mappings);
        assert_eq!(p.comments, q.comments);
        assert_eq!((p.period, &p.period_type), (q.period, &q.period_type));
        assert_eq!(
            (p.time_nanos, p.duration_nanos),
            (q.time_nanos, q.duration_nanos)
        );
        for (a, b) in p.samples.iter().zip(&q.samples) {
            assert_eq!(p.values(a), q.values(b));
            assert_eq!(p.labels(a), q.labels(b));
            let names = |p: &Profile, s| -> Vec<String> {
                p.stack(s)
                    .flat_map(|l| {
                        let loc = &p.locations[l as usize];
                        p.lines(loc)
                            .iter()
                            .map(|line| p.str(p.functions[line.function as usize].name).to_string())
                            .collect::<Vec<_>>()
                    })
                    .collect()
            };
            assert_eq!(names(&p, a), names(&q, b));
        }
    }
}
