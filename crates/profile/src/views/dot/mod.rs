//! `graph`: the call graph in Graphviz's DOT language, as `go tool pprof -dot` writes it (its
//! `internal/graph/dotgraph.go`, `ComposeDot`). The graph is the report's pruned one (80 nodes
//! by default, entropy order, nodes and edges below their fractions of the total dropped,
//! residual edges another path explains removed); a legend box holds the header lines.
//!
//! Nodes are boxes labelled with the function's name split at `.` and `::` (package paths
//! shortened as pprof shortens them), its flat value and percentage and, when different, its
//! cum value (`of 1.76s (100%)`); the font grows from 8 to 24 points with the square root of
//! the flat value's share of the largest one; outline and fill go from grey to red with the
//! cum share (green for a negative one, in a diff). Edges carry their weight as label, are
//! thicker and pulled straighter the heavier they are, are dotted when residual (nodes
//! between them were dropped), and say `(inline)` when the call was inlined. Below a node,
//! small 3D boxes ("nodelets") break its value down by the samples' string labels and by
//! their `bytes` sizes (collapsed into at most 4 ranges), and count against the node limit,
//! as in pprof.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::{json, Value};

use super::graph::{base_name, Edge, Graph, NodeInfo};
use super::measure::percentage;
use super::report::{Report, Trimmed};
use super::top::pct;

mod tags;
use tags::*;

/// The line pprof adds to the legend.
const HELP: &str = "\nSee https://git.io/JfYMW for how to read the graph";

/// Prunes the report's graph as pprof prunes it for DOT, picks its output unit, and returns
/// the graph, the legend lines (as pprof's `GetDOT`) and each node's tags.
///
/// In pprof's visual mode a node's tags count against the node limit: nodes are taken in
/// order, each costing one plus its number of tags (at most 4), until the limit is spent.
fn prepare(rpt: &mut Report) -> (Trimmed, Vec<String>, Vec<NodeTags>) {
    let samples = sample_tags(rpt);
    let mut cutoff = 0;
    let saved = rpt.node_count;
    if let Some(samples) = &samples {
        let (g, c) = pre_selection_graph(rpt);
        cutoff = c;
        if rpt.node_count > 0 {
            let tags = node_tags(rpt, &g, samples, cutoff);
            let mut count = 0;
            for (i, t) in tags.iter().enumerate() {
                count += t.count().min(MAX_NODELETS) + 1;
                if count >= rpt.node_count {
                    rpt.node_count = i + 1;
                    break;
                }
            }
        }
    }
    let t = rpt.trimmed_graph();
    rpt.node_count = saved;
    rpt.select_output_unit(&t.graph);
    let mut labels = rpt.labels(&t, t.dropped_edges);
    labels.push(HELP.to_string());
    let tags = match &samples {
        Some(samples) => node_tags(rpt, &t.graph, samples, cutoff),
        None => Vec::new(),
    };
    (t, labels, tags)
}

/// The graph pprof selects the top nodes from: the full graph without the nodes below the
/// node fraction, sorted; and the node cutoff.
fn pre_selection_graph(rpt: &Report) -> (Graph, i64) {
    let full = Graph::build(&rpt.profile, &rpt.table, rpt.index, None);
    let cutoff = ((full.flat_sum() as f64 * rpt.node_fraction) as i64).abs();
    let mut g = full;
    if cutoff > 0 {
        let mut kept = vec![false; rpt.table.len()];
        let mut count = 0;
        for n in &g.nodes {
            if n.cum.abs() >= cutoff {
                kept[n.id as usize] = true;
                count += 1;
            }
        }
        if count != g.nodes.len() {
            g = Graph::build(&rpt.profile, &rpt.table, rpt.index, Some(&kept));
        }
    }
    g.sort(rpt.order, rpt.names());
    (g, cutoff)
}

/// The graph's title: the main binary's base name (empty when unknown).
fn title(rpt: &Report) -> String {
    match rpt.profile.mappings.first() {
        Some(m) if !m.file.is_empty() => base_name(&m.file).to_string(),
        _ => String::new(),
    }
}

/// The live edges of a graph in pprof's order: heaviest first (by absolute weight), then by
/// caller and callee name.
fn sorted_edges<'a>(rpt: &Report, t: &'a Trimmed) -> Vec<&'a Edge> {
    let g = &t.graph;
    let mut edges: Vec<&Edge> = g.edges.iter().filter(|e| !e.removed).collect();
    let name = |n: u32| rpt.name(g, n as usize);
    edges.sort_by(|a, b| {
        if a.weight != b.weight {
            // pprof compares absolute weights only when the weights differ.
            return b.weight.abs().cmp(&a.weight.abs());
        }
        name(a.src)
            .cmp(name(b.src))
            .then_with(|| name(a.dst).cmp(name(b.dst)))
    });
    edges
}

/// The report's call graph as DOT, byte for byte as `go tool pprof -dot` writes it: nodes,
/// their "nodelets" (boxes for the sample labels and `bytes` sizes of the samples through
/// them), edges heaviest first, and the legend.
pub fn dot_text(rpt: &mut Report) -> String {
    let (t, labels, tags) = prepare(rpt);
    let rpt = &*rpt;
    let g = &t.graph;
    let title = title(rpt);
    let mut out = String::new();
    let graph_name = if title.is_empty() { "unnamed" } else { &title };
    out.push_str(&format!("digraph \"{}\" {{\n", escape(graph_name)));
    out.push_str("node [style=filled fillcolor=\"#f8f8f8\"]\n");
    // The legend.
    if let Some(first) = labels.first() {
        let all: Vec<String> = labels.iter().map(|l| escape(l)).collect();
        out.push_str(&format!(
            "subgraph cluster_L {{ \"{}\" [shape=box fontsize=16 label=\"{}\\l\"",
            escape(first),
            all.join("\\l")
        ));
        if !title.is_empty() {
            out.push_str(&format!(" tooltip=\"{}\"", escape(&title)));
        }
        out.push_str("] }\n");
    }
    if g.nodes.is_empty() {
        out.push_str("}\n");
        return out;
    }
    let max_flat = g.nodes.iter().map(|n| n.flat.abs()).max().unwrap_or(0) as f64;
    let total = rpt.total;
    let share = |v: i64| v as f64 / total.abs() as f64;
    let mut has_nodelets = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        let (flat, cum) = (n.flat, n.cum);
        let mut label = multiline_name(&rpt.info(g, i));
        let flat_value = rpt.format_value(flat);
        if flat != 0 {
            label.push_str(&format!(
                "{} ({})",
                flat_value,
                percentage(flat, total).trim()
            ));
        } else {
            label.push('0');
        }
        let mut cum_value = flat_value;
        if cum != flat {
            label.push_str(if flat != 0 { "\\n" } else { " " });
            cum_value = rpt.format_value(cum);
            label.push_str(&format!(
                "of {} ({})",
                cum_value,
                percentage(cum, total).trim()
            ));
        }
        // Font sizes from 8 to 24 points, growing with the square root of the flat share.
        let mut font_size = 8;
        if max_flat != 0.0 && flat != 0 && flat.abs() as f64 <= max_flat {
            font_size += (16.0 * (flat.abs() as f64 / max_flat).sqrt()).ceil() as i64;
        }
        out.push_str(&format!(
            "N{id} [label=\"{label}\" id=\"node{id}\" fontsize={font_size} shape=box \
             tooltip=\"{tooltip} ({cum_value})\" color=\"{color}\" fillcolor=\"{fill}\"]\n",
            id = i + 1,
            tooltip = escape(rpt.name(g, i)),
            color = dot_color(share(cum), false),
            fill = dot_color(share(cum), true),
        ));
        if let Some(tags) = tags.get(i) {
            let has_outs = n.outs.iter().any(|&e| !g.edges[e as usize].removed);
            let lets = nodelets(rpt, tags, i + 1, has_outs);
            has_nodelets[i] = !lets.is_empty();
            out.push_str(&lets);
        }
    }
    for e in sorted_edges(rpt, &t) {
        let w = rpt.format_value(e.weight);
        let inline = if e.inline { "\\n (inline)" } else { "" };
        let mut attr = format!("label=\" {w}{inline}\"");
        if total != 0 {
            // Integer arithmetic, as pprof's (a diff's edge may outweigh the total).
            let scaled = |by: i128, max: i128| {
                (i128::from(e.weight) * by / i128::from(total))
                    .abs()
                    .min(max) as i64
                    + 1
            };
            let weight = scaled(100, 100);
            if weight > 1 {
                attr.push_str(&format!(" weight={weight}"));
            }
            let width = scaled(5, 5);
            if width > 1 {
                attr.push_str(&format!(" penwidth={width}"));
            }
            attr.push_str(&format!(" color=\"{}\"", dot_color(share(e.weight), false)));
        }
        let arrow = if e.residual { "..." } else { "->" };
        let tooltip = format!(
            "\"{} {arrow} {} ({w})\"",
            escape(rpt.name(g, e.src as usize)),
            escape(rpt.name(g, e.dst as usize))
        );
        attr.push_str(&format!(" tooltip={tooltip} labeltooltip={tooltip}"));
        if e.residual {
            attr.push_str(" style=\"dotted\"");
        }
        if has_nodelets[e.src as usize] {
            // Callees further away, below the nodelets.
            attr.push_str(" minlen=2");
        }
        out.push_str(&format!("N{} -> N{} [{attr}]\n", e.src + 1, e.dst + 1));
    }
    out.push_str("}\n");
    out
}

/// The call graph as JSON: the legend lines, the nodes (in display order) and the edges
/// (heaviest first), with raw values in the sample unit.
pub fn graph_json(rpt: &mut Report) -> Value {
    let (t, labels, _) = prepare(rpt);
    let rpt = &*rpt;
    let g = &t.graph;
    let nodes: Vec<Value> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({
                "id": i + 1,
                "name": rpt.name(g, i),
                "flat": n.flat,
                "cum": n.cum,
                "flat_pct": pct(n.flat, rpt.total),
                "cum_pct": pct(n.cum, rpt.total),
                "flat_text": rpt.format_value(n.flat),
                "cum_text": rpt.format_value(n.cum),
            })
        })
        .collect();
    let edges: Vec<Value> = sorted_edges(rpt, &t)
        .iter()
        .map(|e| {
            json!({
                "from": rpt.name(g, e.src as usize),
                "to": rpt.name(g, e.dst as usize),
                "weight": e.weight,
                "inline": e.inline,
                "residual": e.residual,
            })
        })
        .collect();
    let labels: Vec<&str> = labels
        .iter()
        .filter(|l| l.as_str() != HELP)
        .map(String::as_str)
        .collect();
    json!({
        "view": "graph",
        "title": title(rpt),
        "sample_type": rpt.sample_type.ty,
        "unit": rpt.sample_type.unit,
        "total": rpt.total,
        "labels": labels,
        "warnings": rpt.warnings,
        "nodes": nodes,
        "edges": edges,
    })
}

/// pprof's `dotColor`: a score in [-1, 1] from green (-1) through grey (0) to red (1); a
/// light colour for backgrounds, a dark one for outlines and edges.
fn dot_color(score: f64, background: bool) -> String {
    const SHIFT: f64 = 0.7;
    let (mut saturation, value) = if background { (0.1, 0.93) } else { (1.0, 0.7) };
    // NaN (a zero total) is grey, as Go's comparisons leave it.
    let mut score = if score.is_nan() {
        score
    } else {
        score.clamp(-1.0, 1.0)
    };
    if score.abs() < 0.2 {
        saturation *= score.abs() / 0.2;
    }
    if score > 0.0 {
        score = score.powf(1.0 - SHIFT);
    }
    if score < 0.0 {
        score = -(-score).powf(1.0 - SHIFT);
    }
    let (r, g);
    if score < 0.0 {
        g = value;
        r = value * (1.0 + saturation * score);
    } else {
        r = value;
        g = value * (1.0 - saturation * score);
    }
    let b = value * (1.0 - saturation);
    let byte = |v: f64| (v * 255.0) as u8;
    format!("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b))
}

/// pprof's `multilinePrintableName`: the shortened name split into lines at `::` and `.`,
/// then the file's base name and line, or the binary, each line ending in `\n`.
fn multiline_name(info: &NodeInfo) -> String {
    let mut name = escape(&shorten_function_name(info.name));
    name = name.replace("::", "\\n");
    name = name.replace("[...]", "[…]");
    name = name.replace('.', "\\n");
    let mut parts: Vec<String> = Vec::new();
    if info.address != 0 {
        parts.push(format!("{:016x}", info.address));
    }
    if !name.is_empty() {
        parts.push(name);
    }
    let file = if info.file.is_empty() {
        String::new()
    } else {
        escape(base_name(info.file))
    };
    if info.lineno != 0 {
        parts.push(format!("{file}:{}", info.lineno));
    } else if !file.is_empty() {
        parts.push(file);
    } else if !info.name.is_empty() {
    } else if !info.objfile.is_empty() {
        parts.push(format!("[{}]", escape(base_name(info.objfile))));
    } else {
        parts.push("<unknown>".into());
    }
    let mut s = parts.join("\\n");
    s.push_str("\\n");
    s
}

/// pprof's `ShortenFunctionName`: drops Go package paths and module versions, Java packages
/// and argument lists, and C++ namespaces (keeping the class).
pub fn shorten_function_name(f: &str) -> String {
    struct Res {
        cpp_anonymous: Regex,
        go_ver: Regex,
        others: [Regex; 3],
    }
    static RES: OnceLock<Res> = OnceLock::new();
    // Go's `\w` and `\d` are ASCII-only: spelled out so that Unicode letters do not match.
    let res = RES.get_or_init(|| {
        let re = |s: &str| {
            let s = s.replace(r"\w", "[0-9A-Za-z_]").replace(r"\d", "[0-9]");
            Regex::new(&s).expect("pprof's expressions compile")
        };
        Res {
            cpp_anonymous: re(r"^\(anonymous namespace\)::"),
            go_ver: re(r"^(.*?)/v(?:[2-9]|[1-9][0-9]+)([./].*)$"),
            others: [
                // Go: package path.
                re(r"^(?:[\w\-\.]+/)+(.+)"),
                // Java: package and arguments.
                re(r"^(?:[a-z]\w*\.)*([A-Z][\w\$]*\.(?:<init>|[a-z][\w\$]*(?:\$\d+)?))(?:(?:\()|$)"),
                // C++: namespaces before a class.
                re(r"^(?:[_a-zA-Z]\w*::)+(_*[A-Z]\w*::~?[_a-zA-Z]\w*(?:<.*>)?)"),
            ],
        }
    });
    let f = res.cpp_anonymous.replace_all(f, "");
    let f = res.go_ver.replace_all(&f, "${1}${2}");
    for re in &res.others {
        if let Some(c) = re.captures(&f) {
            if c.len() >= 2 {
                return c
                    .iter()
                    .skip(1)
                    .map(|m| m.map_or("", |m| m.as_str()))
                    .collect();
            }
        }
    }
    f.into_owned()
}

/// pprof's `escapeForDot`: `\` and `"` escaped, newlines turned into left-justified breaks.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\l")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::build;
    use crate::views::{Options, View};
    use crate::{Label, ValueType};

    fn report(stacks: &[(&str, i64)]) -> Report {
        let mut p = build(stacks);
        p.sample_types = vec![ValueType::new("cpu", "nanoseconds")];
        Report::new(p, View::Graph, &Options::default()).unwrap()
    }

    #[test]
    fn small_graph_has_every_node_and_edge() {
        let ms = 1_000_000;
        let mut rpt = report(&[
            ("main;parse;tokenize", 60 * ms),
            ("main;parse", 20 * ms),
            ("main;work|helper", 20 * ms),
        ]);
        let dot = dot_text(&mut rpt);
        assert!(
            dot.starts_with("digraph \"unnamed\" {\nnode [style=filled fillcolor=\"#f8f8f8\"]\n")
        );
        assert!(dot.contains(
            "subgraph cluster_L { \"Type: cpu\" [shape=box fontsize=16 label=\"Type: cpu\\l\
             Showing nodes accounting for 100ms, 100% of 100ms total\\l\\l\
             See https://git.io/JfYMW for how to read the graph\\l\"] }\n"
        ));
        // Every node, labelled as pprof labels them.
        for label in [
            "label=\"main\\n0 of 100ms (100%)\"",
            "label=\"parse\\n20ms (20.00%)\\nof 80ms (80.00%)\"",
            "label=\"tokenize\\n60ms (60.00%)\"",
            "label=\"work\\n0 of 20ms (20.00%)\"",
            "label=\"helper\\n20ms (20.00%)\"",
        ] {
            assert!(dot.contains(label), "{label} missing:\n{dot}");
        }
        assert_eq!(dot.matches(" id=\"node").count(), 5, "{dot}");
        // tokenize has the largest flat value: 24 points; helper 8 + ceil(16 * sqrt(1/3)).
        assert!(dot.contains("tooltip=\"tokenize (60ms)\""), "{dot}");
        let line = |name: &str| {
            dot.lines()
                .find(|l| l.contains(&format!("tooltip=\"{name} (")))
                .unwrap()
                .to_string()
        };
        assert!(line("tokenize").contains("fontsize=24"));
        assert!(line("helper").contains("fontsize=18"));
        assert!(line("main").contains("fontsize=8"));
        // Every edge, heaviest first, with pprof's weight, width and the inline mark.
        let edges: Vec<&str> = dot.lines().filter(|l| l.contains(" -> ")).collect();
        assert_eq!(edges.len(), 4, "{dot}");
        assert!(edges[0].contains("label=\" 80ms\" weight=81 penwidth=5"));
        assert!(edges[0].contains("tooltip=\"main -> parse (80ms)\""));
        assert!(edges[1].contains("label=\" 60ms\" weight=61 penwidth=4"));
        assert!(edges[1].contains("tooltip=\"parse -> tokenize (60ms)\""));
        assert!(edges[2].contains("tooltip=\"main -> work (20ms)\""));
        assert!(edges[3].contains("label=\" 20ms\\n (inline)\" weight=21 penwidth=2"));
        assert!(edges[3].contains("tooltip=\"work -> helper (20ms)\""));
        assert!(dot.ends_with("}\n"));

        let json = graph_json(&mut rpt);
        assert_eq!(json["nodes"].as_array().unwrap().len(), 5);
        assert_eq!(json["edges"][3]["from"], "work");
        assert_eq!(json["edges"][3]["inline"], true);
        assert_eq!(json["edges"][0]["weight"], 80 * ms);
    }

    #[test]
    fn residual_edges_are_dotted() {
        let ms = 1_000_000;
        let stacks: Vec<(String, i64)> = vec![
            ("main;glue;leaf".to_string(), 50 * ms),
            ("main;other".to_string(), 50 * ms),
        ];
        let stacks: Vec<(&str, i64)> = stacks.iter().map(|(s, v)| (s.as_str(), *v)).collect();
        let p = {
            let mut p = build(&stacks);
            p.sample_types = vec![ValueType::new("cpu", "nanoseconds")];
            p
        };
        let options = Options {
            node_count: Some(3),
            ..Options::default()
        };
        let mut rpt = Report::new(p, View::Graph, &options).unwrap();
        let dot = dot_text(&mut rpt);
        assert!(dot.contains("Showing top 3 nodes out of 4"), "{dot}");
        let residual: Vec<&str> = dot
            .lines()
            .filter(|l| l.contains("style=\"dotted\""))
            .collect();
        assert_eq!(residual.len(), 1, "{dot}");
        assert!(
            residual[0].contains("tooltip=\"main ... leaf (50ms)\""),
            "{dot}"
        );
    }

    #[test]
    fn numeric_tags_become_nodelets_and_count_against_the_node_limit() {
        use crate::testutil::build_labeled;
        let bytes = |v: i64| {
            vec![Label::Num {
                key: "bytes".into(),
                value: v,
                unit: String::new(),
            }]
        };
        let p = build_labeled(&[
            ("main;alloc", 10, bytes(1024)),
            ("main;alloc", 20, bytes(2048)),
        ]);
        let mut rpt = Report::new(p.clone(), View::Graph, &Options::default()).unwrap();
        let dot = dot_text(&mut rpt);
        // alloc (N1) is a leaf: its sizes, heaviest first, with cum values.
        assert!(
            dot.contains(
                "N1 [label=\"alloc\\n30 (100%)\" id=\"node1\" fontsize=24 shape=box \
             tooltip=\"alloc (30)\" color=\"#b20000\" fillcolor=\"#edd5d5\"]\n\
             NN1_0 [label = \"2kB\" id=\"NN1_0\" fontsize=8 shape=box3d tooltip=\"20\"]\n\
             N1 -> NN1_0 [label=\" 20\" weight=100 tooltip=\"20\" labeltooltip=\"20\"]\n\
             NN1_1 [label = \"1kB\" id=\"NN1_1\" fontsize=8 shape=box3d tooltip=\"10\"]\n\
             N1 -> NN1_1 [label=\" 10\" weight=100 tooltip=\"10\" labeltooltip=\"10\"]\n\
             N2 [label=\"main\\n0 of 30 (100%)\""
            ),
            "{dot}"
        );
        // With 2 nodes allowed, alloc and its 2 tags spend the budget: pprof shows 1 node.
        let options = Options {
            node_count: Some(2),
            ..Options::default()
        };
        let mut rpt = Report::new(p, View::Graph, &options).unwrap();
        let dot = dot_text(&mut rpt);
        assert!(dot.contains("Showing top 1 nodes out of 2"), "{dot}");
        assert_eq!(dot.matches(" id=\"node").count(), 1, "{dot}");
    }

    #[test]
    fn colors_and_names_match_pprof() {
        // Values from `go tool pprof -dot` on sample.cpu.pb.gz.
        assert_eq!(dot_color(1.0, false), "#b20000");
        assert_eq!(dot_color(1.0, true), "#edd5d5");
        assert_eq!(dot_color(0.13 / 1.76, false), "#b29470");
        assert_eq!(dot_color(0.13 / 1.76, true), "#ede9e4");
        assert_eq!(dot_color(-1.0, false), "#00b200");
        assert_eq!(
            shorten_function_name("github.com/a/b/v2/pkg.Func"),
            "pkg.Func"
        );
        assert_eq!(
            shorten_function_name("runtime.(*bmap).overflow"),
            "runtime.(*bmap).overflow"
        );
        assert_eq!(shorten_function_name("com.google.Foo.bar(int)"), "Foo.bar");
        assert_eq!(
            shorten_function_name("(anonymous namespace)::ns::Class::method"),
            "Class::method"
        );
        let info = NodeInfo {
            name: "runtime.(*bmap).overflow",
            ..NodeInfo::default()
        };
        assert_eq!(multiline_name(&info), "runtime\\n(*bmap)\\noverflow\\n");
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\ld");
    }
}
