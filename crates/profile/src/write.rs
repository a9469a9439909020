//! Writing a [`Profile`] as profile.proto (what `record --merge` writes, for `go tool
//! pprof` and every reader of pprof files): the pooled model turned into `tickscope_pprof`'s
//! write model, strings copied out of the pool and indices turned into ids, and written by
//! its writer, the one the sampler's profiles are written by too.

use std::io::Write;

// The write model, named apart from this crate's model of the same names.
use tickscope_pprof as pb;

use crate::model::{Label, Profile, ValueType};

/// The profile as a gzipped profile.proto, written to `w` (stored gzip blocks up to 32 KiB
/// encoded, deflated above: [`tickscope_pprof::write_gz`]).
pub fn write_gz(p: &Profile, w: impl Write) -> std::io::Result<()> {
    pb::write_gz(&to_pprof(p), w)
}

/// The profile as profile.proto's bytes (not compressed).
pub fn encode(p: &Profile) -> Vec<u8> {
    pb::encode(&to_pprof(p))
}

/// `p` as the write model: every record it holds, in its order, with its id.
fn to_pprof(p: &Profile) -> pb::Profile {
    let value_type = |t: &ValueType| pb::ValueType::new(&t.ty, &t.unit);
    let samples = p.samples.iter().map(|s| pb::Sample {
        // The stack holds location indices, leaf first.
        location_ids: p.stack(s).map(|l| p.locations[l as usize].id).collect(),
        values: p.values(s).to_vec(),
        labels: p.labels(s).iter().map(label).collect(),
    });
    let mappings = p.mappings.iter().map(|m| pb::Mapping {
        id: m.id,
        start: m.start,
        limit: m.limit,
        offset: m.offset,
        file: m.file.clone(),
        build_id: m.build_id.clone(),
        has_functions: m.has_functions,
        has_filenames: m.has_filenames,
        has_line_numbers: m.has_line_numbers,
        has_inline_frames: m.has_inline_frames,
    });
    let locations = p.locations.iter().map(|l| pb::Location {
        id: l.id,
        mapping_id: l.mapping.map_or(0, |m| p.mappings[m as usize].id),
        address: l.address,
        lines: p
            .lines(l)
            .iter()
            .map(|line| pb::Line {
                function_id: p.function(line).id,
                line: line.line,
            })
            .collect(),
        is_folded: l.is_folded,
    });
    let functions = p.functions.iter().map(|f| pb::Function {
        id: f.id,
        name: p.str(f.name).to_string(),
        system_name: p.str(f.system_name).to_string(),
        filename: p.str(f.filename).to_string(),
        start_line: f.start_line,
    });
    // The pooled model keeps an absent period type as an empty one.
    let period_type = &p.period_type;
    let has_period_type = !period_type.ty.is_empty() || !period_type.unit.is_empty();
    pb::Profile {
        sample_types: p.sample_types.iter().map(value_type).collect(),
        samples: samples.collect(),
        mappings: mappings.collect(),
        locations: locations.collect(),
        functions: functions.collect(),
        drop_frames: p.drop_frames.clone(),
        keep_frames: p.keep_frames.clone(),
        time_nanos: p.time_nanos,
        duration_nanos: p.duration_nanos,
        period_type: has_period_type.then(|| value_type(period_type)),
        period: p.period,
        comments: p.comments.clone(),
        default_sample_type: p.default_sample_type.clone(),
    }
}

fn label(l: &Label) -> pb::Label {
    match l {
        Label::Str { key, value } => pb::Label::str(key, value),
        Label::Num { key, value, unit } => pb::Label::num(key, *value, unit),
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

    /// The fields only the tools write (the sampler never sets them) reach the file: a
    /// profile's `drop_frames` and `keep_frames` and a location's `is_folded` read back as set.
    #[test]
    fn drop_frames_keep_frames_and_folded_locations_are_written() {
        let mut p = crate::testutil::build(&[("main;parse;tokenize", 3), ("main;run", 2)]);
        p.drop_frames = "^runtime\\.".into();
        p.keep_frames = "^runtime\\.main$".into();
        p.locations[1].is_folded = true;
        let mut out = Vec::new();
        write_gz(&p, &mut out).unwrap();
        let q = crate::parse(&out, "written.pb.gz").unwrap();
        assert_eq!(q.drop_frames, "^runtime\\.");
        assert_eq!(q.keep_frames, "^runtime\\.main$");
        let folded: Vec<u64> = q
            .locations
            .iter()
            .filter(|l| l.is_folded)
            .map(|l| l.id)
            .collect();
        assert_eq!(folded, [p.locations[1].id]);
        assert_eq!(crate::testutil::stacks(&q), crate::testutil::stacks(&p));
    }
}
