//! `top`: the flat table — flat, flat%, sum%, cum, cum%, name — with pprof's header lines.

use serde_json::{json, Value};

use super::measure::percentage;
use super::report::{Report, Trimmed};

/// One row of `top`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The node's printable name.
    pub name: String,
    /// `(inline)`, `(partial-inline)` or empty.
    pub inline: &'static str,
    /// Flat value, in the sample unit.
    pub flat: i64,
    /// Cumulative value.
    pub cum: i64,
}

/// Computes the rows and the header lines.
pub fn rows(rpt: &mut Report) -> (Vec<Row>, Vec<String>, Trimmed) {
    let t = rpt.trimmed_graph();
    rpt.select_output_unit(&t.graph);
    let labels = rpt.labels(&t, 0);
    let rows = (0..t.graph.nodes.len())
        .map(|i| Row {
            name: rpt.name(&t.graph, i).to_string(),
            inline: t.graph.inline_label(i),
            flat: t.graph.nodes[i].flat,
            cum: t.graph.nodes[i].cum,
        })
        .collect();
    (rows, labels, t)
}

/// `top` as text, as `go tool pprof -top` prints it. Value columns are 10 wide as pprof's,
/// wider when a value needs it; with `max_name` names longer than that are cut (for a
/// terminal).
pub fn top_text(rpt: &mut Report, max_name: Option<usize>) -> String {
    let (rows, labels, _) = rows(rpt);
    let flats: Vec<String> = rows.iter().map(|r| rpt.format_value(r.flat)).collect();
    let cums: Vec<String> = rows.iter().map(|r| rpt.format_value(r.cum)).collect();
    let width = flats
        .iter()
        .chain(&cums)
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0)
        .max(10);
    let mut out = String::new();
    for l in &labels {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(&format!(
        "{:>width$} {:>5}% {:>5}% {:>width$} {:>5}%\n",
        "flat", "flat", "sum", "cum", "cum"
    ));
    let mut sum = 0i64;
    for (i, r) in rows.iter().enumerate() {
        sum += r.flat;
        let mut name = r.name.clone();
        if !r.inline.is_empty() {
            name.push(' ');
            name.push_str(r.inline);
        }
        if let Some(max) = max_name {
            name = cut(&name, max);
        }
        out.push_str(&format!(
            "{:>width$} {} {} {:>width$} {}  {}\n",
            flats[i],
            percentage(r.flat, rpt.total),
            percentage(sum, rpt.total),
            cums[i],
            percentage(r.cum, rpt.total),
            name
        ));
    }
    out
}

/// Cuts `s` to `max` characters, ending with `…` when cut.
pub(crate) fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max || max < 2 {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t.push('…');
    t
}

/// `top` as JSON: the header, the sample type, total and one object per row with raw values
/// (in the sample unit) and their formatted forms.
pub fn top_json(rpt: &mut Report) -> Value {
    let (rows, labels, _) = rows(rpt);
    let mut sum = 0i64;
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            sum += r.flat;
            json!({
                "name": r.name,
                "inline": r.inline,
                "flat": r.flat,
                "flat_pct": pct(r.flat, rpt.total),
                "sum_pct": pct(sum, rpt.total),
                "cum": r.cum,
                "cum_pct": pct(r.cum, rpt.total),
                "flat_text": rpt.format_value(r.flat),
                "cum_text": rpt.format_value(r.cum),
            })
        })
        .collect();
    json!({
        "view": "top",
        "sample_type": rpt.sample_type.ty,
        "unit": rpt.sample_type.unit,
        "total": rpt.total,
        "labels": labels,
        "warnings": rpt.warnings,
        "rows": rows,
    })
}

/// A percentage as a number (0 when the total is 0).
pub(crate) fn pct(v: i64, total: i64) -> f64 {
    if total == 0 {
        0.0
    } else {
        v as f64 / total as f64 * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_short_names_and_marks_long_ones() {
        assert_eq!(cut("main", 10), "main");
        assert_eq!(cut("runtime.mapiternext", 8), "runtime…");
    }

    #[test]
    fn percentages_are_plain_numbers() {
        assert_eq!(pct(1, 4), 25.0);
        assert_eq!(pct(1, 0), 0.0);
    }
}
