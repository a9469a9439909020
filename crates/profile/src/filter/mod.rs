//! pprof's sample filters: `--focus`, `--ignore`, `--hide`, `--show`, `--show_from`,
//! `--tagfocus` and `--tagignore`, with the semantics of `go tool pprof` (its
//! `internal/driver/driver_focus.go` and `profile/filter.go`), plus the frame pruning done once
//! after loading ([`remove_uninteresting`], pprof's `RemoveUninteresting`) and `--prune_from`
//! ([`prune_from`]).
//!
//! [`apply`] compiles every expression first (so a bad one changes nothing), then filters in
//! pprof's order:
//!
//! 1. by name: a sample is kept when at least one of its locations matches `focus` (any
//!    location when there is none) and none matches `ignore`; `hide` removes the matching
//!    lines (frames) from locations and `show` keeps only the matching ones; a location left
//!    without lines is removed from the samples, and a sample left without locations is
//!    dropped. A location matches when one of its lines' function name or file name does, or
//!    its mapping's file does.
//! 2. `show_from`: each sample loses the frames above (callers of) its outermost matching
//!    frame; a sample with no matching frame is dropped.
//! 3. by tag: a sample is kept when it matches `tagfocus` (if given) and not `tagignore`.
//!
//! As in pprof, the views' total (the "of X total" of percentages) is the total before the
//! filters: compute it before calling [`apply`].
//!
//! Matching is linear in the profile: each expression runs at most once per function and once
//! per mapping, whatever the number of samples.

use std::collections::HashMap;

use crate::model::Profile;

pub use prune::{prune_from, remove_uninteresting};

mod name;
mod pattern;
mod prune;
mod tag;

use name::*;
use pattern::*;
use tag::*;
pub use tag::{num_label_units, NumLabelUnits};

/// What to filter, as the CLI flags give it (regex strings; None = not given).
///
/// An empty string counts as not given, as in pprof.
#[derive(Debug, Clone, Default)]
pub struct FilterSpec {
    /// Keep only samples with a frame matching this (pprof's `-focus`).
    pub focus: Option<String>,
    /// Drop samples with a frame matching this (`-ignore`).
    pub ignore: Option<String>,
    /// Remove the frames matching this from the stacks (`-hide`).
    pub hide: Option<String>,
    /// Keep only the frames matching this in the stacks (`-show`).
    pub show: Option<String>,
    /// Remove the frames above the outermost frame matching this (`-show_from`).
    pub show_from: Option<String>,
    /// Keep only samples whose tags match (`-tagfocus`): `regex[,regex...]`,
    /// `key=regex[,regex...]`, or a numeric value or range with an optional key and units
    /// (`1mb`, `1mb:`, `:10ms`, `bytes=1kb:2kb`).
    pub tagfocus: Option<String>,
    /// Drop samples whose tags match (`-tagignore`), same syntax as `tagfocus`.
    pub tagignore: Option<String>,
}

/// What [`apply`] has to say besides the filtered profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The legend lines pprof prints for the active filters: `Active filters:` then one
    /// `   name=value` line per filter given (values over 80 bytes are cut and end in `…`);
    /// empty when no filter is given.
    pub legend: Vec<String>,
    /// What pprof prints on stderr while filtering, in its order: units ignored for numeric
    /// tags (only when a tag filter is given), `tagfocus:Interpreted '1kb:2kb' as range, not
    /// regexp`, and `Focus expression matched no samples` (and the like for each other
    /// filter).
    pub warnings: Vec<String>,
}

/// Applies the filters to `p` in pprof's order; returns the legend lines pprof prints for
/// active filters (e.g. `Active filters:`, `   focus=main`), and warnings such as pprof's
/// `Focus expression matched no samples`.
///
/// Errors (a bad regular expression or tag filter, as a sentence naming the flag and the
/// expression) leave `p` unchanged. As in pprof, samples without any location are always
/// dropped, even when no filter is given.
pub fn apply(p: &mut Profile, spec: &FilterSpec) -> Result<Applied, String> {
    let mut warnings = Vec::new();

    let focus = compile_option("focus", given(&spec.focus))?;
    let ignore = compile_option("ignore", given(&spec.ignore))?;
    let hide = compile_option("hide", given(&spec.hide))?;
    let show = compile_option("show", given(&spec.show))?;
    let show_from = compile_option("show_from", given(&spec.show_from))?;
    let tagfocus = given(&spec.tagfocus)
        .map(|v| TagFilter::parse("tagfocus", v, &mut warnings))
        .transpose()?;
    let tagignore = given(&spec.tagignore)
        .map(|v| TagFilter::parse("tagignore", v, &mut warnings))
        .transpose()?;

    // pprof identifies the numeric tags' units on the whole profile, before any filter.
    let units = if tagfocus.is_some() || tagignore.is_some() {
        let units = num_label_units(p);
        // Its notes come first: pprof prints them before compiling the filters.
        warnings.splice(0..0, units.warnings.iter().cloned());
        units.units
    } else {
        HashMap::new()
    };

    let by_name = filter_by_name(
        p,
        focus.as_ref(),
        ignore.as_ref(),
        hide.as_ref(),
        show.as_ref(),
    );
    let mut warn = |given: bool, matched: bool, option: &str| {
        if given && !matched {
            warnings.push(format!("{option} expression matched no samples"));
        }
    };
    warn(focus.is_some(), by_name.focus, "Focus");
    warn(ignore.is_some(), by_name.ignore, "Ignore");
    warn(hide.is_some(), by_name.hide, "Hide");
    warn(show.is_some(), by_name.show, "Show");

    let show_from_matched = show_from.as_ref().is_some_and(|rx| apply_show_from(p, rx));
    warn(show_from.is_some(), show_from_matched, "ShowFrom");

    let (tf, ti) = filter_by_tag(p, tagfocus.as_ref(), tagignore.as_ref(), &units);
    warn(tagfocus.is_some(), tf, "TagFocus");
    warn(tagignore.is_some(), ti, "TagIgnore");

    let filters = [
        ("focus", &spec.focus),
        ("ignore", &spec.ignore),
        ("hide", &spec.hide),
        ("show", &spec.show),
        ("show_from", &spec.show_from),
        ("tagfocus", &spec.tagfocus),
        ("tagignore", &spec.tagignore),
    ];
    let active: Vec<String> = filters
        .iter()
        .filter_map(|(k, v)| given(v).map(|v| format!("{k}={v}")))
        .collect();
    Ok(Applied {
        legend: legend_active_filters(&active),
        warnings,
    })
}

/// A flag's value, `None` when not given or empty.
fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

/// pprof's `legendActiveFilters`: a heading, then each filter indented, cut at 80 bytes.
fn legend_active_filters(active: &[String]) -> Vec<String> {
    if active.is_empty() {
        return Vec::new();
    }
    let mut legend = Vec::with_capacity(active.len() + 1);
    legend.push("Active filters:".to_string());
    for s in active {
        if s.len() > 80 {
            // pprof cuts at byte 80; a cut inside a character moves back to its start.
            let mut end = 80;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            legend.push(format!("   {}…", &s[..end]));
        } else {
            legend.push(format!("   {s}"));
        }
    }
    legend
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{Label, Mapping};
    use crate::testutil::{build, build_labeled, stacks};

    fn owned(v: &[(&str, i64)]) -> Vec<(String, i64)> {
        v.iter().map(|&(s, n)| (s.to_string(), n)).collect()
    }

    fn spec(f: impl FnOnce(&mut FilterSpec)) -> FilterSpec {
        let mut s = FilterSpec::default();
        f(&mut s);
        s
    }

    fn str_label(key: &str, value: &str) -> Label {
        Label::Str {
            key: key.into(),
            value: value.into(),
        }
    }

    fn num_label(key: &str, value: i64, unit: &str) -> Label {
        Label::Num {
            key: key.into(),
            value,
            unit: unit.into(),
        }
    }

    const STACKS: &[(&str, i64)] = &[
        ("main;parse;tokenize", 5),
        ("main;parse|lex;next", 3),
        ("main;run;alloc", 7),
        ("main", 1),
    ];

    #[test]
    fn no_filters_keeps_everything_but_empty_stacks() {
        let mut p = build(STACKS);
        p.push_sample([], &[100], &[]);
        let applied = apply(&mut p, &FilterSpec::default()).unwrap();
        assert_eq!(applied, Applied::default());
        assert_eq!(stacks(&p), owned(STACKS));
    }

    #[test]
    fn focus_keeps_samples_with_a_matching_frame() {
        let mut p = build(STACKS);
        let applied = apply(&mut p, &spec(|s| s.focus = Some("parse".into()))).unwrap();
        assert_eq!(
            stacks(&p),
            owned(&[("main;parse;tokenize", 5), ("main;parse|lex;next", 3)])
        );
        assert_eq!(applied.legend, ["Active filters:", "   focus=parse"]);
        assert!(applied.warnings.is_empty());
        // An inlined line counts too; the stacks are not changed.
        let mut p = build(STACKS);
        apply(&mut p, &spec(|s| s.focus = Some("^lex$".into()))).unwrap();
        assert_eq!(stacks(&p), owned(&[("main;parse|lex;next", 3)]));
    }

    #[test]
    fn ignore_drops_samples_with_a_matching_frame_and_wins_over_focus() {
        let mut p = build(STACKS);
        apply(&mut p, &spec(|s| s.ignore = Some("tokenize|alloc".into()))).unwrap();
        assert_eq!(
            stacks(&p),
            owned(&[("main;parse|lex;next", 3), ("main", 1)])
        );
        let mut p = build(STACKS);
        let applied = apply(
            &mut p,
            &spec(|s| {
                s.focus = Some("parse".into());
                s.ignore = Some("next".into());
            }),
        )
        .unwrap();
        assert_eq!(stacks(&p), owned(&[("main;parse;tokenize", 5)]));
        assert_eq!(
            applied.legend,
            ["Active filters:", "   focus=parse", "   ignore=next"]
        );
    }

    #[test]
    fn hide_drops_frames_and_emptied_samples() {
        let mut p = build(STACKS);
        apply(
            &mut p,
            &spec(|s| s.hide = Some("^(main|lex|alloc)$".into())),
        )
        .unwrap();
        // `lex` goes from its location; `main` alone leaves the last sample empty: dropped.
        assert_eq!(
            stacks(&p),
            owned(&[("parse;tokenize", 5), ("parse;next", 3), ("run", 7)])
        );
    }

    #[test]
    fn show_keeps_only_matching_frames() {
        let mut p = build(STACKS);
        let applied = apply(&mut p, &spec(|s| s.show = Some("^(parse|lex|run)$".into()))).unwrap();
        assert_eq!(
            stacks(&p),
            owned(&[("parse", 5), ("parse|lex", 3), ("run", 7)])
        );
        assert!(applied.warnings.is_empty());
        // show and hide together: hide first, then show on what is left.
        let mut p = build(STACKS);
        apply(
            &mut p,
            &spec(|s| {
                s.show = Some("^(parse|lex|run)$".into());
                s.hide = Some("lex".into());
            }),
        )
        .unwrap();
        assert_eq!(stacks(&p), owned(&[("parse", 5), ("parse", 3), ("run", 7)]));
    }

    #[test]
    fn focus_is_decided_before_hide_removes_the_frame() {
        let mut p = build(STACKS);
        apply(
            &mut p,
            &spec(|s| {
                s.focus = Some("tokenize".into());
                s.hide = Some("tokenize".into());
            }),
        )
        .unwrap();
        assert_eq!(stacks(&p), owned(&[("main;parse", 5)]));
    }

    #[test]
    fn show_from_drops_callers_of_the_outermost_match() {
        let stacks_in = &[
            ("main;parse;tokenize;parse;next", 2),
            ("main;run|parse|lex;alloc", 4),
            ("main;run", 1),
        ];
        let mut p = build(stacks_in);
        let applied = apply(&mut p, &spec(|s| s.show_from = Some("^parse$".into()))).unwrap();
        assert_eq!(
            stacks(&p),
            owned(&[("parse;tokenize;parse;next", 2), ("parse|lex;alloc", 4)])
        );
        assert_eq!(applied.legend, ["Active filters:", "   show_from=^parse$"]);
        let mut p = build(stacks_in);
        let applied = apply(&mut p, &spec(|s| s.show_from = Some("nothing".into()))).unwrap();
        assert!(p.samples.is_empty());
        assert_eq!(applied.warnings, ["ShowFrom expression matched no samples"]);
    }

    #[test]
    fn file_names_and_mappings_match_too() {
        let mut p = build(STACKS);
        let alloc = p
            .functions
            .iter()
            .position(|f| p.str(f.name) == "alloc")
            .unwrap();
        p.functions[alloc].filename = p.intern("/src/heap.c");
        p.mappings.push(Mapping {
            id: 1,
            file: "/lib/libparse.so".into(),
            ..Mapping::default()
        });
        let next = p
            .locations
            .iter()
            .position(|l| p.function_name(&p.lines(l)[0]) == "next")
            .unwrap();
        p.locations[next].mapping = Some(0);
        let mut q = p.clone();
        apply(
            &mut q,
            &spec(|s| s.focus = Some(r"heap\.c|libparse".into())),
        )
        .unwrap();
        assert_eq!(
            stacks(&q),
            owned(&[("main;parse|lex;next", 3), ("main;run;alloc", 7)])
        );
        // A matching mapping hides (and shows) a location's every line.
        let mut q = p.clone();
        apply(&mut q, &spec(|s| s.hide = Some("libparse".into()))).unwrap();
        assert_eq!(stacks(&q)[1], ("main;parse|lex".to_string(), 3));
    }

    #[test]
    fn tagfocus_and_tagignore_with_strings() {
        let input = vec![
            ("main;a", 1, vec![str_label("phase", "init")]),
            (
                "main;b",
                2,
                vec![str_label("phase", "run"), str_label("user", "bob")],
            ),
            ("main;c", 4, vec![str_label("user", "initiator")]),
            ("main;d", 8, vec![]),
        ];
        let run = |f: &dyn Fn(&mut FilterSpec)| {
            let mut p = build_labeled(&input);
            let applied = apply(&mut p, &spec(f)).unwrap();
            let values: Vec<i64> = p.samples.iter().map(|s| p.values(s)[0]).collect();
            (values, applied)
        };
        // Without a key, `key:value` is matched.
        assert_eq!(run(&|s| s.tagfocus = Some("init".into())).0, [1, 4]);
        assert_eq!(run(&|s| s.tagfocus = Some("^phase:".into())).0, [1, 2]);
        // Several expressions without a key: all must match.
        assert_eq!(run(&|s| s.tagfocus = Some("run,bob".into())).0, [2]);
        // With a key, the value is matched; any expression may.
        assert_eq!(run(&|s| s.tagfocus = Some("phase=^init$".into())).0, [1]);
        assert_eq!(
            run(&|s| s.tagfocus = Some("phase=init,run".into())).0,
            [1, 2]
        );
        assert_eq!(run(&|s| s.tagignore = Some("user=bob".into())).0, [1, 4, 8]);
        let (values, applied) = run(&|s| {
            s.tagfocus = Some("phase=.".into());
            s.tagignore = Some("run".into());
        });
        assert_eq!(values, [1]);
        assert_eq!(
            applied.legend,
            ["Active filters:", "   tagfocus=phase=.", "   tagignore=run"]
        );
        let (values, applied) = run(&|s| s.tagignore = Some("nope".into()));
        assert_eq!(values, [1, 2, 4, 8]);
        assert_eq!(
            applied.warnings,
            ["TagIgnore expression matched no samples"]
        );
    }

    #[test]
    fn tagfocus_numeric_ranges() {
        let input = vec![
            ("main;a", 1, vec![num_label("bytes", 512, "bytes")]),
            ("main;b", 2, vec![num_label("bytes", 1024, "bytes")]),
            ("main;c", 4, vec![num_label("bytes", 1536, "")]),
            ("main;d", 8, vec![num_label("bytes", 2048, "bytes")]),
            ("main;e", 16, vec![num_label("bytes", 4096, "bytes")]),
            (
                "main;f",
                32,
                vec![num_label("delay", 5_000_000, "nanoseconds")],
            ),
            ("main;g", 64, vec![num_label("objects", 3, "")]),
        ];
        let run = |filter: &str, ignore: bool| {
            let mut p = build_labeled(&input);
            let s = spec(|s| {
                if ignore {
                    s.tagignore = Some(filter.into());
                } else {
                    s.tagfocus = Some(filter.into());
                }
            });
            let applied = apply(&mut p, &s).unwrap();
            let values: Vec<i64> = p.samples.iter().map(|s| p.values(s)[0]).collect();
            (values, applied.warnings)
        };
        let (values, warnings) = run("bytes=1kb:2kb", false);
        // 1536 has no unit: the key's unit (the first one given) applies.
        assert_eq!(values, [2, 4, 8]);
        assert_eq!(
            warnings,
            ["tagfocus:Interpreted '1kb:2kb' as range, not regexp"]
        );
        assert_eq!(run("bytes=2kb:", false).0, [8, 16]);
        assert_eq!(run(":1KB", false).0, [1, 2]);
        // A number without unit never matches a label with one: pprof compares units.
        assert_eq!(run("bytes=1536", false).0, Vec::<i64>::new());
        assert_eq!(run("bytes=1536b", false).0, [4]);
        // Time units convert; a key without unit is its own unit, which pprof takes to be
        // the filter's unit when it does not know it (so `objects` 3 is within `:10ms`).
        assert_eq!(run(":10ms", false).0, [32, 64]);
        assert_eq!(run("delay=5ms", false).0, [32]);
        assert_eq!(run("3", false).0, [64]);
        assert_eq!(run("objects=2:4", false).0, [64]);
        // Units of different kinds never match.
        assert_eq!(run("bytes=1s:", false).0, Vec::<i64>::new());
        assert_eq!(run("bytes=1kb:2kb", true).0, [1, 16, 32, 64]);
        // Not exactly a range: taken as expressions (no `key:value` string tag here).
        let (values, warnings) = run("1kb:2ms", false);
        assert!(values.is_empty());
        assert_eq!(warnings, ["TagFocus expression matched no samples"]);
    }

    #[test]
    fn numeric_label_units_like_pprof() {
        let p = build_labeled(&[
            (
                "a",
                1,
                vec![
                    num_label("bytes", 1, ""),
                    num_label("bytes", 1, "bytes"),
                    num_label("request", 1, ""),
                ],
            ),
            (
                "a",
                1,
                vec![num_label("bytes", 1, "kilobytes"), num_label("n", 1, "")],
            ),
        ]);
        let u = num_label_units(&p);
        assert_eq!(u.units["bytes"], "bytes");
        assert_eq!(u.units["request"], "bytes");
        assert_eq!(u.units["n"], "n");
        assert_eq!(
            u.warnings,
            ["For tag bytes used unit bytes, also encountered unit(s) kilobytes"]
        );
    }

    #[test]
    fn tag_range_parsing() {
        let r = |s: &str| NumRange::parse(s).unwrap();
        let range = |lo: Option<f64>, hi: Option<f64>, unit: &str| {
            Some(NumRange {
                lo,
                hi,
                unit: unit.into(),
            })
        };
        assert_eq!(r("32kb"), range(Some(32.0), Some(32.0), "kB"));
        assert_eq!(r("4MB:"), range(Some(4.0), None, "MB"));
        assert_eq!(r(":10ms"), range(None, Some(10.0), "ms"));
        assert_eq!(r("1kb:2mb"), range(Some(1.0), Some(2048.0), "kB"));
        assert_eq!(r("-5:+7"), range(Some(-5.0), Some(7.0), ""));
        assert_eq!(r("2hrs"), range(Some(2.0), Some(2.0), "hrs"));
        assert_eq!(r("x86"), None);
        assert_eq!(r("1:2:3"), None);
        assert_eq!(r("main"), None);
        assert!(NumRange::parse("99999999999999999999").is_err());
        // The unit conversions themselves are tested with them, in tickscope_fmt::units.
    }

    #[test]
    fn bad_expressions_are_errors_that_name_them() {
        let mut p = build(STACKS);
        let before = p.clone();
        let err = apply(
            &mut p,
            &spec(|s| {
                s.focus = Some("main".into());
                s.ignore = Some("pa(rse".into());
            }),
        )
        .unwrap_err();
        assert!(err.contains("ignore") && err.contains("pa(rse"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        let err = apply(&mut p, &spec(|s| s.tagfocus = Some("k=a,[b".into()))).unwrap_err();
        assert!(err.contains("tagfocus") && err.contains("[b"), "{err}");
        let err = apply(
            &mut p,
            &spec(|s| s.tagfocus = Some("99999999999999999999".into())),
        )
        .unwrap_err();
        assert!(err.contains("99999999999999999999"), "{err}");
        assert_eq!(p, before);
    }

    #[test]
    fn case_insensitive_expressions_work() {
        let mut p = build(STACKS);
        apply(&mut p, &spec(|s| s.focus = Some("(?i)^ALLOC$".into()))).unwrap();
        assert_eq!(stacks(&p), owned(&[("main;run;alloc", 7)]));
    }

    #[test]
    fn no_match_warnings_and_legend() {
        let mut p = build(STACKS);
        let long = "x".repeat(100);
        let applied = apply(
            &mut p,
            &spec(|s| {
                s.focus = Some("zzz".into());
                s.ignore = Some("yyy".into());
                s.hide = Some("qqq".into());
                s.show = Some(long.clone());
                s.tagfocus = Some("foo".into());
                s.tagignore = Some(String::new());
            }),
        )
        .unwrap();
        assert!(p.samples.is_empty());
        assert_eq!(
            applied.warnings,
            [
                "Focus expression matched no samples",
                "Ignore expression matched no samples",
                "Hide expression matched no samples",
                "Show expression matched no samples",
                "TagFocus expression matched no samples",
            ]
        );
        let cut = format!("   show={}…", &long[..75]);
        assert_eq!(
            applied.legend,
            [
                "Active filters:",
                "   focus=zzz",
                "   ignore=yyy",
                "   hide=qqq",
                cut.as_str(),
                "   tagfocus=foo",
            ]
        );
    }

    #[test]
    fn sample_cpu_focus_matches_go_tool_pprof() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/pprof/sample.cpu.pb.gz"
        );
        let mut p = crate::load(path).unwrap();
        let applied = apply(&mut p, &spec(|s| s.focus = Some("mapiternext".into()))).unwrap();
        assert_eq!(applied.legend, ["Active filters:", "   focus=mapiternext"]);
        assert!(applied.warnings.is_empty());
        let last = p.sample_types.len() - 1;
        let total: i64 = p.samples.iter().map(|s| p.values(s)[last]).sum();
        // `go tool pprof -top -focus=mapiternext sample.cpu.pb.gz` (Go 1.19.8):
        // "Showing nodes accounting for 1370ms, 77.84% of 1760ms total".
        assert_eq!(total, 1_370_000_000);
    }
}
