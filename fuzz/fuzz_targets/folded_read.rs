//! Arbitrary bytes into the folded-stacks reader. Round trip: a profile that parses, written
//! back as folded stacks by the flame view and read again, gives the same stacks and counts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickscope_profile::{parse_format, Format};
use tickscope_profile::views::{flame_folded, Options, Report, View};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some(Ok(p)) = parse_format(data, Format::Folded) else {
        return;
    };
    common::exercise(&p);
    let Ok(r) = Report::new(p, View::Flame, &Options::default()) else {
        return;
    };
    let first = flame_folded(&r, false);
    let text: String = first.iter().map(|(s, v)| format!("{s} {v}\n")).collect();
    if text.is_empty() {
        return;
    }
    let q = parse_format(text.as_bytes(), Format::Folded)
        .expect("our folded output is folded")
        .expect("our folded output parses");
    let r2 = Report::new(q, View::Flame, &Options::default()).unwrap();
    assert_eq!(flame_folded(&r2, false), first);
});
