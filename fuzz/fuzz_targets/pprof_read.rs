//! Arbitrary bytes into the pprof protobuf reader, raw and gzip-wrapped (through the loader,
//! with a 16 MiB decompression cap): no panic, no allocation beyond the input's size, and a
//! profile that parses renders in every view. Determinism: parsing twice gives the same
//! profile.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use tickscope_profile::{parse_format, parse_with_limit, Format};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    if let Some(Ok(p)) = parse_format(data, Format::Pprof) {
        let again = parse_format(data, Format::Pprof).unwrap().unwrap();
        assert_eq!(p, again);
        common::exercise(&p);
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    let gz = gz.finish().unwrap();
    if let Err(e) = parse_with_limit(&gz, "fuzz.pb.gz", 16 << 20) {
        assert!(!e.to_string().contains('\n'));
    }
});
