//! [`Report`]: a profile prepared for one view as pprof's driver prepares it, and
//! [`Trimmed`], its call graph pruned for display.

use super::graph::{self, Aggregation, Graph, NodeInfo, NodeTable, Order};
use super::measure;
use super::options::{Granularity, Options, Sort, View};
use crate::filter;
use crate::model::{Profile, ValueType};

/// A profile prepared for one view.
pub struct Report {
    pub(crate) profile: Profile,
    pub(crate) table: NodeTable,
    /// The sample value index used.
    pub index: usize,
    /// Its type.
    pub sample_type: ValueType,
    /// The total of that value over all samples (absolute values), before focus filters.
    pub total: i64,
    /// The unit values are printed in (`minimum` until a graph picks one).
    pub output_unit: String,
    pub(crate) node_count: usize,
    pub(crate) node_fraction: f64,
    pub(crate) edge_fraction: f64,
    pub(crate) order: Order,
    pub(crate) visual: bool,
    /// Filter legend lines (`Active filters:` ...).
    pub legend: Vec<String>,
    /// Warnings (a filter matched nothing, ...).
    pub warnings: Vec<String>,
    /// The options.
    pub options: Options,
}

/// A graph pruned for display, with what pruning removed.
pub struct Trimmed {
    /// The graph, nodes in display order.
    pub graph: Graph,
    /// Nodes before the node-count limit.
    pub orig_count: usize,
    /// Nodes dropped for being below the node fraction.
    pub dropped_nodes: usize,
    /// Edges dropped for being below the edge fraction.
    pub dropped_edges: usize,
}

impl Report {
    /// Prepares `profile` for `view`.
    pub fn new(mut profile: Profile, view: View, options: &Options) -> Result<Report, String> {
        let index = match &options.sample_index {
            Some(spec) => profile.sample_index(spec)?,
            None => profile.default_sample_index(),
        };
        let sample_type = profile.sample_types.get(index).cloned().unwrap_or_default();
        // A drop_frames regex that does not compile prunes nothing (as pprof), with a warning.
        let mut warnings = Vec::new();
        if let Err(e) = filter::remove_uninteresting(&mut profile) {
            warnings.push(format!(
                "the profile's drop_frames/keep_frames ignored: {e}"
            ));
        }
        let total = compute_total(&profile, index);
        let applied = filter::apply(&mut profile, &options.filters)?;
        let (mut granularity, mut trim, mut node_count) =
            (options.granularity, true, options.node_count);
        let mut obj_names = false;
        match view {
            View::Top => {}
            View::Peek | View::Flame => trim = false,
            View::List => {
                trim = false;
                granularity = Granularity::Lines;
                obj_names = true;
            }
            View::Graph => node_count = Some(node_count.unwrap_or(80)),
        }
        let (mut node_fraction, mut edge_fraction) = (
            options.node_fraction.unwrap_or(0.005),
            options.edge_fraction.unwrap_or(0.001),
        );
        let mut node_count = node_count.unwrap_or(0);
        if !trim {
            node_count = 0;
            node_fraction = 0.0;
            edge_fraction = 0.0;
        }
        let agg = Aggregation::new(granularity, options.inlines, obj_names);
        let trims: Vec<String> = options
            .trim_path
            .split(':')
            .filter(|s| !s.is_empty())
            .map(|s| s.trim_end_matches('/').to_string())
            .collect();
        let trim_fn = |path: &str| trim_path(path, &trims);
        let table = NodeTable::new(&profile, agg, &trim_fn);
        let order = match (view, options.sort) {
            (View::Graph, _) => Order::Entropy,
            (_, Sort::Cum) => Order::CumName,
            (_, Sort::Flat) => Order::FlatName,
        };
        Ok(Report {
            profile,
            table,
            index,
            sample_type,
            total,
            output_unit: options.unit.clone(),
            node_count,
            node_fraction,
            edge_fraction,
            order,
            visual: view == View::Graph,
            legend: applied.legend,
            warnings: {
                warnings.extend(applied.warnings);
                warnings
            },
            options: options.clone(),
        })
    }

    /// The profile after filtering.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The printable name of a graph node.
    pub fn name(&self, g: &Graph, node: usize) -> &str {
        self.names().get(g.nodes[node].id)
    }

    /// What identifies a graph node.
    pub fn info(&self, g: &Graph, node: usize) -> NodeInfo<'_> {
        self.table.info(&self.profile, g.nodes[node].id)
    }

    /// Node names by node id (`names[id]`).
    pub(crate) fn names(&self) -> graph::NodeNames<'_> {
        self.table.names(&self.profile)
    }

    /// The full graph: every node with a value, unpruned, in the view's order.
    pub fn full_graph(&self) -> Graph {
        let mut g = Graph::build(&self.profile, &self.table, self.index, None);
        g.sort(self.order, self.names());
        g
    }

    /// The graph pruned as pprof prunes it for this view.
    pub fn trimmed_graph(&self) -> Trimmed {
        // A values-only pass decides which nodes survive the node fraction; the graph with
        // its edges is then built once, over those nodes only (pprof builds the full graph
        // first; the result is the same, without holding every edge of a 20k-function
        // profile in memory).
        let (flat, cum) = Graph::node_values(&self.profile, &self.table, self.index);
        let total_value: i64 = flat.iter().sum();
        let live = (0..flat.len())
            .filter(|&i| flat[i] != 0 || cum[i] != 0)
            .count();
        let node_cutoff = (total_value as f64 * self.node_fraction) as i64;
        let node_cutoff = node_cutoff.abs();
        let edge_cutoff = ((total_value as f64 * self.edge_fraction) as i64).abs();
        let mut dropped_nodes = 0;
        let mut kept = None;
        if node_cutoff > 0 {
            let keep: Vec<bool> = (0..flat.len())
                .map(|i| (flat[i] != 0 || cum[i] != 0) && cum[i].abs() >= node_cutoff)
                .collect();
            let count = keep.iter().filter(|&&k| k).count();
            if count != live {
                dropped_nodes = live - count;
                kept = Some(keep);
            }
        }
        drop((flat, cum));
        let mut g = Graph::build(&self.profile, &self.table, self.index, kept.as_deref());
        drop(kept);
        let orig_count = g.nodes.len();
        g.sort(self.order, self.names());
        if self.node_count > 0 {
            g.trim_edges(edge_cutoff);
            if self.node_count < g.nodes.len() {
                let mut kept = vec![false; self.table.len()];
                for n in &g.nodes[..self.node_count] {
                    kept[n.id as usize] = true;
                }
                drop(std::mem::take(&mut g));
                g = Graph::build(&self.profile, &self.table, self.index, Some(&kept));
                g.sort(self.order, self.names());
            }
        }
        let dropped_edges = g.trim_edges(edge_cutoff);
        if self.visual {
            g.remove_redundant_edges(self.names());
        }
        Trimmed {
            graph: g,
            orig_count,
            dropped_nodes,
            dropped_edges,
        }
    }

    /// Picks the output unit from the graph's smallest and largest values, as pprof does
    /// (when `--unit` is `minimum`).
    pub fn select_output_unit(&mut self, g: &Graph) {
        if self.output_unit != "minimum" || g.nodes.is_empty() {
            return;
        }
        let mut min = 0i64;
        for n in &g.nodes {
            let mut v = n.flat.abs();
            if v == 0 {
                v = n.cum.abs();
            }
            if v > 0 && (min == 0 || v < min) {
                min = v;
            }
        }
        let max = self.total;
        if min == 0 {
            min = max;
        }
        let unit_of = |v: i64| {
            measure::scale(v, &self.sample_type.unit, "minimum")
                .1
                .to_string()
        };
        let (min_unit, max_unit) = (unit_of(min), unit_of(max));
        let mut unit = min_unit.clone();
        if min_unit != max_unit && min.saturating_mul(100) < max {
            unit = unit_of(min.saturating_mul(100));
        }
        self.output_unit = if unit.is_empty() {
            self.sample_type.unit.clone()
        } else {
            unit
        };
    }

    /// A value in the output unit: `7.12s`.
    pub fn format_value(&self, v: i64) -> String {
        measure::scaled_label(v, &self.sample_type.unit, &self.output_unit)
    }

    /// The header lines pprof prints above a view: file, type, time, duration, filters,
    /// "Showing nodes accounting for ...", dropped nodes and edges, "Showing top N".
    pub fn labels(&self, t: &Trimmed, dropped_edges: usize) -> Vec<String> {
        let mut out = self.profile_labels();
        out.extend(self.legend.iter().cloned());
        let flat_sum = t.graph.flat_sum();
        out.push(format!(
            "Showing nodes accounting for {}, {} of {} total",
            self.format_value(flat_sum),
            measure::percentage(flat_sum, self.total).trim(),
            self.format_value(self.total)
        ));
        if self.total != 0 {
            let plural = |n: usize, what: &str| {
                if n > 1 {
                    format!("{what}s")
                } else {
                    what.to_string()
                }
            };
            if t.dropped_nodes > 0 {
                out.push(format!(
                    "Dropped {} {} (cum <= {})",
                    t.dropped_nodes,
                    plural(t.dropped_nodes, "node"),
                    self.format_value(((self.total as f64) * self.node_fraction) as i64)
                ));
            }
            if dropped_edges > 0 {
                out.push(format!(
                    "Dropped {} {} (freq <= {})",
                    dropped_edges,
                    plural(dropped_edges, "edge"),
                    self.format_value(((self.total as f64) * self.edge_fraction) as i64)
                ));
            }
            let shown = t.graph.nodes.len();
            if shown > 0 && shown < t.orig_count {
                out.push(format!("Showing top {shown} nodes out of {}", t.orig_count));
            }
        }
        out
    }

    /// File, build id, comments, type, time and duration.
    pub fn profile_labels(&self) -> Vec<String> {
        let p = &self.profile;
        let mut out = Vec::new();
        if let Some(m) = p.mappings.first() {
            if !m.file.is_empty() {
                out.push(format!("File: {}", graph::base_name(&m.file)));
            }
            if !m.build_id.is_empty() {
                out.push(format!("Build ID: {}", m.build_id));
            }
        }
        for c in &p.comments {
            if !c.starts_with('#') {
                out.push(c.clone());
            }
        }
        if !self.sample_type.ty.is_empty() {
            out.push(format!("Type: {}", self.sample_type.ty));
        }
        if p.time_nanos != 0 {
            out.push(format!("Time: {}", format_time(p.time_nanos)));
        }
        if p.duration_nanos != 0 {
            let duration = measure::label(p.duration_nanos, "nanoseconds");
            let (total_ns, unit) =
                measure::scale(self.total, &self.sample_type.unit, "nanoseconds");
            let ratio = if unit == "ns" && total_ns != 0.0 {
                format!(
                    "({})",
                    measure::percentage(total_ns as i64, p.duration_nanos)
                )
            } else {
                String::new()
            };
            out.push(format!(
                "Duration: {duration}, Total samples = {} {ratio}",
                self.format_value(self.total)
            ));
        }
        out
    }
}

/// Sum of absolute sample values at `index`.
fn compute_total(p: &Profile, index: usize) -> i64 {
    p.samples
        .iter()
        .map(|s| p.value(s, index).saturating_abs())
        .fold(0i64, |a, b| a.saturating_add(b))
}

/// Removes the first matching `--trim-path` prefix.
fn trim_path(path: &str, trims: &[String]) -> String {
    for t in trims {
        if let Some(rest) = path.strip_prefix(t.as_str()) {
            if rest.starts_with('/') {
                return rest.trim_start_matches('/').to_string();
            }
        }
    }
    path.to_string()
}

/// `Jan 2, 2006 at 3:04pm (UTC)`, as pprof prints a profile's time (in UTC here; pprof uses
/// the local zone).
fn format_time(nanos: i64) -> String {
    let secs = nanos.div_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (hour, minute) = (rem / 3600, (rem % 3600) / 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (h12, ampm) = match hour {
        0 => (12, "am"),
        1..=11 => (hour, "am"),
        12 => (12, "pm"),
        _ => (hour - 12, "pm"),
    };
    format!(
        "{} {day}, {year} at {h12}:{minute:02}{ampm} (UTC)",
        MONTHS[(month - 1) as usize]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_formats_as_pprof_in_utc() {
        // 2022-10-18 15:39:00 UTC
        assert_eq!(
            format_time(1_666_107_540_000_000_000),
            "Oct 18, 2022 at 3:39pm (UTC)"
        );
        assert_eq!(format_time(0), "Jan 1, 1970 at 12:00am (UTC)");
    }
}
