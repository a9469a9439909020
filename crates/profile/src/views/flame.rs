//! Flame graphs: folded stacks from a report, drawn as an interactive SVG by `inferno` (the
//! Rust port of Brendan Gregg's flamegraph.pl: search, zoom, tooltips). `--reverse` draws an
//! icicle of callers: stacks leaf first, hanging from the top. A differential flame graph
//! (`diff`) colours each frame by how its value changed between two reports.

use std::collections::HashMap;

use super::Report;

/// How to draw.
#[derive(Debug, Clone, Default)]
pub struct FlameOptions {
    /// Leaf-first stacks drawn top-down (an icicle of callers).
    pub reverse: bool,
    /// The title (default: "Flame Graph").
    pub title: Option<String>,
}

/// The report's samples as folded stacks, `root;...;leaf VALUE`, one line per distinct stack
/// (sorted, so output is deterministic); `reverse` puts the leaf first. Samples with a zero
/// or negative value are left out (flame graphs draw positive weights).
pub fn flame_folded(rpt: &Report, reverse: bool) -> Vec<(String, i64)> {
    let mut stacks: HashMap<String, i64> = HashMap::new();
    let mut frames: Vec<&str> = Vec::new();
    for s in &rpt.profile.samples {
        let w = rpt.profile.value(s, rpt.index);
        if w <= 0 {
            continue;
        }
        frames.clear();
        for l in rpt.profile.stack(s).rev() {
            for &id in rpt.table.loc_nodes(l).iter().rev() {
                frames.push(rpt.names().get(id));
            }
        }
        if reverse {
            frames.reverse();
        }
        // `;` separates frames: a name containing one (C++ templates rarely do) is escaped.
        let key = frames
            .iter()
            .map(|f| f.replace(';', ":"))
            .collect::<Vec<_>>()
            .join(";");
        *stacks.entry(key).or_insert(0) += w;
    }
    let mut v: Vec<(String, i64)> = stacks.into_iter().collect();
    v.sort();
    v
}

/// Draws the report as a flame graph SVG.
pub fn flamegraph_svg(rpt: &Report, o: &FlameOptions) -> Result<Vec<u8>, String> {
    let lines: Vec<String> = flame_folded(rpt, o.reverse)
        .into_iter()
        .map(|(s, v)| format!("{s} {v}"))
        .collect();
    let title = o.title.clone().unwrap_or_else(|| {
        if o.reverse {
            "Icicle graph (callers)".into()
        } else {
            "Flame Graph".into()
        }
    });
    draw(lines, &title, &rpt.sample_type.ty, o.reverse)
}

/// Draws a differential flame graph: frames sized by `new`, coloured red where `new` grew
/// over `base` and blue where it shrank.
pub fn diff_flamegraph_svg(base: &Report, new: &Report, reverse: bool) -> Result<Vec<u8>, String> {
    let mut both: HashMap<String, (i64, i64)> = HashMap::new();
    for (s, v) in flame_folded(base, reverse) {
        both.entry(s).or_default().0 += v;
    }
    for (s, v) in flame_folded(new, reverse) {
        both.entry(s).or_default().1 += v;
    }
    let mut lines: Vec<String> = both
        .into_iter()
        .map(|(s, (b, n))| format!("{s} {b} {n}"))
        .collect();
    lines.sort();
    draw(
        lines,
        "Differential flame graph (red: grew, blue: shrank)",
        &new.sample_type.ty,
        reverse,
    )
}

fn draw(
    lines: Vec<String>,
    title: &str,
    count_name: &str,
    inverted: bool,
) -> Result<Vec<u8>, String> {
    if lines.is_empty() {
        return Err("no samples with a positive value to draw".into());
    }
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_string();
    opt.count_name = if count_name.is_empty() {
        "samples".into()
    } else {
        count_name.to_string()
    };
    opt.deterministic = true;
    if inverted {
        opt.direction = inferno::flamegraph::Direction::Inverted;
    }
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), &mut svg)
        .map_err(|e| format!("cannot draw the flame graph: {e}"))?;
    Ok(svg)
}
