//! The call graph every view is computed from, built as pprof's `internal/graph` builds it so
//! that flat and cum values, node order and pruning are the same.
//!
//! A node is one distinct [`NodeInfo`] (function, file, line or address, depending on the
//! granularity); its flat value is the weight of samples whose leaf it is, its cum value the
//! weight of samples it appears in (once per sample, however often it recurs). An edge
//! `caller -> callee` carries the weight of samples in which the callee is called from the
//! caller; it is *inline* when the call was inlined, *residual* when nodes between the two were
//! dropped.

use rustc_hash::FxHashMap;

use crate::model::Profile;

mod node;
pub use node::{base_name, clean_path, NodeInfo};
pub(crate) use node::{Aggregation, NodeNames, NodeTable};

/// A node of a built graph.
#[derive(Debug, Clone)]
pub struct Node {
    /// Index in the report's node table (stable across the graphs of one report).
    pub id: u32,
    /// Weight of samples whose leaf this node is.
    pub flat: i64,
    /// Weight of samples this node is in.
    pub cum: i64,
    /// Incoming edges (indices into [`Graph::edges`]); callers.
    pub ins: Vec<u32>,
    /// Outgoing edges; callees.
    pub outs: Vec<u32>,
}

/// An edge of a built graph.
#[derive(Debug, Clone)]
pub struct Edge {
    /// Caller (index into [`Graph::nodes`]).
    pub src: u32,
    /// Callee.
    pub dst: u32,
    /// Weight of samples with this call.
    pub weight: i64,
    /// Nodes between the two were dropped.
    pub residual: bool,
    /// Every sample has this call inlined.
    pub inline: bool,
    /// Removed by trimming.
    pub removed: bool,
}

/// A call graph: the nodes with a non-zero value, in the order the view sorts them.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Edges (removed ones stay, flagged, so indices hold).
    pub edges: Vec<Edge>,
}

/// How nodes are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    FlatName,
    CumName,
    Entropy,
}

impl Graph {
    /// Builds the graph of `samples` (value at `index`); with `kept`, nodes outside it are
    /// left out and calls through them become residual edges.
    pub(crate) fn build(
        p: &Profile,
        table: &NodeTable,
        index: usize,
        kept: Option<&[bool]>,
    ) -> Graph {
        let n = table.len();
        let mut flat = vec![0i64; n];
        let mut cum = vec![0i64; n];
        let mut stamp = vec![u32::MAX; n];
        let mut edge_map: FxHashMap<u64, u32> = FxHashMap::default();
        let mut edges: Vec<Edge> = Vec::new();
        let mut edge_stamp: Vec<u32> = Vec::new();
        for (si, s) in p.samples.iter().enumerate() {
            let w = p.value(s, index);
            if w == 0 {
                continue;
            }
            let si = si as u32;
            let mut parent: Option<u32> = None;
            let mut residual = false;
            for l in p.stack(s).rev() {
                let nodes = table.loc_nodes(l);
                for (ni, &node) in nodes.iter().enumerate().rev() {
                    if kept.is_some_and(|k| !k[node as usize]) {
                        residual = true;
                        continue;
                    }
                    if stamp[node as usize] != si {
                        stamp[node as usize] = si;
                        cum[node as usize] += w;
                    }
                    if let Some(par) = parent.filter(|&par| par != node) {
                        let inline = ni != nodes.len() - 1;
                        let key = u64::from(par) << 32 | u64::from(node);
                        let e = *edge_map.entry(key).or_insert_with(|| {
                            edges.push(Edge {
                                src: par,
                                dst: node,
                                weight: 0,
                                residual: false,
                                inline: true,
                                removed: false,
                            });
                            edge_stamp.push(u32::MAX);
                            (edges.len() - 1) as u32
                        });
                        if edge_stamp[e as usize] != si {
                            edge_stamp[e as usize] = si;
                            let edge = &mut edges[e as usize];
                            edge.weight += w;
                            edge.residual |= residual;
                            edge.inline &= inline;
                        }
                    }
                    parent = Some(node);
                    residual = false;
                }
            }
            if let (Some(leaf), false) = (parent, residual) {
                flat[leaf as usize] += w;
            }
        }
        // The per-sample bookkeeping goes before the node list is built (peak memory).
        drop((edge_map, edge_stamp, stamp));
        // Keep nodes with a value; renumber edges onto them.
        let mut position = vec![u32::MAX; n];
        let mut nodes = Vec::new();
        for id in 0..n {
            if flat[id] != 0 || cum[id] != 0 {
                position[id] = nodes.len() as u32;
                nodes.push(Node {
                    id: id as u32,
                    flat: flat[id],
                    cum: cum[id],
                    ins: Vec::new(),
                    outs: Vec::new(),
                });
            }
        }
        let mut kept_edges = Vec::with_capacity(edges.len());
        for mut e in edges {
            let (s, d) = (position[e.src as usize], position[e.dst as usize]);
            if s == u32::MAX || d == u32::MAX {
                continue;
            }
            e.src = s;
            e.dst = d;
            let i = kept_edges.len() as u32;
            nodes[s as usize].outs.push(i);
            nodes[d as usize].ins.push(i);
            kept_edges.push(e);
        }
        Graph {
            nodes,
            edges: kept_edges,
        }
    }

    /// Flat and cum value of every node of the table, without edges: what pruning by node
    /// fraction needs (same attribution as [`Graph::build`] with no node left out).
    pub(crate) fn node_values(
        p: &Profile,
        table: &NodeTable,
        index: usize,
    ) -> (Vec<i64>, Vec<i64>) {
        let n = table.len();
        let (mut flat, mut cum) = (vec![0i64; n], vec![0i64; n]);
        let mut stamp = vec![u32::MAX; n];
        for (si, s) in p.samples.iter().enumerate() {
            let w = p.value(s, index);
            if w == 0 {
                continue;
            }
            let mut leaf = None;
            for l in p.stack(s).rev() {
                for &node in table.loc_nodes(l).iter().rev() {
                    if stamp[node as usize] != si as u32 {
                        stamp[node as usize] = si as u32;
                        cum[node as usize] += w;
                    }
                    leaf = Some(node);
                }
            }
            if let Some(leaf) = leaf {
                flat[leaf as usize] += w;
            }
        }
        (flat, cum)
    }

    /// Sum of flat values.
    pub fn flat_sum(&self) -> i64 {
        self.nodes.iter().map(|n| n.flat).sum()
    }

    /// The live incoming edges of node `i`, sorted as pprof sorts them (weight, then names).
    pub(crate) fn sorted_ins(&self, i: usize, table_names: NodeNames<'_>) -> Vec<&Edge> {
        self.sorted(&self.nodes[i].ins, table_names)
    }

    /// The live outgoing edges of node `i`, sorted.
    pub(crate) fn sorted_outs(&self, i: usize, table_names: NodeNames<'_>) -> Vec<&Edge> {
        self.sorted(&self.nodes[i].outs, table_names)
    }

    fn sorted(&self, list: &[u32], names: NodeNames<'_>) -> Vec<&Edge> {
        let mut v: Vec<&Edge> = list
            .iter()
            .map(|&e| &self.edges[e as usize])
            .filter(|e| !e.removed)
            .collect();
        let name = |n: u32| names.get(self.nodes[n as usize].id);
        v.sort_by(|a, b| {
            b.weight
                .abs()
                .cmp(&a.weight.abs())
                .then_with(|| name(a.src).cmp(name(b.src)))
                .then_with(|| name(a.dst).cmp(name(b.dst)))
        });
        v
    }

    /// Sorts nodes (edges keep pointing at the right nodes).
    pub(crate) fn sort(&mut self, order: Order, names: NodeNames<'_>) {
        let score: Vec<i64> = match order {
            Order::FlatName => Vec::new(),
            Order::CumName => self.nodes.iter().map(|n| n.cum).collect(),
            Order::Entropy => (0..self.nodes.len())
                .map(|i| self.entropy_score(i))
                .collect(),
        };
        let mut perm: Vec<usize> = (0..self.nodes.len()).collect();
        let name = |i: usize| names.get(self.nodes[i].id);
        let sprint = |i: usize| names.sprint(self.nodes[i].id);
        perm.sort_by(|&a, &b| {
            let (na, nb) = (&self.nodes[a], &self.nodes[b]);
            let ord = match order {
                Order::FlatName => nb
                    .flat
                    .abs()
                    .cmp(&na.flat.abs())
                    .then_with(|| name(a).cmp(name(b)))
                    .then_with(|| nb.cum.abs().cmp(&na.cum.abs())),
                Order::CumName | Order::Entropy => score[b]
                    .abs()
                    .cmp(&score[a].abs())
                    .then_with(|| name(a).cmp(name(b)))
                    .then_with(|| nb.flat.abs().cmp(&na.flat.abs())),
            };
            ord.then_with(|| sprint(a).cmp(&sprint(b)))
        });
        let mut position = vec![0u32; perm.len()];
        for (new, &old) in perm.iter().enumerate() {
            position[old] = new as u32;
        }
        let mut taken: Vec<Option<Node>> = std::mem::take(&mut self.nodes)
            .into_iter()
            .map(Some)
            .collect();
        let nodes: Vec<Node> = perm.iter().filter_map(|&old| taken[old].take()).collect();
        for e in &mut self.edges {
            e.src = position[e.src as usize];
            e.dst = position[e.dst as usize];
        }
        self.nodes = nodes;
    }

    fn live<'a>(&'a self, list: &'a [u32]) -> impl Iterator<Item = &'a Edge> + 'a {
        list.iter()
            .map(|&e| &self.edges[e as usize])
            .filter(|e| !e.removed)
    }

    fn entropy_score(&self, i: usize) -> i64 {
        let n = &self.nodes[i];
        let mut score = 0.0;
        if self.live(&n.ins).next().is_none() {
            score += 1.0;
        } else {
            score += self.edge_entropy(&n.ins, 0);
        }
        if self.live(&n.outs).next().is_none() {
            score += 1.0;
        } else {
            score += self.edge_entropy(&n.outs, n.flat);
        }
        (score * n.cum as f64) as i64 + n.flat
    }

    fn edge_entropy(&self, list: &[u32], own: i64) -> f64 {
        let mut total = own;
        for e in self.live(list) {
            if e.weight > 0 {
                total += e.weight.abs();
            }
        }
        let mut score = 0.0;
        if total != 0 {
            for e in self.live(list) {
                let frac = e.weight.abs() as f64 / total as f64;
                score += -frac * frac.log2();
            }
            if own > 0 {
                let frac = own.abs() as f64 / total as f64;
                score += -frac * frac.log2();
            }
        }
        score
    }

    /// Flags edges lighter than `cutoff` as removed; returns how many.
    pub(crate) fn trim_edges(&mut self, cutoff: i64) -> usize {
        let mut dropped = 0;
        for e in &mut self.edges {
            if !e.removed && e.weight.abs() < cutoff {
                e.removed = true;
                dropped += 1;
            }
        }
        dropped
    }

    /// Removes residual edges that another path already explains (pprof's
    /// `RemoveRedundantEdges`; DOT output only).
    pub(crate) fn remove_redundant_edges(&mut self, names: NodeNames<'_>) {
        for i in (0..self.nodes.len()).rev() {
            let ins: Vec<(u32, u32)> = {
                let sorted = self.sorted_ins(i, names);
                sorted.iter().map(|e| (e.src, e.dst)).collect()
            };
            for &(src, dst) in ins.iter().rev() {
                let Some(ei) = self.edge_index(src, dst) else {
                    continue;
                };
                if !self.edges[ei].residual {
                    break;
                }
                if self.is_redundant(ei) {
                    self.edges[ei].removed = true;
                }
            }
        }
    }

    fn edge_index(&self, src: u32, dst: u32) -> Option<usize> {
        self.nodes[src as usize]
            .outs
            .iter()
            .map(|&e| e as usize)
            .find(|&e| !self.edges[e].removed && self.edges[e].dst == dst)
    }

    fn is_redundant(&self, ei: usize) -> bool {
        let (src, start) = (self.edges[ei].src, self.edges[ei].dst);
        let mut seen = vec![false; self.nodes.len()];
        seen[start as usize] = true;
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(n) = queue.pop_front() {
            for &ie in &self.nodes[n as usize].ins {
                let e = &self.edges[ie as usize];
                if ie as usize == ei || e.removed || seen[e.src as usize] {
                    continue;
                }
                if e.src == src {
                    return true;
                }
                seen[e.src as usize] = true;
                queue.push_back(e.src);
            }
        }
        false
    }

    /// The "(inline)" / "(partial-inline)" label of node `i`, from its live incoming edges.
    pub fn inline_label(&self, i: usize) -> &'static str {
        let (mut inline, mut not) = (false, false);
        for e in self.live(&self.nodes[i].ins) {
            if e.inline {
                inline = true;
            } else {
                not = true;
            }
        }
        match (inline, not) {
            (true, true) => "(partial-inline)",
            (true, false) => "(inline)",
            _ => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_clean_as_go_does() {
        assert_eq!(clean_path("/a/b/../c//d/./e"), "/a/c/d/e");
        assert_eq!(clean_path("../x/../../y"), "../../y");
        assert_eq!(clean_path(""), ".");
        assert_eq!(base_name("/usr/lib/libc.so"), "libc.so");
        assert_eq!(base_name("prog"), "prog");
    }

    #[test]
    fn names_follow_pprof() {
        let mut i = NodeInfo {
            objfile: "/lib/libc.so",
            ..NodeInfo::default()
        };
        assert_eq!(i.printable_name(), "[libc.so]");
        i.objfile = "";
        assert_eq!(i.printable_name(), "<unknown>");
        i.name = "main";
        i.file = "/src/a.go";
        i.lineno = 12;
        i.address = 0x1234;
        assert_eq!(i.printable_name(), "0000000000001234 main /src/a.go:12");
    }
}
