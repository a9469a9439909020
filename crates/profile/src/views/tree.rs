//! `peek` (each matching node with its callers above and callees below, as pprof's `-peek`)
//! and `tree` (the indented top-down call tree with cum%).

use std::collections::HashMap;

use regex::Regex;
use serde_json::{json, Value};

use super::graph::NodeNames;
use super::measure::percentage;
use super::report::Report;
use super::top::pct;

const SEPARATOR: &str = "----------------------------------------------------------+-------------";
const LEGEND: &str = "      flat  flat%   sum%        cum   cum%   calls calls% + context \t \t ";

/// `peek REGEX` as pprof prints it: for every node whose name matches, its callers with the
/// weight of each call, the node, and its callees. `Err` when nothing matches.
pub fn peek_text(rpt: &mut Report, rx: &Regex) -> Result<String, String> {
    let t = rpt.trimmed_graph();
    rpt.select_output_unit(&t.graph);
    let g = &t.graph;
    let mut out = String::new();
    for l in rpt.labels(&t, 0) {
        out.push_str(&l);
        out.push('\n');
    }
    out.push_str(SEPARATOR);
    out.push('\n');
    out.push_str(LEGEND);
    out.push('\n');
    let mut flat_sum = 0i64;
    let mut matched = 0;
    let names = rpt.names();
    let name_of = |n: u32| names.get(g.nodes[n as usize].id);
    for i in 0..g.nodes.len() {
        let name = rpt.name(g, i);
        if !rx.is_match(name) {
            continue;
        }
        matched += 1;
        let (flat, cum) = (g.nodes[i].flat, g.nodes[i].cum);
        out.push_str(SEPARATOR);
        out.push('\n');
        // One caller or callee: the call's weight, its share of this node's cum, the name.
        let edge_line = |out: &mut String, weight: i64, other: u32, inline: bool| {
            out.push_str(&format!(
                "{:>50} {} |   {}{}\n",
                rpt.format_value(weight),
                percentage(weight, cum),
                name_of(other),
                if inline { " (inline)" } else { "" }
            ));
        };
        for e in g.sorted_ins(i, names) {
            edge_line(&mut out, e.weight, e.src, e.inline);
        }
        flat_sum += flat;
        out.push_str(&format!(
            "{:>10} {} {} {:>10} {}                | {}\n",
            rpt.format_value(flat),
            percentage(flat, rpt.total),
            percentage(flat_sum, rpt.total),
            rpt.format_value(cum),
            percentage(cum, rpt.total),
            name
        ));
        for e in g.sorted_outs(i, names) {
            edge_line(&mut out, e.weight, e.dst, e.inline);
        }
    }
    if !g.nodes.is_empty() {
        out.push_str(SEPARATOR);
        out.push('\n');
    }
    if matched == 0 {
        return Err(format!("no matches found for regexp: {}", rx.as_str()));
    }
    Ok(out)
}

/// `peek REGEX` as JSON: per matching node, its callers and callees with weights.
pub fn peek_json(rpt: &mut Report, rx: &Regex) -> Result<Value, String> {
    let t = rpt.trimmed_graph();
    rpt.select_output_unit(&t.graph);
    let g = &t.graph;
    let names = rpt.names();
    let name_of = |n: u32| names.get(g.nodes[n as usize].id).to_string();
    let mut nodes = Vec::new();
    for i in 0..g.nodes.len() {
        let name = rpt.name(g, i);
        if !rx.is_match(name) {
            continue;
        }
        let edge = |w: i64, other: String, inline: bool| json!({"name": other, "weight": w, "inline": inline});
        let callers: Vec<Value> = g
            .sorted_ins(i, names)
            .iter()
            .map(|e| edge(e.weight, name_of(e.src), e.inline))
            .collect();
        let callees: Vec<Value> = g
            .sorted_outs(i, names)
            .iter()
            .map(|e| edge(e.weight, name_of(e.dst), e.inline))
            .collect();
        nodes.push(json!({
            "name": name,
            "flat": g.nodes[i].flat,
            "cum": g.nodes[i].cum,
            "flat_pct": pct(g.nodes[i].flat, rpt.total),
            "cum_pct": pct(g.nodes[i].cum, rpt.total),
            "callers": callers,
            "callees": callees,
        }));
    }
    if nodes.is_empty() {
        return Err(format!("no matches found for regexp: {}", rx.as_str()));
    }
    Ok(json!({
        "view": "peek",
        "sample_type": rpt.sample_type.ty,
        "unit": rpt.sample_type.unit,
        "total": rpt.total,
        "labels": rpt.labels(&t, 0),
        "nodes": nodes,
    }))
}

/// A call tree: children by node id, with cum and flat.
struct CallTree {
    /// (node id, cum, flat, children) per tree node; 0 is the root.
    nodes: Vec<TreeNode>,
}

struct TreeNode {
    id: u32,
    cum: i64,
    flat: i64,
    children: HashMap<u32, u32>,
}

impl CallTree {
    fn build(rpt: &Report) -> CallTree {
        let mut nodes = vec![TreeNode {
            id: u32::MAX,
            cum: 0,
            flat: 0,
            children: HashMap::new(),
        }];
        for s in &rpt.profile.samples {
            let w = rpt.profile.value(s, rpt.index);
            if w == 0 {
                continue;
            }
            nodes[0].cum += w;
            let mut at = 0usize;
            for l in rpt.profile.stack(s).rev() {
                for &id in rpt.table.loc_nodes(l).iter().rev() {
                    let next = nodes.len() as u32;
                    let child = *nodes[at].children.entry(id).or_insert(next);
                    if child == next {
                        nodes.push(TreeNode {
                            id,
                            cum: 0,
                            flat: 0,
                            children: HashMap::new(),
                        });
                    }
                    at = child as usize;
                    nodes[at].cum += w;
                }
            }
            nodes[at].flat += w;
        }
        CallTree { nodes }
    }

    /// Children of `n`, heaviest first, then by name.
    fn sorted_children(&self, n: usize, names: NodeNames<'_>) -> Vec<usize> {
        let mut c: Vec<usize> = self.nodes[n]
            .children
            .values()
            .map(|&c| c as usize)
            .collect();
        c.sort_by(|&a, &b| {
            let (na, nb) = (&self.nodes[a], &self.nodes[b]);
            nb.cum
                .abs()
                .cmp(&na.cum.abs())
                .then_with(|| names.get(na.id).cmp(names.get(nb.id)))
        });
        c
    }
}

/// Indentation shown at most this deep; deeper levels print their depth instead.
const MAX_INDENT: usize = 48;

/// `tree`: the call tree from the roots down, one line per call path with cum, cum% and flat;
/// paths below `--nodefraction` of the total (default 0.005) are summarised per parent.
pub fn tree_text(rpt: &mut Report) -> String {
    let tree = CallTree::build(rpt);
    let fraction = rpt.options.node_fraction.unwrap_or(0.005);
    let cutoff = ((rpt.total as f64) * fraction) as i64;
    // Unit: chosen from the whole graph, as the other views do.
    let g = rpt.full_graph();
    rpt.select_output_unit(&g);
    let mut out = String::new();
    for l in rpt.profile_labels() {
        out.push_str(&l);
        out.push('\n');
    }
    out.extend(rpt.legend.iter().map(|l| format!("{l}\n")));
    out.push_str(&format!(
        "Call tree, {} total; paths under {} (nodefraction {fraction}) summarised\n",
        rpt.format_value(rpt.total),
        rpt.format_value(cutoff)
    ));
    out.push_str(&format!(
        "{:>10} {:>6} {:>10}  name\n",
        "cum", "cum%", "flat"
    ));
    let names = rpt.names();
    // Iterative depth-first walk: stacks can be deep.
    let mut stack: Vec<Item> = vec![Item::Children(0, 0)];
    while let Some(item) = stack.pop() {
        match item {
            Item::Children(n, depth) => {
                let children = tree.sorted_children(n, names);
                let (shown, small): (Vec<usize>, Vec<usize>) = children
                    .into_iter()
                    .partition(|&c| tree.nodes[c].cum.abs() >= cutoff.max(1));
                if !small.is_empty() {
                    let cum = small.iter().map(|&c| tree.nodes[c].cum).sum();
                    stack.push(Item::Rest(small.len(), cum, depth));
                }
                for c in shown.into_iter().rev() {
                    stack.push(Item::Node(c, depth));
                }
            }
            Item::Node(n, depth) => {
                let node = &tree.nodes[n];
                out.push_str(&format!(
                    "{:>10} {} {:>10}  {}{}\n",
                    rpt.format_value(node.cum),
                    percentage(node.cum, rpt.total),
                    rpt.format_value(node.flat),
                    indent(depth),
                    names.get(node.id)
                ));
                stack.push(Item::Children(n, depth + 1));
            }
            Item::Rest(count, cum, depth) => {
                out.push_str(&format!(
                    "{:>10} {} {:>10}  {}({count} more below the cutoff)\n",
                    rpt.format_value(cum),
                    percentage(cum, rpt.total),
                    "",
                    indent(depth),
                ));
            }
        }
    }
    out
}

/// A step of the tree walk.
enum Item {
    /// Push the children of a tree node, at a depth.
    Children(usize, usize),
    /// Print a tree node.
    Node(usize, usize),
    /// Print the summary of small children: count, cum, depth.
    Rest(usize, i64, usize),
}

fn indent(depth: usize) -> String {
    if depth <= MAX_INDENT {
        "  ".repeat(depth)
    } else {
        format!("{}[depth {depth}] ", "  ".repeat(MAX_INDENT))
    }
}

/// `tree` as JSON: nested objects `{name, cum, flat, children}` down to the cutoff (nesting
/// is limited to the first 256 levels; deeper paths are summarised, since JSON readers
/// recurse).
pub fn tree_json(rpt: &mut Report) -> Value {
    const MAX_JSON_DEPTH: usize = 256;
    let tree = CallTree::build(rpt);
    let fraction = rpt.options.node_fraction.unwrap_or(0.005);
    let cutoff = (((rpt.total as f64) * fraction) as i64).max(1);
    let names = rpt.names();
    // Build bottom-up without recursion: post-order over the kept nodes.
    let mut order = Vec::new();
    let mut stack = vec![(0usize, 0usize)];
    while let Some((n, depth)) = stack.pop() {
        order.push((n, depth));
        if depth < MAX_JSON_DEPTH {
            for c in tree.sorted_children(n, names) {
                if tree.nodes[c].cum.abs() >= cutoff {
                    stack.push((c, depth + 1));
                }
            }
        }
    }
    let mut built: HashMap<usize, Value> = HashMap::new();
    for &(n, depth) in order.iter().rev() {
        let kids: Vec<Value> = if depth < MAX_JSON_DEPTH {
            tree.sorted_children(n, names)
                .into_iter()
                .filter_map(|c| built.remove(&c))
                .collect()
        } else {
            Vec::new()
        };
        let node = &tree.nodes[n];
        let name = if n == 0 {
            "root".to_string()
        } else {
            names.get(node.id).to_string()
        };
        built.insert(
            n,
            json!({"name": name, "cum": node.cum, "flat": node.flat, "children": kids}),
        );
    }
    json!({
        "view": "tree",
        "sample_type": rpt.sample_type.ty,
        "unit": rpt.sample_type.unit,
        "total": rpt.total,
        "cutoff": cutoff,
        "root": built.remove(&0).unwrap_or(Value::Null),
    })
}
