//! Regular expressions, matched as Go's `regexp.MatchString`, cached per function and mapping.

use crate::model::{Function, Line, Location, Mapping};
use crate::store::Strings;

/// A compiled expression, matched as Go's `regexp.MatchString` does (anywhere in the text).
#[derive(Debug, Clone)]
pub(crate) enum Pattern {
    /// The usual, Unicode-aware form.
    Unicode(regex::Regex),
    /// The fallback for case-insensitive expressions (`(?i)...`): this build of the regex
    /// crate has no Unicode case folding, so they are compiled with ASCII semantics.
    Ascii(regex::bytes::Regex),
}

impl Pattern {
    /// Compiles `pattern`; the error is one line.
    pub(crate) fn new(pattern: &str) -> Result<Pattern, String> {
        match regex::Regex::new(pattern) {
            Ok(rx) => Ok(Pattern::Unicode(rx)),
            Err(e) => {
                let why = error_line(&e);
                if why.contains("case insensitivity") {
                    if let Ok(rx) = regex::bytes::RegexBuilder::new(pattern)
                        .unicode(false)
                        .build()
                    {
                        return Ok(Pattern::Ascii(rx));
                    }
                }
                Err(why)
            }
        }
    }

    /// Whether the expression matches somewhere in `text`.
    pub(crate) fn is_match(&self, text: &str) -> bool {
        match self {
            Pattern::Unicode(rx) => rx.is_match(text),
            Pattern::Ascii(rx) => rx.is_match(text.as_bytes()),
        }
    }
}

/// The regex crate's error as one line: the `error: ...` line of a syntax error's diagram.
pub(super) fn error_line(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .or_else(|| text.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("invalid expression")
        .trim()
        .to_string()
}

/// The error sentence for a bad expression given to `flag`.
pub(crate) fn regex_error(flag: &str, pattern: &str, why: &str) -> String {
    format!("parsing {flag} regexp `{pattern}`: {why}")
}

pub(super) fn compile_option(flag: &str, value: Option<&str>) -> Result<Option<Pattern>, String> {
    value
        .map(|v| Pattern::new(v).map_err(|why| regex_error(flag, v, &why)))
        .transpose()
}

/// An expression with its results cached per function and per mapping, so that it runs at
/// most once for each.
pub(crate) struct Matcher<'a> {
    rx: &'a Pattern,
    functions: Vec<Option<bool>>,
    mappings: Vec<Option<bool>>,
}

impl<'a> Matcher<'a> {
    pub(crate) fn new(rx: &'a Pattern, functions: usize, mappings: usize) -> Matcher<'a> {
        Matcher {
            rx,
            functions: vec![None; functions],
            mappings: vec![None; mappings],
        }
    }

    /// Whether the function's name or file name matches.
    pub(crate) fn function(&mut self, names: Names<'_>, f: u32) -> bool {
        let rx = self.rx;
        *self.functions[f as usize].get_or_insert_with(|| {
            let f = &names.functions[f as usize];
            rx.is_match(names.strings.get(f.name)) || rx.is_match(names.strings.get(f.filename))
        })
    }

    /// Whether the location's mapping's file matches (false without a mapping).
    pub(super) fn mapping(&mut self, mappings: &[Mapping], loc: &Location) -> bool {
        let rx = self.rx;
        loc.mapping.is_some_and(|m| {
            *self.mappings[m as usize]
                .get_or_insert_with(|| rx.is_match(&mappings[m as usize].file))
        })
    }

    /// pprof's `Location.matchesName`: a line's function or the mapping matches.
    pub(super) fn location(
        &mut self,
        names: Names<'_>,
        lines: &[Line],
        mappings: &[Mapping],
        loc: &Location,
    ) -> bool {
        lines[loc.lines.range()]
            .iter()
            .any(|l| self.function(names, l.function))
            || self.mapping(mappings, loc)
    }
}

/// What name matching reads: the functions and the strings their names are in.
#[derive(Clone, Copy)]
pub(crate) struct Names<'a> {
    pub(crate) functions: &'a [Function],
    pub(crate) strings: &'a Strings,
}
