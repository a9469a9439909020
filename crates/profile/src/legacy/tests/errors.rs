//! Bad input: truncated records, absurd counts, sums past i64, wrong headers, malformed
//! lines; Go's number syntax and CRLF lines; every prefix of every test profile parsed or
//! refused cleanly.

use super::*;

fn error_text(data: &[u8]) -> String {
    match parse(data) {
        Some(Err(e)) => e.to_string(),
        Some(Ok(_)) => panic!("parsed"),
        None => panic!("not recognised"),
    }
}

#[test]
fn truncated_cpu_profile_is_an_error_naming_the_record() {
    let data = read("cppbench.cpu");
    // Header (5 words) and the first record's count, depth and 3 of its 11 frames.
    let cut = &data[..5 * 8 + 2 * 8 + 3 * 8];
    let e = error_text(cut);
    assert!(e.contains("gperftools CPU") && e.contains("byte 48"), "{e}");
    assert!(
        e.contains("claims 11 frames but only 3 words remain"),
        "{e}"
    );
    // Cut inside a record's count.
    let e = error_text(&data[..5 * 8 + 5]);
    assert!(e.contains("record cut off") && e.contains("byte 40"), "{e}");
}

#[test]
fn cpu_record_claiming_2_pow_40_frames_is_an_error() {
    let mut data = Vec::new();
    for w in [0u64, 3, 0, 10_000, 0, 1, 1 << 40, 0x1234, 0x5678] {
        data.extend_from_slice(&w.to_le_bytes());
    }
    let e = error_text(&data);
    assert!(
        e.contains("claims 1099511627776 frames but only 2 words remain"),
        "{e}"
    );
}

/// Sample values whose sum passes i64 (each fits) would wrap in every view's totals: a
/// fuzzed file printed -1519204 hours. Refused with one line; the largest that fits is read.
#[test]
fn values_that_add_up_past_i64_are_an_error() {
    // Period 10 ms; each record 2^38 counts, 2.7e18 ns of CPU: three fit, four do not.
    let profile = |records: usize| {
        let mut words = vec![0u64, 3, 0, 10_000, 0];
        for r in 0..records {
            words.extend([1 << 38, 1, 0x1000 + r as u64]);
        }
        words.extend([0, 1, 0]);
        words
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect::<Vec<u8>>()
    };
    // What every reader's caller (`load`, `parse_format`) checks before returning.
    let checked = |n: usize| match parse(&profile(n)) {
        Some(Ok(p)) => p.check().map_err(|e| e.to_string()),
        other => panic!("{n} records: {other:?}"),
    };
    let e = checked(4).unwrap_err();
    assert!(
        e.contains("cpu/nanoseconds values of the samples add up to more than 2^63 - 1")
            && !e.contains('\n'),
        "{e}"
    );
    checked(3).unwrap();
}

#[test]
fn wrong_headers_are_errors_saying_what_is_wrong() {
    let mut data = Vec::new();
    for w in [0u32, 3, 0, 0, 0, 1, 1, 0x1234] {
        data.extend_from_slice(&w.to_be_bytes());
    }
    let e = error_text(&data);
    assert!(e.contains("sampling period (header word 4) is 0"), "{e}");

    let e = error_text(b"heap profile: 1: 2 [3: 4] @ heap_v9/512\n1: 2 [3: 4] @ 0x1\n");
    assert!(e.contains("line 1") && e.contains("heap_v9"), "{e}");

    // Go's pprof says "unrecognized": not this reader's to claim.
    assert!(parse(b"hello\nworld\n").is_none());
    assert!(parse(b"main;foo 3\n").is_none());
}

#[test]
fn malformed_text_lines_are_errors_naming_the_line() {
    let data = read("cppbench.heap");
    let text = String::from_utf8(data).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "     1: nine [     1:     9216] @ 0xc635c8";
    let e = error_text(lines.join("\n").as_bytes());
    assert!(e.contains("heap profile at line 3"), "{e}");
    lines[2] = "     0:     9216 [     1:     9216] @ 0xc635c8";
    let e = error_text(lines.join("\n").as_bytes());
    assert!(
        e.contains("line 3") && e.contains("inuse count was 0 but inuse bytes was 9216"),
        "{e}"
    );
    lines[2] = "     1:     9216 [     1:     9216] @ 0x1c635c8aaaaaaaaaaa";
    let e = error_text(lines.join("\n").as_bytes());
    assert!(e.contains("line 3") && e.contains("over 64 bits"), "{e}");

    let e = error_text(b"threadcreate profile: total 1\n1 @ 0x1\nnonsense\n");
    assert!(e.contains("Go count profile at line 3"), "{e}");

    let e = error_text(b"--- contentionz 1 ---\ncycles/second = 100\n10 1 @ 0x1\nbad line\n");
    assert!(e.contains("contention profile at line 4"), "{e}");

    let e = error_text(
        b"--- contentionz 1 ---\nformat = java\nresolution = microseconds\nsampling period = x\n",
    );
    assert!(e.contains("line 4") && e.contains("sampling period"), "{e}");
}

#[test]
fn crlf_lines_and_go_number_syntax() {
    let p = parse(b"goroutine profile: total 10\r\n010 @ 0x11 0x21\r\n0x5 @ 0x11\r\n");
    // "010" is octal for Go's ParseInt(s, 0, 64)...
    let err = p.unwrap();
    // ...and "0x5" does not match the sample line's `\d+ @` at all: pprof fails.
    assert!(err.is_err());
    let p = parse(b"goroutine profile: total 10\r\n010 @ 0x11 0x21\r\n")
        .unwrap()
        .unwrap();
    assert_eq!(p.values(&p.samples[0]), [8]);
    assert_eq!(crate::legacy::scan::go_parse_int("1_000", 0), Some(1000));
    assert_eq!(crate::legacy::scan::go_parse_int("1__0", 0), None);
    assert_eq!(crate::legacy::scan::go_parse_int("0x_1f", 0), Some(31));
    assert_eq!(crate::legacy::scan::go_parse_int("09", 0), None);
    assert_eq!(
        crate::legacy::scan::go_parse_int("-9223372036854775808", 10),
        Some(i64::MIN)
    );
    assert_eq!(
        crate::legacy::scan::go_parse_int("9223372036854775808", 10),
        None
    );
    assert_eq!(
        crate::legacy::scan::go_parse_uint("ffffffffffffffff", 16),
        Some(u64::MAX)
    );
    assert_eq!(
        crate::legacy::scan::go_parse_uint("10000000000000000", 16),
        None
    );
    assert_eq!(crate::legacy::scan::go_f64_to_i64(f64::NAN), i64::MIN);
    assert_eq!(crate::legacy::scan::go_f64_to_i64(1e19), i64::MIN);
    assert_eq!(crate::legacy::scan::go_f64_to_i64(-2.9), -2);
}

/// Every prefix of a test profile parses or fails cleanly (no panic: debug builds check
/// arithmetic overflow too). One test per file, so that the harness spreads them over cores.
fn check_every_prefix(name: &str) {
    let data = read(name);
    for n in 0..=data.len() {
        if let Some(Ok(p)) = parse(&data[..n]) {
            p.check().unwrap_or_else(|e| panic!("{name}[..{n}]: {e}"));
        }
    }
}

macro_rules! every_prefix {
    ($($test:ident: $file:literal,)*) => {
        $(
            #[test]
            fn $test() {
                check_every_prefix($file);
            }
        )*

        #[test]
        fn every_test_profile_has_a_prefix_test() {
            let mut covered = [$($file),*];
            covered.sort_unstable();
            let mut all: Vec<&str> = EXPECTED.iter().map(|e| e.name).collect();
            all.sort_unstable();
            assert_eq!(covered[..], all[..]);
        }
    };
}

every_prefix! {
    every_prefix_of_cppbench_contention: "cppbench.contention",
    every_prefix_of_cppbench_cpu: "cppbench.cpu",
    every_prefix_of_cppbench_growth: "cppbench.growth",
    every_prefix_of_cppbench_heap: "cppbench.heap",
    every_prefix_of_go_crc32_cpu: "go.crc32.cpu",
    every_prefix_of_go_godoc_thread: "go.godoc.thread",
    every_prefix_of_gobench_cpu: "gobench.cpu",
    every_prefix_of_gobench_heap: "gobench.heap",
    every_prefix_of_java_contention: "java.contention",
    every_prefix_of_java_cpu: "java.cpu",
    every_prefix_of_java_heap: "java.heap",
}
