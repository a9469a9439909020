//! Arbitrary bytes into the legacy readers (gperftools binary CPU, the heap, growth,
//! contention, Go count and Java text formats): no panic, no allocation from a claimed count,
//! one-line errors, and a profile that parses renders in every view. The corpus is best seeded
//! with tests/data/pprof/legacy/*.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickscope_profile::{parse_format, Format};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    match parse_format(data, Format::LegacyText) {
        Some(Ok(p)) => common::exercise(&p),
        Some(Err(e)) => assert!(!e.to_string().contains('\n')),
        None => {}
    }
});
