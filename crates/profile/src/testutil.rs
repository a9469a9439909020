//! Test builders shared by the filters', prune's and the views' tests: profiles written as
//! folded stacks.

use std::collections::HashMap;

use crate::model::{Label, Line, Profile, ValueType};

/// A profile from stacks written root first, `main;parse;tokenize`, each with a value and
/// labels. A frame `a|b` is one location with inlined lines, `a` calling `b`. Every
/// distinct frame is one location (ids from 1), every distinct name one function.
pub(crate) fn build_labeled(stacks: &[(&str, i64, Vec<Label>)]) -> Profile {
    let mut p = Profile {
        sample_types: vec![ValueType::new("samples", "count")],
        ..Profile::default()
    };
    let mut functions: HashMap<String, u32> = HashMap::new();
    let mut locations: HashMap<String, u32> = HashMap::new();
    for (stack, value, labels) in stacks {
        let mut locs = Vec::new();
        for frame in stack.split(';').filter(|f| !f.is_empty()).rev() {
            if let Some(&loc) = locations.get(frame) {
                locs.push(loc);
                continue;
            }
            let mut lines = Vec::new();
            for name in frame.split('|').rev() {
                let f = match functions.get(name) {
                    Some(&f) => f,
                    None => {
                        let id = p.functions.len() as u64 + 1;
                        let f = p.push_function(id, name, "", "", 0);
                        functions.insert(name.to_string(), f);
                        f
                    }
                };
                lines.push(Line {
                    function: f,
                    line: 0,
                });
            }
            let id = p.locations.len() as u64 + 1;
            let loc = p.push_location(id, None, 0, &lines, false);
            locations.insert(frame.to_string(), loc);
            locs.push(loc);
        }
        p.push_sample(locs.iter().copied(), &[*value], labels);
    }
    p.check().unwrap();
    p
}

/// [`build_labeled`] without labels.
pub(crate) fn build(stacks: &[(&str, i64)]) -> Profile {
    let stacks: Vec<_> = stacks.iter().map(|&(s, v)| (s, v, vec![])).collect();
    build_labeled(&stacks)
}

/// The samples as `build` writes them, root first; checks the profile first.
pub(crate) fn stacks(p: &Profile) -> Vec<(String, i64)> {
    p.check().unwrap();
    p.samples
        .iter()
        .map(|s| {
            let frames: Vec<String> = p
                .stack(s)
                .rev()
                .map(|l| {
                    let lines: Vec<&str> = p
                        .lines(&p.locations[l as usize])
                        .iter()
                        .rev()
                        .map(|l| p.function_name(l))
                        .collect();
                    lines.join("|")
                })
                .collect();
            (frames.join(";"), p.values(s)[0])
        })
        .collect()
}
