//! Flame graphs: folded stacks from a report, drawn as an interactive SVG by `inferno` (the
//! Rust port of Brendan Gregg's flamegraph.pl: search, zoom, tooltips). `--reverse` draws an
//! icicle of callers: stacks leaf first, hanging from the top. A differential flame graph
//! (`diff`) colours each frame by how its value changed between two reports.

use std::collections::HashMap;

use super::report::Report;

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

/// A call tree for drawing a flame graph or icicle: every distinct call path, each node with
/// its parent, heaviest children first, in depth-first order (a node's subtree follows it).
/// Two reports make a differential tree: `cum` and `flat` are the new report's, `base_cum`
/// and `base_flat` the base's, on the union of both reports' call paths.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlameTree {
    /// Function names; nodes refer to them by position.
    pub names: Vec<String>,
    /// The nodes; node 0 is the root (no function), its `cum` the total drawn.
    pub nodes: Vec<FlameNode>,
}

/// One call path of a [`FlameTree`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlameNode {
    /// Its parent's position (the root's is 0).
    pub parent: u32,
    /// Its function's position in [`FlameTree::names`] (the root's is `u32::MAX`).
    pub name: u32,
    /// Depth: 0 for the root, 1 for the entry points.
    pub depth: u32,
    /// Samples' value with this path on the stack.
    pub cum: i64,
    /// Samples' value with this path as the whole stack.
    pub flat: i64,
    /// As `cum`, in the base report (differential trees).
    pub base_cum: i64,
    /// As `flat`, in the base report.
    pub base_flat: i64,
}

/// The report's samples as a [`FlameTree`] (positive values only, as [`flame_folded`]).
/// `reverse`: leaf first (an icicle of callers).
pub fn flame_tree(rpt: &Report, reverse: bool) -> FlameTree {
    let mut b = TreeBuilder::default();
    b.add(rpt, reverse, false);
    b.finish()
}

/// The differential [`FlameTree`] of `base` and `new`.
pub fn diff_flame_tree(base: &Report, new: &Report, reverse: bool) -> FlameTree {
    let mut b = TreeBuilder::default();
    b.add(new, reverse, false);
    b.add(base, reverse, true);
    b.finish()
}

#[derive(Default)]
struct TreeBuilder {
    names: Vec<String>,
    name_ids: HashMap<String, u32>,
    nodes: Vec<BuildNode>,
}

/// A node being built: (parent, name, children by name, [cum, flat, base cum, base flat]).
type BuildNode = (u32, u32, HashMap<u32, u32>, [i64; 4]);

impl TreeBuilder {
    fn add(&mut self, rpt: &Report, reverse: bool, base: bool) {
        if self.nodes.is_empty() {
            self.nodes.push((0, u32::MAX, HashMap::new(), [0; 4]));
        }
        let (cum, flat) = if base { (2, 3) } else { (0, 1) };
        let mut path: Vec<u32> = Vec::new();
        // Each graph node's name id here, found once: looking its name up for every frame of
        // every sample (a string hash and compare each) was most of a large profile's tree.
        let mut memo = vec![u32::MAX; rpt.table.node_count()];
        for s in &rpt.profile.samples {
            let w = rpt.profile.value(s, rpt.index);
            if w <= 0 {
                continue;
            }
            path.clear();
            for l in rpt.profile.stack(s).rev() {
                for &id in rpt.table.loc_nodes(l).iter().rev() {
                    let n = match memo.get(id as usize) {
                        Some(&n) if n != u32::MAX => n,
                        _ => {
                            let name = rpt.names().get(id);
                            let n = match self.name_ids.get(name) {
                                Some(&n) => n,
                                None => {
                                    let n = self.names.len() as u32;
                                    self.names.push(name.to_owned());
                                    self.name_ids.insert(name.to_owned(), n);
                                    n
                                }
                            };
                            if let Some(m) = memo.get_mut(id as usize) {
                                *m = n;
                            }
                            n
                        }
                    };
                    path.push(n);
                }
            }
            if reverse {
                path.reverse();
            }
            self.nodes[0].3[cum] += w;
            let mut at = 0usize;
            for &name in &path {
                let next = self.nodes.len() as u32;
                let child = *self.nodes[at].2.entry(name).or_insert(next);
                if child == next {
                    self.nodes.push((at as u32, name, HashMap::new(), [0; 4]));
                }
                at = child as usize;
                self.nodes[at].3[cum] += w;
            }
            self.nodes[at].3[flat] += w;
        }
    }

    /// Depth-first, heaviest child first (by the new value, then the base's, then name).
    fn finish(self) -> FlameTree {
        let mut out = FlameTree {
            names: self.names,
            nodes: Vec::with_capacity(self.nodes.len()),
        };
        if self.nodes.is_empty() {
            out.nodes.push(FlameNode {
                name: u32::MAX,
                ..FlameNode::default()
            });
            return out;
        }
        // (builder node, parent's new position, depth)
        let mut stack = vec![(0usize, 0u32, 0u32)];
        while let Some((n, parent, depth)) = stack.pop() {
            let (_, name, children, v) = &self.nodes[n];
            let at = out.nodes.len() as u32;
            out.nodes.push(FlameNode {
                parent,
                name: *name,
                depth,
                cum: v[0],
                flat: v[1],
                base_cum: v[2],
                base_flat: v[3],
            });
            let mut kids: Vec<usize> = children.values().map(|&c| c as usize).collect();
            let key = |c: usize| {
                let v = self.nodes[c].3;
                (v[0], v[2])
            };
            let names = &out.names;
            kids.sort_by(|&a, &b| {
                key(b).cmp(&key(a)).then_with(|| {
                    names[self.nodes[a].1 as usize].cmp(&names[self.nodes[b].1 as usize])
                })
            });
            // Pushed lightest first, so the heaviest is visited (and placed) first.
            for &c in kids.iter().rev() {
                stack.push((c, at, depth + 1));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::build;
    use crate::views::{Options, View};

    fn report(stacks: &[(&str, i64)]) -> Report {
        Report::new(build(stacks), View::Flame, &Options::default()).unwrap()
    }

    /// Each node's path and values, as `a;b value` lines.
    fn paths(t: &FlameTree) -> Vec<(String, i64, i64, i64)> {
        let mut path: Vec<String> = Vec::new();
        let mut out = Vec::new();
        for n in &t.nodes[1..] {
            path.truncate(n.depth as usize - 1);
            path.push(t.names[n.name as usize].clone());
            out.push((path.join(";"), n.cum, n.flat, n.base_cum));
        }
        out
    }

    #[test]
    fn the_flame_tree_has_every_call_path_heaviest_first_with_cum_and_flat() {
        let rpt = report(&[
            ("main;parse;tokenize", 5),
            ("main;parse", 2),
            ("main;write", 4),
            ("main;parse;tokenize", 1),
            ("idle", 3),
        ]);
        let t = flame_tree(&rpt, false);
        assert_eq!(t.nodes[0].cum, 15);
        assert_eq!(
            paths(&t),
            [
                ("main".into(), 12, 0, 0),
                ("main;parse".into(), 8, 2, 0),
                ("main;parse;tokenize".into(), 6, 6, 0),
                ("main;write".into(), 4, 4, 0),
                ("idle".into(), 3, 3, 0),
            ]
        );
        // The leaves' flat values are the folded stacks' values.
        let folded: i64 = flame_folded(&rpt, false).iter().map(|f| f.1).sum();
        assert_eq!(folded, t.nodes.iter().map(|n| n.flat).sum::<i64>());
        // Reversed: leaf first.
        let r = flame_tree(&rpt, true);
        assert_eq!(paths(&r)[0], ("tokenize".into(), 6, 0, 0));
    }

    #[test]
    fn a_differential_tree_holds_both_reports_on_the_union_of_their_paths() {
        let base = report(&[("main;parse", 4), ("main;old", 2)]);
        let new = report(&[("main;parse", 7), ("main;new", 1)]);
        let t = diff_flame_tree(&base, &new, false);
        assert_eq!((t.nodes[0].cum, t.nodes[0].base_cum), (8, 6));
        let p = paths(&t);
        assert!(p.contains(&("main;parse".into(), 7, 7, 4)), "{p:?}");
        assert!(p.contains(&("main;old".into(), 0, 0, 2)), "{p:?}");
        assert!(p.contains(&("main;new".into(), 1, 1, 0)), "{p:?}");
    }
}
