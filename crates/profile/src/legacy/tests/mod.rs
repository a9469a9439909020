//! Tests of the legacy readers against the profiles in tests/data/pprof/legacy and
//! what Go 1.19's pprof makes of them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::parse;
use crate::{Format, Label, Profile};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/pprof/legacy")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(testdata().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn load(name: &str) -> Profile {
    match parse(&read(name)) {
        Some(Ok(p)) => p,
        Some(Err(e)) => panic!("{name}: {e}"),
        None => panic!("{name}: not recognised"),
    }
}

/// The profile in the form of the Go program used to check this reader (pprof's
/// profile.Parse, then every field printed), for diffing against Go.
fn dump(p: &Profile) -> String {
    let mut o = String::new();
    o.push_str("types:");
    for t in &p.sample_types {
        let _ = write!(o, " {}/{}", t.ty, t.unit);
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "default: {}", p.default_sample_type);
    let _ = writeln!(
        o,
        "period: {}/{} {}",
        p.period_type.ty, p.period_type.unit, p.period
    );
    let _ = writeln!(o, "duration: {} time: {}", p.duration_nanos, p.time_nanos);
    let _ = writeln!(o, "drop: {}\nkeep: {}", p.drop_frames, p.keep_frames);
    for (i, m) in p.mappings.iter().enumerate() {
        let _ = writeln!(
            o,
            "mapping {i}: id={} {:#x}-{:#x} off={:#x} file={:?} build={:?} fn={}",
            m.id, m.start, m.limit, m.offset, m.file, m.build_id, m.has_functions
        );
    }
    for (i, f) in p.functions.iter().enumerate() {
        let _ = writeln!(
            o,
            "function {i}: id={} name={:?} sys={:?} file={:?} start={}",
            f.id,
            p.str(f.name),
            p.str(f.system_name),
            p.str(f.filename),
            f.start_line
        );
    }
    for (i, l) in p.locations.iter().enumerate() {
        let m = l.mapping.map_or(-1, i64::from);
        let _ = write!(
            o,
            "location {i}: id={} m={m} addr={:#x} lines=[",
            l.id, l.address
        );
        for line in p.lines(l) {
            let _ = write!(o, " {}:{}", line.function, line.line);
        }
        let _ = writeln!(o, " ]");
    }
    for s in &p.samples {
        o.push_str("sample: locs=[");
        for l in p.stack(s) {
            let _ = write!(o, " {l}");
        }
        o.push_str(" ] values=[");
        for v in p.values(s) {
            let _ = write!(o, " {v}");
        }
        o.push_str(" ] labels=[");
        for l in p.labels(s) {
            match l {
                Label::Str { key, value } => {
                    let _ = write!(o, " {key}={value:?}");
                }
                Label::Num { key, value, .. } => {
                    let _ = write!(o, " {key}={value}");
                }
            }
        }
        o.push_str(" ]\n");
    }
    let _ = writeln!(
        o,
        "counts: samples={} locations={} functions={} mappings={}",
        p.samples.len(),
        p.locations.len(),
        p.functions.len(),
        p.mappings.len()
    );
    o
}

/// Every legacy test profile parses to exactly what Go 1.19's pprof `profile.Parse` makes of
/// it: every field of the result, printed by `dump`, against the same print from a Go program
/// over the vendored pprof package (kept in tests/data/legacy-go/NAME.txt).
#[test]
fn every_legacy_file_parses_to_what_go_profile_parse_gives() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/legacy-go");
    let mut compared = 0;
    for e in std::fs::read_dir(testdata()).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".txt") {
            continue;
        }
        let p = load(&name);
        let want = std::fs::read_to_string(golden.join(format!("{name}.txt"))).unwrap();
        assert_eq!(dump(&p), want, "{name}: differs from Go's profile.Parse");
        compared += 1;
    }
    assert_eq!(compared, 11);
}

/// What Go 1.19's pprof makes of a test profile.
struct Expected {
    name: &'static str,
    /// The sample types, `type/unit`.
    types: &'static [&'static str],
    /// `type/unit` of the period, and the period.
    period: (&'static str, i64),
    duration_nanos: i64,
    /// Samples and locations as pprof's profile.Parse returns them (checked with a Go program
    /// printing profile.Parse's result, which our `dump` reproduces line for line).
    samples: usize,
    locations: usize,
    /// Samples and locations `go tool pprof -raw FILE` lists: the profile after pprof's
    /// Merge, which adds up samples with the same stack and labels and folds locations
    /// with the same mapping, address and lines (checked with go tool pprof -raw).
    raw_samples: usize,
    raw_locations: usize,
}

const EXPECTED: &[Expected] = &[
    Expected {
        name: "cppbench.contention",
        types: &["contentions/count", "delay/nanoseconds"],
        period: ("contentions/count", 100),
        duration_nanos: 16_502_830_000_000,
        samples: 6,
        locations: 40,
        raw_samples: 6,
        raw_locations: 40,
    },
    Expected {
        name: "cppbench.cpu",
        types: &["samples/count", "cpu/nanoseconds"],
        period: ("cpu/nanoseconds", 10_000_000),
        duration_nanos: 0,
        samples: 52,
        locations: 109,
        raw_samples: 50,
        raw_locations: 109,
    },
    Expected {
        name: "cppbench.growth",
        types: &["objects/count", "space/bytes"],
        period: ("space/bytes", 1),
        duration_nanos: 0,
        samples: 85,
        locations: 60,
        raw_samples: 6,
        raw_locations: 60,
    },
    Expected {
        name: "cppbench.heap",
        types: &["objects/count", "space/bytes"],
        period: ("space/bytes", 524_288),
        duration_nanos: 0,
        samples: 31,
        locations: 157,
        raw_samples: 31,
        raw_locations: 157,
    },
    Expected {
        name: "go.crc32.cpu",
        types: &["samples/count", "cpu/nanoseconds"],
        period: ("cpu/nanoseconds", 10_000_000),
        duration_nanos: 0,
        samples: 69,
        locations: 11,
        raw_samples: 7,
        raw_locations: 11,
    },
    Expected {
        name: "go.godoc.thread",
        types: &["threadcreate/count"],
        period: ("threadcreate/count", 1),
        duration_nanos: 0,
        samples: 7,
        locations: 23,
        raw_samples: 7,
        raw_locations: 23,
    },
    Expected {
        name: "gobench.cpu",
        types: &["samples/count", "cpu/nanoseconds"],
        period: ("cpu/nanoseconds", 10_000_000),
        duration_nanos: 0,
        samples: 206,
        locations: 202,
        raw_samples: 153,
        raw_locations: 202,
    },
    Expected {
        name: "gobench.heap",
        types: &[
            "alloc_objects/count",
            "alloc_space/bytes",
            "inuse_objects/count",
            "inuse_space/bytes",
        ],
        period: ("space/bytes", 524_288),
        duration_nanos: 0,
        samples: 15,
        locations: 100,
        // -raw lists 14: it leaves out the one sample without a stack (`1: 288 [2: 296] @`),
        // which Merge keeps and whose value the .top.txt total includes.
        raw_samples: 15,
        raw_locations: 100,
    },
    Expected {
        name: "java.contention",
        types: &["contentions/count", "delay/microseconds"],
        period: ("contentions/count", 100),
        duration_nanos: 6_019_923_000_000,
        samples: 4,
        locations: 32,
        raw_samples: 3,
        raw_locations: 32,
    },
    Expected {
        name: "java.cpu",
        types: &["samples/count", "cpu/nanoseconds"],
        period: ("cpu/nanoseconds", 10_000_000),
        duration_nanos: 0,
        samples: 8,
        locations: 64,
        raw_samples: 6,
        raw_locations: 62,
    },
    Expected {
        name: "java.heap",
        types: &["inuse_objects/count", "inuse_space/bytes"],
        period: ("/", 0),
        duration_nanos: 0,
        samples: 7,
        locations: 119,
        raw_samples: 7,
        raw_locations: 119,
    },
];

/// Samples and locations left after pprof's Merge of the profile alone: samples with the
/// same locations and labels added up (all-zero ones dropped), locations with the same
/// mapping, mapping-relative address and lines folded.
fn merged_counts(p: &Profile) -> (usize, usize) {
    use std::collections::HashMap;
    type LocationKey = (Option<u32>, u64, Vec<(u32, i64)>);
    let mut location_keys: HashMap<LocationKey, usize> = HashMap::new();
    let mut key_of = |i: u32| {
        let l = &p.locations[i as usize];
        let start = l.mapping.map_or(0, |m| p.mappings[m as usize].start);
        let lines = p.lines(l).iter().map(|x| (x.function, x.line)).collect();
        let next = location_keys.len();
        *location_keys
            .entry((l.mapping, l.address.wrapping_sub(start), lines))
            .or_insert(next)
    };
    let mut samples = std::collections::HashSet::new();
    for s in &p.samples {
        if p.values(s).iter().all(|&v| v == 0) {
            continue;
        }
        let locations: Vec<usize> = p.stack(s).map(&mut key_of).collect();
        samples.insert((locations, format!("{:?}", p.labels(s))));
    }
    (samples.len(), location_keys.len())
}

/// The total a .top.txt reports ("... of 7.12s total"), in `unit`, and how far off the
/// printed precision allows.
fn top_total(name: &str, unit: &str) -> (f64, f64) {
    let text = std::fs::read_to_string(testdata().join(format!("{name}.top.txt"))).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("Showing nodes accounting for"))
        .unwrap();
    let total = line
        .split(" of ")
        .nth(1)
        .unwrap()
        .trim_end_matches(" total");
    let split = total
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(total.len());
    let (number, suffix) = total.split_at(split);
    let number: f64 = number.parse().unwrap();
    // The suffix in nanoseconds or bytes, and the sample unit likewise.
    let scale = |s: &str| match s {
        "" | "ns" | "B" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "kB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        other => panic!("{name}: unit {other}"),
    };
    let base = match unit {
        "nanoseconds" | "bytes" | "count" => 1.0,
        "microseconds" => 1e3,
        other => panic!("{name}: sample unit {other}"),
    };
    let s = scale(suffix) / base;
    // pprof prints at most two decimals.
    (number * s, 0.005 * s + 1e-9)
}

/// "Duration: 4.58hrs, ..." in a .top.txt, in hours.
fn top_duration_hours(name: &str) -> Option<f64> {
    let text = std::fs::read_to_string(testdata().join(format!("{name}.top.txt"))).unwrap();
    let line = text.lines().find(|l| l.starts_with("Duration: "))?;
    let value = line["Duration: ".len()..].split(',').next()?;
    Some(value.strip_suffix("hrs")?.parse().unwrap())
}

#[test]
fn every_test_profile_parses_as_pprof_parses_it() {
    let mut names: Vec<String> = std::fs::read_dir(testdata())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".txt"))
        .collect();
    names.sort();
    let mut expected: Vec<&str> = EXPECTED.iter().map(|e| e.name).collect();
    expected.sort();
    assert_eq!(names, expected, "a test profile without expectations");
    for e in EXPECTED {
        let p = load(e.name);
        let name = e.name;
        let types: Vec<String> = p
            .sample_types
            .iter()
            .map(|t| format!("{}/{}", t.ty, t.unit))
            .collect();
        assert_eq!(types, e.types, "{name}: sample types");
        let period_type = format!("{}/{}", p.period_type.ty, p.period_type.unit);
        assert_eq!((period_type.as_str(), p.period), e.period, "{name}: period");
        assert_eq!(p.duration_nanos, e.duration_nanos, "{name}: duration");
        assert_eq!(p.samples.len(), e.samples, "{name}: samples");
        assert_eq!(p.locations.len(), e.locations, "{name}: locations");
        assert_eq!(
            merged_counts(&p),
            (e.raw_samples, e.raw_locations),
            "{name}: samples and locations after merging"
        );
        p.check().unwrap();
        let expected_format = if name.ends_with(".cpu") && name != "java.cpu" {
            Format::GperftoolsCpu
        } else {
            Format::LegacyText
        };
        assert_eq!(p.format, expected_format, "{name}: format");

        let index = p.default_sample_index();
        let sum: i64 = p.samples.iter().map(|s| p.values(s)[index]).sum();
        let (want, tolerance) = top_total(name, &p.sample_types[index].unit);
        assert!(
            (sum as f64 - want).abs() <= tolerance,
            "{name}: total {sum}, .top.txt says {want} (± {tolerance})"
        );
        if let Some(hours) = top_duration_hours(name) {
            let ours = p.duration_nanos as f64 / 3.6e12;
            assert!(
                (ours - hours).abs() <= 0.005,
                "{name}: duration {ours}h, .top.txt {hours}h"
            );
        }

        // The loader reads it the same way (protobuf decoding does not take it).
        let loaded = crate::parse(&read(name), name).unwrap();
        assert_eq!(loaded, p, "{name}: through the loader");
    }
}

#[test]
fn ids_are_one_based_and_references_resolve() {
    for e in EXPECTED {
        let p = load(e.name);
        for (i, l) in p.locations.iter().enumerate() {
            assert_eq!(l.id, i as u64 + 1);
        }
        for (i, f) in p.functions.iter().enumerate() {
            assert_eq!(f.id, i as u64 + 1);
        }
        for (i, m) in p.mappings.iter().enumerate() {
            assert_eq!(m.id, i as u64 + 1);
        }
    }
}

#[test]
fn cpu_profile_details_match_pprof() {
    let p = load("cppbench.cpu");
    // pprof's -raw: the first sample is 2 samples of 1 2 3 ... with 1 = 0x42ef04 (the leaf,
    // not adjusted) and 2 = 0x42e14b (a caller, moved back by one); the signal handler's
    // frame (0x7f5e5414e5b0) is gone.
    let s = &p.samples[0];
    let addresses: Vec<u64> = p
        .stack(s)
        .take(2)
        .map(|l| p.locations[l as usize].address)
        .collect();
    assert_eq!(addresses, [0x42ef04, 0x42e14b]);
    assert_eq!(p.values(s), [1, 10_000_000]);
    assert!(p
        .locations
        .iter()
        .all(|l| l.address != 0x7f5e5414e5af && l.address != 0x7f5e5414e5b0));
    // Mappings: the executable ones of /proc/self/maps, the main binary first.
    assert_eq!(p.mappings.len(), 12);
    assert_eq!(p.mappings[0].file, "cppbench_server_main");
    assert_eq!(
        (p.mappings[0].start, p.mappings[0].limit),
        (0x400000, 0xfcb000)
    );
    assert_eq!(p.mappings[6].file, "/lib/libpthread-2.15.so");
    assert!(p.locations.iter().all(|l| l.mapping.is_some()));
    assert!(p.drop_frames.starts_with("ProfileData::Add|"));
}

#[test]
fn heap_values_are_unsampled_as_pprof_does() {
    let p = load("gobench.heap");
    // `1: 524288 [3: 1572864] @ ...` with heap/1048576 (rate 524288): pprof's -raw shows
    // 4 2488234 1 829411 and the block size label 524288.
    let s = &p.samples[0];
    assert_eq!(p.values(s), [4, 2_488_234, 1, 829_411]);
    assert_eq!(
        p.labels(s),
        [Label::Num {
            key: "bytes".into(),
            value: 524_288,
            unit: String::new()
        }]
    );
    assert!(p.keep_frames.starts_with(r"runtime\.panic"));
}

#[test]
fn java_profiles_name_their_frames() {
    let p = load("java.contention");
    let top = &p.samples[1];
    let leaf = &p.locations[p.stack(top).next().unwrap() as usize];
    assert_eq!(leaf.address, 0);
    let f = p.function(&p.lines(leaf)[0]);
    assert_eq!(p.str(f.name), "com.example.function0d");
    assert_eq!(p.str(f.filename), "source.java");
    // "1 1 @" times the sampling period 100.
    assert_eq!(p.values(&p.samples[0]), [100, 100]);
    let p = load("java.cpu");
    assert!(p.functions.iter().any(|f| p.str(f.name) == "VM"));
}

/// A threadz dump (no such file among the test profiles): checked with Go's pprof, which
/// gives these samples, addresses and mappings.
#[test]
fn threadz_dump() {
    let text = "--- threadz 1 ---\n\n\
        --- Thread 7f794ab90940 (name: main/14748) stack: ---\n\
        \x20 PC: 0x00bc8f1c: helper(arg *)\n\
        \x20 0x0040be31: main\n\
        \x20 0x7f794964e7ec: __libc_start_main\n\
        --- Thread 7f794964b700 (name: thread1/14751) stack: ---\n\
        \x20 PC: 0x00bc8f1d: helper(arg *)\n\
        \x20 0x00bc8f1e\n\
        \x20 0x0040be32: main\n\
        --- Thread 7f794964b701 (name: thread2/14752) stack: ---\n\
        \x20 same as previous thread\n\
        --- Memory map: ---\n\
        \x20 00400000-00fcb000: cppbench_server_main\n\
        \x20 7f7949600000-7f7949700000: /lib/libc-2.15.so\n";
    let p = parse(text.as_bytes()).unwrap().unwrap();
    type Stack = (Vec<(u64, Option<u32>)>, Vec<i64>);
    let stacks: Vec<Stack> = p
        .samples
        .iter()
        .map(|s| {
            let locs = p
                .stack(s)
                .map(|l| {
                    (
                        p.locations[l as usize].address,
                        p.locations[l as usize].mapping,
                    )
                })
                .collect();
            (locs, p.values(s).to_vec())
        })
        .collect();
    assert_eq!(
        stacks,
        [
            (
                vec![
                    (0xbc8f1c, Some(0)),
                    (0x40be30, Some(0)),
                    (0x7f794964e7eb, Some(1))
                ],
                vec![1]
            ),
            (
                vec![
                    (0xbc8f1d, Some(0)),
                    (0xbc8f1d, Some(0)),
                    (0x40be31, Some(0))
                ],
                vec![2]
            ),
        ]
    );
    assert_eq!(p.locations.len(), 5);
    assert_eq!(p.sample_types[0].ty, "thread");
}

/// Memory-map details (checked with Go's pprof): `name=value` substitutions, brief entries
/// with `(@offset)` and build ids, the 0x400000 fix-up of the main binary, a mapping growing
/// down over its offset to take an address just below it.
#[test]
fn memory_map_details() {
    let text = "goroutine profile: total 4\n\
        3 @ 0x401001 0x7f0000000801\n\
        1 @ 0x3001 0x401001\n\
        --- Memory map: ---\n\
        lib=/lib/libc.so.6\n\
        0x401000-0x500000 r-xp 00001000 08:01 7 /usr/bin/prog\n\
        0x7f0000000000-0x7f0000100000: $lib (@0) 00ab\n\
        0x5000-0x6000 r-xp 00004000 00:00 0 /grows\n";
    let p = parse(text.as_bytes()).unwrap().unwrap();
    let maps: Vec<(u64, u64, u64, &str, &str)> = p
        .mappings
        .iter()
        .map(|m| {
            (
                m.start,
                m.limit,
                m.offset,
                m.file.as_str(),
                m.build_id.as_str(),
            )
        })
        .collect();
    assert_eq!(
        maps,
        [
            (0x400000, 0x500000, 0, "/usr/bin/prog", ""),
            (0x7f0000000000, 0x7f0000100000, 0, "/lib/libc.so.6", "00ab"),
            (0x1000, 0x6000, 0, "/grows", ""),
        ]
    );
    let locations: Vec<(u64, Option<u32>)> =
        p.locations.iter().map(|l| (l.address, l.mapping)).collect();
    assert_eq!(
        locations,
        [
            (0x401000, Some(0)),
            (0x7f0000000800, Some(1)),
            (0x3000, Some(2))
        ]
    );
}

mod errors;
