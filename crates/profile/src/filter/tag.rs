//! Filters by tag: `-tagfocus` and `-tagignore`, string and numeric, in pprof's units.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tickscope_fmt::units::scale;

use super::pattern::{regex_error, Pattern};
use crate::model::{Label, Profile};

/// A compiled `-tagfocus` / `-tagignore` (pprof's `compileTagFilter`).
#[derive(Debug)]
pub(super) enum TagFilter {
    /// A numeric value or range, for numeric labels (of one key, or of any).
    Range {
        key: Option<String>,
        range: NumRange,
    },
    /// Expressions for string labels. With a key: any expression matching any value of that
    /// key. Without: every expression matching some `key:value` of the sample.
    Regex {
        key: Option<String>,
        patterns: Vec<Pattern>,
    },
}

/// A numeric tag range in `unit` (pprof's `parseTagFilterRange`); bounds are inclusive, a
/// single value is both bounds.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct NumRange {
    pub(super) lo: Option<f64>,
    pub(super) hi: Option<f64>,
    pub(super) unit: String,
}

impl NumRange {
    /// Whether `value`, in `unit`, is in the range (false when the units do not convert).
    pub(super) fn contains(&self, value: i64, unit: &str) -> bool {
        let (v, u) = scale(value, unit, &self.unit);
        u == self.unit && self.lo.map_or(true, |lo| v >= lo) && self.hi.map_or(true, |hi| v <= hi)
    }

    /// Parses `32kb` (equal), `:64kb` (at most), `4mb:` (at least) or `12kb:64mb` (between);
    /// `None` when `filter` is none of them (it is then taken as expressions).
    pub(super) fn parse(filter: &str) -> Result<Option<NumRange>, String> {
        let rx =
            regex::Regex::new("([+-]?[[:digit:]]+)([[:alpha:]]+)?").expect("a valid expression");
        let found: Vec<regex::Captures> = rx.captures_iter(filter).take(2).collect();
        let Some(first) = found.first() else {
            return Ok(None);
        };
        let number = |c: &regex::Captures| -> Result<(i64, String), String> {
            let digits = &c[1];
            let v = digits
                .parse::<i64>()
                .map_err(|_| format!("tag filter value {digits} is out of range"))?;
            Ok((v, c.get(2).map_or("", |m| m.as_str()).to_string()))
        };
        let (v, u) = number(first)?;
        let (value, unit) = scale(v, &u, &u);
        let unit = unit.to_string();
        let whole = &first[0];
        if found.len() == 1 {
            let (lo, hi) = if filter == whole {
                (Some(value), Some(value))
            } else if filter.strip_suffix(':') == Some(whole) {
                (Some(value), None)
            } else if filter.strip_prefix(':') == Some(whole) {
                (None, Some(value))
            } else {
                return Ok(None);
            };
            return Ok(Some(NumRange { lo, hi, unit }));
        }
        let second = &found[1];
        if filter != format!("{whole}:{}", &second[0]) {
            return Ok(None);
        }
        let (v2, u2) = number(second)?;
        let (value2, unit2) = scale(v2, &u2, &unit);
        if unit2 != unit {
            return Ok(None);
        }
        Ok(Some(NumRange {
            lo: Some(value),
            hi: Some(value2),
            unit,
        }))
    }
}

impl TagFilter {
    /// Compiles a tag filter given to `flag`; notes a numeric range in `warnings` as pprof
    /// does.
    pub(super) fn parse(
        flag: &str,
        value: &str,
        warnings: &mut Vec<String>,
    ) -> Result<TagFilter, String> {
        let (key, value) = match value.split_once('=') {
            Some((k, v)) => (Some(k).filter(|k| !k.is_empty()), v),
            None => (None, value),
        };
        let key = key.map(str::to_string);
        if let Some(range) = NumRange::parse(value).map_err(|e| format!("parsing {flag}: {e}"))? {
            warnings.push(format!("{flag}:Interpreted '{value}' as range, not regexp"));
            return Ok(TagFilter::Range { key, range });
        }
        let patterns = value
            .split(',')
            .map(|v| Pattern::new(v).map_err(|why| regex_error(flag, v, &why)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TagFilter::Regex { key, patterns })
    }

    /// Whether the sample matches; `units` are the numeric tags' units ([`num_label_units`]).
    pub(super) fn matches(
        &self,
        labels: &[Label],
        units: &HashMap<String, String>,
        buf: &mut String,
    ) -> bool {
        let unit_of = |k: &str| units.get(k).map_or("", String::as_str);
        match self {
            TagFilter::Range { key, range } => labels.iter().any(|l| match l {
                Label::Num { key: k, value, .. } => {
                    key.as_deref().map_or(true, |want| want == k)
                        && range.contains(*value, unit_of(k))
                }
                Label::Str { .. } => false,
            }),
            TagFilter::Regex {
                key: Some(want),
                patterns,
            } => patterns.iter().any(|rx| {
                labels.iter().any(|l| match l {
                    Label::Str { key, value } => key == want && rx.is_match(value),
                    Label::Num { .. } => false,
                })
            }),
            TagFilter::Regex {
                key: None,
                patterns,
            } => patterns.iter().all(|rx| {
                labels.iter().any(|l| match l {
                    Label::Str { key, value } => {
                        buf.clear();
                        buf.push_str(key);
                        buf.push(':');
                        buf.push_str(value);
                        rx.is_match(buf)
                    }
                    Label::Num { .. } => false,
                })
            }),
        }
    }
}

/// pprof's `FilterSamplesByTag`; returns whether focus and ignore matched some sample.
pub(super) fn filter_by_tag(
    p: &mut Profile,
    focus: Option<&TagFilter>,
    ignore: Option<&TagFilter>,
    units: &HashMap<String, String>,
) -> (bool, bool) {
    let (mut fm, mut im) = (false, false);
    if focus.is_none() && ignore.is_none() {
        return (fm, im);
    }
    let mut buf = String::new();
    let all = &p.labels;
    p.samples.retain(|s| {
        let labels = &all[s.labels.range()];
        let focused = focus.map_or(true, |f| f.matches(labels, units, &mut buf));
        let ignored = ignore.is_some_and(|f| f.matches(labels, units, &mut buf));
        fm |= focused;
        im |= ignored;
        focused && !ignored
    });
    (fm, im)
}

/// The units of numeric tags, as pprof identifies them (`Profile.NumLabelUnits`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumLabelUnits {
    /// Each numeric tag key's unit: the first non-empty unit given with it (samples and
    /// labels in order); without any, `bytes` for `alignment` and `request`, else the key.
    pub units: HashMap<String, String>,
    /// pprof's notes for keys seen with several units, sorted by key:
    /// `For tag K used unit U, also encountered unit(s) V, W`.
    pub warnings: Vec<String>,
}

/// Identifies the units of the profile's numeric tags (pprof's `identifyNumLabelUnits`), which
/// numeric tag filters compare in.
pub fn num_label_units(p: &Profile) -> NumLabelUnits {
    let mut units: HashMap<String, String> = HashMap::new();
    let mut ignored: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut keys: BTreeSet<&str> = BTreeSet::new();
    for s in &p.samples {
        for l in p.labels(s) {
            let Label::Num { key, unit, .. } = l else {
                continue;
            };
            keys.insert(key);
            if unit.is_empty() {
                continue;
            }
            match units.get(key.as_str()) {
                None => {
                    units.insert(key.clone(), unit.clone());
                }
                Some(want) if want != unit => {
                    ignored.entry(key).or_default().insert(unit);
                }
                Some(_) => {}
            }
        }
    }
    for key in keys {
        if !units.contains_key(key) {
            let unit = match key {
                "alignment" | "request" => "bytes",
                _ => key,
            };
            units.insert(key.to_string(), unit.to_string());
        }
    }
    let warnings = ignored
        .into_iter()
        .map(|(k, others)| {
            let others: Vec<&str> = others.into_iter().collect();
            format!(
                "For tag {k} used unit {}, also encountered unit(s) {}",
                units[k],
                others.join(", ")
            )
        })
        .collect();
    NumLabelUnits { units, warnings }
}
