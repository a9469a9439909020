//! Folded stacks, as Brendan Gregg's `stackcollapse` scripts, inferno and `tickscope convert
//! --to folded` write them: one line per distinct stack, frames root first separated by `;`,
//! then a space and a count:
//!
//! ```text
//! main;parse;tokenize 42
//! main;alloc 7
//! ```
//!
//! The profile has one sample type, `samples`/`count`, one function and one location per
//! distinct frame name. Blank lines are skipped. The data is taken for folded stacks only when
//! its first non-blank line has that shape; a later line without it is an error naming the
//! line.

use std::collections::HashMap;

use crate::error::ErrorKind;
use crate::model::{Format, Line, Profile, ValueType};

/// Parses folded stacks; `None` when the first line is not one.
pub(super) fn parse(data: &[u8]) -> Option<Result<Profile, ErrorKind>> {
    let text = std::str::from_utf8(data).ok()?;
    let first = text.lines().find(|l| !l.trim().is_empty())?;
    split(first)?;
    Some(build(text))
}

/// Splits `stack count` at the last space; `None` unless the count is an integer and the
/// stack is not empty.
fn split(line: &str) -> Option<(&str, i64)> {
    let line = line.trim_end();
    let (stack, count) = line.rsplit_once(' ')?;
    let count: i64 = count.parse().ok()?;
    let stack = stack.trim();
    if stack.is_empty() {
        return None;
    }
    Some((stack, count))
}

fn build(text: &str) -> Result<Profile, ErrorKind> {
    let mut p = Profile {
        format: Format::Folded,
        sample_types: vec![ValueType::new("samples", "count")],
        ..Profile::default()
    };
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let mut locations = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some((stack, count)) = split(line) else {
            return Err(ErrorKind::BadLine {
                format: "folded",
                line: n + 1,
                what: "expected `frame;frame;... COUNT`".into(),
            });
        };
        locations.clear();
        for frame in stack.split(';').rev() {
            let index = match ids.get(frame) {
                Some(&i) => i,
                None => {
                    let next = p.locations.len() as u32;
                    let id = u64::from(next) + 1;
                    let function = p.push_function(id, frame, "", "", 0);
                    let line = Line { function, line: 0 };
                    p.push_location(id, None, 0, &[line], false);
                    ids.insert(frame, next);
                    next
                }
            };
            locations.push(index);
        }
        p.push_sample(locations.iter().copied(), &[count], &[]);
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_lines_become_leaf_first_samples_sharing_frames() {
        let p = parse(b"main;parse;tokenize 42\n\nmain;alloc 7\n")
            .unwrap()
            .unwrap();
        assert_eq!(p.samples.len(), 2);
        assert_eq!(p.functions.len(), 4);
        let names: Vec<&str> = p
            .stack(&p.samples[0])
            .map(|l| p.function_name(&p.lines(&p.locations[l as usize])[0]))
            .collect();
        assert_eq!(names, ["tokenize", "parse", "main"]);
        assert_eq!(p.values(&p.samples[1]), [7]);
    }

    #[test]
    fn not_folded_is_none_and_a_bad_later_line_is_an_error() {
        assert!(parse(b"hello world\n").is_none());
        let err = parse(b"a;b 1\nnonsense\n").unwrap().unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }
}
