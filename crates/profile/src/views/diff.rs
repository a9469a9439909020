//! `diff BASE NEW`: how a profile changed, as `go tool pprof -diff_base BASE NEW` shows it
//! (its `driver/fetch.go` and `profile/merge.go`). The two profiles are merged into one: the
//! new profile's samples as they are, the base's with their values negated and a
//! `pprof::base=true` label. Every view of the merged profile then shows deltas: a function
//! whose cost grew has a positive flat and cum value, one that shrank a negative one.
//!
//! Percentages are relative to the base profile's total (the sum of the absolute values of
//! the samples carrying the label, as pprof's `computeTotal` takes it), so `+50%` means "half
//! the base's cost again". `top` of the merged profile orders rows by the absolute delta.

use serde_json::Value;

use super::options::{Options, View};
use super::report::Report;
use super::top::{top_json, top_text};
use crate::model::{Label, Line, Profile, ValueType};

/// The label marking samples of the base profile, as pprof names it.
pub const BASE_LABEL: &str = "pprof::base";

/// Whether a sample carries `pprof::base=true`.
fn is_base(labels: &[Label]) -> bool {
    labels
        .iter()
        .any(|l| matches!(l, Label::Str { key, value } if key == BASE_LABEL && value == "true"))
}

fn types(t: &[ValueType]) -> String {
    let v: Vec<String> = t.iter().map(|t| format!("{}/{}", t.ty, t.unit)).collect();
    format!("[{}]", v.join(", "))
}

/// Checks that two profiles measure the same things: the same sample types (kind and unit,
/// in the same order) and, when both have one, the same period type.
pub fn check_compatible(base: &Profile, new: &Profile) -> Result<(), String> {
    compatible(base, new, "the base", "the new profile")
}

/// [`check_compatible`], the two profiles called `a_is` and `b_is` in the error.
fn compatible(a: &Profile, b: &Profile, a_is: &str, b_is: &str) -> Result<(), String> {
    if a.sample_types != b.sample_types {
        return Err(format!(
            "incompatible sample types: {a_is} has {}, {b_is} {}",
            types(&a.sample_types),
            types(&b.sample_types)
        ));
    }
    let (ap, bp) = (&a.period_type, &b.period_type);
    let known = |t: &ValueType| !t.ty.is_empty() || !t.unit.is_empty();
    if known(ap) && known(bp) && ap != bp {
        return Err(format!(
            "incompatible period types: {a_is} has {}/{}, {b_is} {}/{}",
            ap.ty, ap.unit, bp.ty, bp.unit
        ));
    }
    Ok(())
}

/// Merges `base` into `new` as pprof does for `-diff_base`: the base's samples negated and
/// labelled `pprof::base=true`, its mappings, locations and functions appended (references
/// and ids offset), samples whose values are all zero dropped. The header is pprof's
/// `combineHeaders`: the new profile's sample types, period type, `drop_frames` and
/// `keep_frames`; the earliest time, the summed durations, the larger period, the comments of
/// both (once each).
pub fn merge_for_diff(base: Profile, new: Profile) -> Result<Profile, String> {
    check_compatible(&base, &new)?;
    let mut p = new;
    let values = std::mem::take(&mut p.values);
    p.samples
        .retain(|s| values[s.values.range()].iter().any(|&v| v != 0));
    p.values = values;
    append(&mut p, base, true);
    p.seal();
    p.check()
        .map_err(|e| format!("the base and the new profile together: {e}"))?;
    Ok(p)
}

/// Merges profiles of the same kind into one, as `go tool pprof` does when given several
/// files: every sample of each, with its mappings, locations and functions (the views name
/// functions by name, so a function in several profiles is one node); the header is pprof's
/// `combineHeaders` over them (see [`merge_for_diff`]). `names` name the profiles in errors.
pub fn merge(profiles: Vec<Profile>, names: &[String]) -> Result<Profile, String> {
    let mut it = profiles.into_iter().enumerate();
    let Some((_, mut p)) = it.next() else {
        return Err("no profile to merge".into());
    };
    for (i, other) in it {
        let name = names.get(i).map_or("", String::as_str);
        compatible(&p, &other, "the first", "this one").map_err(|e| format!("{name}: {e}"))?;
        append(&mut p, other, false);
    }
    p.seal();
    // Each file's values add up within i64; all of them together may not.
    p.check()
        .map_err(|e| format!("the profiles together: {e}"))?;
    Ok(p)
}

/// Appends `other`'s samples (negated and labelled `pprof::base=true` when `as_base`), with
/// its mappings, locations and functions (references and ids offset), to `p`, combining the
/// headers as pprof's `combineHeaders`; samples of `other` whose values are all zero are
/// dropped. `p` is sealed by the caller.
fn append(p: &mut Profile, mut other: Profile, as_base: bool) {
    let base = &mut other;
    let (nm, nl, nf) = (
        p.mappings.len() as u32,
        p.locations.len() as u32,
        p.functions.len() as u32,
    );
    let max_id = |ids: &mut dyn Iterator<Item = u64>| ids.max().unwrap_or(0);
    let mapping_id = max_id(&mut p.mappings.iter().map(|m| m.id));
    let location_id = max_id(&mut p.locations.iter().map(|l| l.id));
    let function_id = max_id(&mut p.functions.iter().map(|f| f.id));
    // pprof's combineHeaders.
    if p.time_nanos == 0 || base.time_nanos < p.time_nanos {
        p.time_nanos = base.time_nanos;
    }
    p.duration_nanos = p.duration_nanos.saturating_add(base.duration_nanos);
    p.period = p.period.max(base.period);
    for c in &base.comments {
        if !p.comments.contains(c) {
            p.comments.push(c.clone());
        }
    }
    if p.default_sample_type.is_empty() {
        p.default_sample_type = base.default_sample_type.clone();
    }
    for mut m in std::mem::take(&mut base.mappings) {
        m.id = m.id.saturating_add(mapping_id);
        p.mappings.push(m);
    }
    for f in &base.functions {
        p.push_function(
            f.id.saturating_add(function_id),
            base.str(f.name),
            base.str(f.system_name),
            base.str(f.filename),
            f.start_line,
        );
    }
    let mut lines = Vec::new();
    for l in &base.locations {
        lines.clear();
        lines.extend(base.lines(l).iter().map(|line| Line {
            function: line.function + nf,
            line: line.line,
        }));
        p.push_location(
            l.id.saturating_add(location_id),
            l.mapping.map(|m| m + nm),
            l.address,
            &lines,
            l.is_folded,
        );
    }
    let (mut values, mut labels) = (Vec::new(), Vec::new());
    for s in &base.samples {
        if base.values(s).iter().all(|&v| v == 0) {
            continue;
        }
        values.clear();
        labels.clear();
        labels.extend_from_slice(base.labels(s));
        if as_base {
            values.extend(base.values(s).iter().map(|v| v.saturating_neg()));
            labels.push(Label::Str {
                key: BASE_LABEL.into(),
                value: "true".into(),
            });
        } else {
            values.extend_from_slice(base.values(s));
        }
        p.push_sample(base.stack(s).map(|l| l + nl), &values, &labels);
    }
}

/// The base's total of each sample value: the sum of absolute values over the samples
/// labelled `pprof::base=true`.
fn base_totals(p: &Profile) -> Vec<i64> {
    let mut totals = vec![0i64; p.sample_types.len()];
    for s in p.samples.iter().filter(|s| is_base(p.labels(s))) {
        for (t, v) in totals.iter_mut().zip(p.values(s)) {
            *t = t.saturating_add(v.saturating_abs());
        }
    }
    totals
}

/// A report of `new` minus `base`, prepared for `top` (sorted by `options.sort`, by the
/// absolute delta): the merged profile ([`merge_for_diff`]) with percentages relative to the
/// base's total (all samples' when the base is empty, as pprof).
pub fn diff_report(base: Profile, new: Profile, options: &Options) -> Result<Report, String> {
    diff_report_for(base, new, View::Top, options)
}

/// [`diff_report`] prepared for another view (`graph`, `peek`, ...).
pub fn diff_report_for(
    base: Profile,
    new: Profile,
    view: View,
    options: &Options,
) -> Result<Report, String> {
    let merged = merge_for_diff(base, new)?;
    // drop_frames pruning and filters never change a sample's values: the base total can be
    // taken before the report is prepared.
    let totals = base_totals(&merged);
    let mut rpt = Report::new(merged, view, options)?;
    if let Some(&t) = totals.get(rpt.index) {
        if t > 0 {
            rpt.total = t;
        }
    }
    Ok(rpt)
}

/// The diff as text: pprof's `top` header and table — flat delta, flat%, sum%, cum delta,
/// cum%, name — with percentages of the base total.
pub fn diff_text(rpt: &mut Report, max_name: Option<usize>) -> String {
    top_text(rpt, max_name)
}

/// The diff as JSON: `top`'s document with `"view": "diff"`; values are deltas.
pub fn diff_json(rpt: &mut Report) -> Value {
    let mut v = top_json(rpt);
    v["view"] = "diff".into();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::build;

    fn profile(scale: i64) -> Profile {
        let ms = 1_000_000;
        let mut p = build(&[
            ("main;parse;tokenize", 60 * ms * scale),
            ("main;parse", 20 * ms * scale),
            ("main;work", 20 * ms * scale),
        ]);
        p.sample_types = vec![ValueType::new("cpu", "nanoseconds")];
        p.duration_nanos = 1_000_000_000;
        p
    }

    fn rows(rpt: &mut Report) -> Vec<(String, i64, i64)> {
        let v = diff_json(rpt);
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["flat"].as_i64().unwrap(),
                    r["cum"].as_i64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn a_profile_against_itself_has_no_delta() {
        let mut rpt = diff_report(profile(1), profile(1), &Options::default()).unwrap();
        assert_eq!(rpt.total, 100_000_000, "the base's total");
        assert!(rows(&mut rpt).iter().all(|(_, f, c)| *f == 0 && *c == 0));
        assert_eq!(rpt.full_graph().flat_sum(), 0);
        let text = diff_text(&mut rpt, None);
        assert!(
            text.contains("Duration: 2s, Total samples = 100ms"),
            "{text}"
        );
        assert!(
            text.contains("Showing nodes accounting for 0, 0% of 100ms total"),
            "{text}"
        );
        assert_eq!(diff_json(&mut rpt)["view"], "diff");
    }

    #[test]
    fn a_scaled_copy_shows_the_growth_relative_to_the_base() {
        let ms = 1_000_000;
        // new = 3 x base: every value grew by twice its base value.
        let mut rpt = diff_report(profile(1), profile(3), &Options::default()).unwrap();
        assert_eq!(rpt.total, 100 * ms);
        assert_eq!(
            rows(&mut rpt),
            vec![
                ("tokenize".to_string(), 120 * ms, 120 * ms),
                ("parse".to_string(), 40 * ms, 160 * ms),
                ("work".to_string(), 40 * ms, 40 * ms),
                ("main".to_string(), 0, 200 * ms),
            ]
        );
        let text = diff_text(&mut rpt, None);
        assert!(
            text.contains("     120ms 120.00% 120.00%      120ms 120.00%  tokenize\n"),
            "{text}"
        );
        // Shrinking: the base is 3 x the new one; deltas are negative, percentages of the
        // (larger) base total.
        let mut rpt = diff_report(profile(3), profile(1), &Options::default()).unwrap();
        assert_eq!(rpt.total, 300 * ms);
        assert_eq!(
            rows(&mut rpt)[0],
            ("tokenize".to_string(), -120 * ms, -120 * ms)
        );
        let text = diff_text(&mut rpt, None);
        assert!(
            text.contains("    -120ms 40.00% 40.00%     -120ms 40.00%  tokenize\n"),
            "{text}"
        );
    }

    #[test]
    fn incompatible_profiles_are_refused() {
        let mut other = profile(1);
        other.sample_types = vec![ValueType::new("alloc_space", "bytes")];
        let e = diff_report(profile(1), other, &Options::default())
            .err()
            .unwrap();
        assert_eq!(
            e,
            "incompatible sample types: the base has [cpu/nanoseconds], the new profile \
             [alloc_space/bytes]"
        );
    }

    #[test]
    fn merge_keeps_references_valid() {
        let merged = merge_for_diff(profile(1), profile(2)).unwrap();
        merged.check().unwrap();
        assert_eq!(merged.samples.len(), 6);
        assert_eq!(
            merged
                .samples
                .iter()
                .filter(|s| is_base(merged.labels(s)))
                .count(),
            3
        );
        let ids: std::collections::HashSet<u64> = merged.locations.iter().map(|l| l.id).collect();
        assert_eq!(ids.len(), merged.locations.len());
        assert_eq!(base_totals(&merged), vec![100_000_000]);
    }
}
