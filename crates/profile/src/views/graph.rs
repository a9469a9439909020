//! The call graph every view is computed from, built as pprof's `internal/graph` builds it so
//! that flat and cum values, node order and pruning are the same.
//!
//! A node is one distinct [`NodeInfo`] (function, file, line or address, depending on the
//! granularity); its flat value is the weight of samples whose leaf it is, its cum value the
//! weight of samples it appears in (once per sample, however often it recurs). An edge
//! `caller -> callee` carries the weight of samples in which the callee is called from the
//! caller; it is *inline* when the call was inlined, *residual* when nodes between the two were
//! dropped.

use std::hash::BuildHasher;

use crate::{Line, Location, Profile, Span, StrId};

use super::Granularity;

/// What identifies a node; its printable name is [`NodeInfo::printable_name`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeInfo<'a> {
    /// The function's name ("" at files granularity or when unsymbolised).
    pub name: &'a str,
    /// The address (addresses granularity only).
    pub address: u64,
    /// The source file, cleaned (`filepath.Clean`).
    pub file: &'a str,
    /// The function's first line (only with an object file).
    pub start_line: i64,
    /// The line (lines and addresses granularity).
    pub lineno: i64,
    /// The binary, when the node has no function name (or for `list`).
    pub objfile: &'a str,
}

impl NodeInfo<'_> {
    /// The name pprof prints: address, function, `file:line`, or `[binary]`, or `<unknown>`.
    pub fn printable_name(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if self.address != 0 {
            parts.push(format!("{:016x}", self.address));
        }
        if !self.name.is_empty() {
            parts.push(self.name.to_string());
        }
        if self.lineno != 0 {
            parts.push(format!("{}:{}", self.file, self.lineno));
        } else if !self.file.is_empty() {
            parts.push(self.file.to_string());
        } else if !self.name.is_empty() {
        } else if !self.objfile.is_empty() {
            parts.push(format!("[{}]", base_name(self.objfile)));
        } else {
            parts.push("<unknown>".into());
        }
        parts.join(" ")
    }

    /// Go's `fmt.Sprint` of pprof's NodeInfo: the last tie-break when sorting.
    fn sprint(&self) -> String {
        format!(
            "{{{}  {} {} {} {} {}}}",
            self.name, self.address, self.file, self.start_line, self.lineno, self.objfile
        )
    }
}

/// The last element of a slash-separated path (Go's `filepath.Base`).
pub fn base_name(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return if path.is_empty() { "." } else { "/" };
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// Go's `filepath.Clean` (lexical: `.` and `..` elements, doubled slashes).
pub fn clean_path(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

use rustc_hash::FxHashMap;

/// Which parts of a location make a node, from the granularity.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Aggregation {
    inlines: bool,
    function: bool,
    filename: bool,
    linenumber: bool,
    address: bool,
    /// Always record the object file (the `list` view needs it).
    obj_names: bool,
}

impl Aggregation {
    pub(crate) fn new(g: Granularity, inlines: bool, obj_names: bool) -> Aggregation {
        let (function, filename, linenumber, address) = match g {
            Granularity::Addresses => (true, true, true, true),
            Granularity::Lines => (true, true, true, false),
            Granularity::Files => (false, true, false, false),
            Granularity::Functions => (true, false, false, false),
            Granularity::FileFunctions => (true, true, false, false),
        };
        // pprof does not aggregate at all at addresses granularity with inlines kept.
        Aggregation {
            inlines,
            function,
            filename,
            linenumber,
            address,
            obj_names,
        }
    }
}

/// A node's identity, compactly: `name` is a string of the profile, `file` and `objfile`
/// strings of the table. Strings are interned on both sides, so equal ids mean equal texts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Key {
    name: StrId,
    file: StrId,
    objfile: StrId,
    address: u64,
    start_line: i64,
    lineno: i64,
}

/// A printable name: a string of the profile (the function's name, the usual case), or of
/// the table when this bit is set.
const LOCAL: u32 = 1 << 31;

/// Nodes for every location of a profile: built once, reused by every graph of a report.
pub(crate) struct NodeTable {
    keys: Vec<Key>,
    /// Printable names (see [`LOCAL`]).
    names: Vec<u32>,
    /// Cleaned file names, binaries and composed printable names.
    local: crate::Strings,
    /// Per location, the span in `nodes` of its lines' nodes, innermost first (one node for
    /// a location without lines).
    loc_spans: Vec<Span>,
    nodes: Vec<u32>,
}

impl NodeTable {
    /// Builds the node table; `trim` rewrites source paths (`--trim-path`) first.
    pub(crate) fn new(p: &Profile, agg: Aggregation, trim: &dyn Fn(&str) -> String) -> NodeTable {
        // At most one node per line, or per location without lines: room for that many up
        // front, so that neither the keys nor the lookup grow (and briefly double) on the way.
        let bound: usize = p
            .locations
            .iter()
            .map(|l| lines_of(p, l, agg.inlines).len().max(1))
            .sum();
        let mut t = NodeTable {
            keys: Vec::with_capacity(bound),
            names: Vec::new(),
            local: Default::default(),
            loc_spans: Vec::with_capacity(p.locations.len()),
            nodes: Vec::with_capacity(bound),
        };
        let mut interner = Interner::with_capacity(bound);
        let mut file_cache: FxHashMap<StrId, StrId> = FxHashMap::default();
        let mut obj_cache: FxHashMap<u32, StrId> = FxHashMap::default();
        for loc in &p.locations {
            let mut objfile = |t: &mut NodeTable| -> StrId {
                let Some(m) = loc.mapping else {
                    return StrId::EMPTY;
                };
                *obj_cache
                    .entry(m)
                    .or_insert_with(|| t.local.intern(p.objfile(loc)))
            };
            let address = if agg.address { loc.address } else { 0 };
            let start = t.nodes.len();
            let lines = lines_of(p, loc, agg.inlines);
            if lines.is_empty() {
                let key = Key {
                    address,
                    objfile: objfile(&mut t),
                    ..Key::default()
                };
                let id = interner.insert(&mut t.keys, key);
                t.nodes.push(id);
            }
            for line in lines {
                let f = p.function(line);
                let file = if agg.filename && f.filename != StrId::EMPTY {
                    *file_cache
                        .entry(f.filename)
                        .or_insert_with(|| t.local.intern(&clean_path(&trim(p.str(f.filename)))))
                } else {
                    StrId::EMPTY
                };
                let mut key = Key {
                    name: if agg.function { f.name } else { StrId::EMPTY },
                    address,
                    file,
                    lineno: if agg.linenumber { line.line } else { 0 },
                    ..Key::default()
                };
                if agg.obj_names || key.name == StrId::EMPTY {
                    key.objfile = objfile(&mut t);
                    key.start_line = f.start_line;
                }
                let id = interner.insert(&mut t.keys, key);
                t.nodes.push(id);
            }
            t.loc_spans.push(Span::new(start, t.nodes.len() - start));
        }
        drop(interner);
        t.names.reserve_exact(t.keys.len());
        for i in 0..t.keys.len() {
            let k = t.keys[i];
            let name = if k.address == 0
                && k.lineno == 0
                && k.file == StrId::EMPTY
                && k.name != StrId::EMPTY
            {
                k.name.index()
            } else {
                let text = t.info_of(p, &k).printable_name();
                t.local.intern(&text).index() | LOCAL
            };
            t.names.push(name);
        }
        t.local.seal();
        t
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The nodes of location `l`'s lines, innermost first.
    pub(crate) fn loc_nodes(&self, l: u32) -> &[u32] {
        &self.nodes[self.loc_spans[l as usize].range()]
    }

    fn info_of<'a>(&'a self, p: &'a Profile, k: &Key) -> NodeInfo<'a> {
        NodeInfo {
            name: p.str(k.name),
            address: k.address,
            file: self.local.get(k.file),
            start_line: k.start_line,
            lineno: k.lineno,
            objfile: self.local.get(k.objfile),
        }
    }

    /// What identifies node `id`.
    pub(crate) fn info<'a>(&'a self, p: &'a Profile, id: u32) -> NodeInfo<'a> {
        self.info_of(p, &self.keys[id as usize])
    }

    /// The printable names, read through the profile.
    pub(crate) fn names<'a>(&'a self, p: &'a Profile) -> NodeNames<'a> {
        NodeNames { table: self, p }
    }
}

/// Node names, by node id: `names[id]`.
#[derive(Clone, Copy)]
pub(crate) struct NodeNames<'a> {
    table: &'a NodeTable,
    p: &'a Profile,
}

impl<'a> NodeNames<'a> {
    /// The printable name of node `id`.
    pub(crate) fn get(&self, id: u32) -> &'a str {
        let n = self.table.names[id as usize];
        if n & LOCAL != 0 {
            self.table.local.get(StrId::from_index(n & !LOCAL))
        } else {
            self.p.str(StrId::from_index(n))
        }
    }

    /// What identifies node `id`.
    pub(crate) fn info(&self, id: u32) -> NodeInfo<'a> {
        self.table.info(self.p, id)
    }

    /// Go's `fmt.Sprint` of pprof's NodeInfo: the last tie-break when sorting.
    fn sprint(&self, id: u32) -> String {
        self.info(id).sprint()
    }
}

impl std::ops::Index<usize> for NodeNames<'_> {
    type Output = str;

    fn index(&self, id: usize) -> &str {
        self.get(id as u32)
    }
}

fn lines_of<'a>(p: &'a Profile, loc: &Location, inlines: bool) -> &'a [Line] {
    let lines = p.lines(loc);
    if !inlines && lines.len() > 1 {
        &lines[lines.len() - 1..]
    } else {
        lines
    }
}

/// Interns node keys: open addressing over key indices (slots hold `index + 1`, 0 empty),
/// so each key is stored once, in `keys`. The hash is keyed: keys carry addresses and line
/// numbers from the file, which must not be able to make probing quadratic.
struct Interner {
    slots: Vec<u32>,
    hasher: std::collections::hash_map::RandomState,
}

impl Interner {
    fn with_capacity(n: usize) -> Interner {
        Interner {
            slots: vec![0; (2 * (n + 1)).next_power_of_two().max(64)],
            hasher: Default::default(),
        }
    }

    fn insert(&mut self, keys: &mut Vec<Key>, key: Key) -> u32 {
        if self.slots.len() < 2 * (keys.len() + 1) {
            let size = (2 * (keys.len() + 1)).next_power_of_two().max(64);
            self.slots = vec![0; size];
            for (i, k) in keys.iter().enumerate() {
                let at = self.probe(keys, k);
                self.slots[at] = i as u32 + 1;
            }
        }
        let at = self.probe(keys, &key);
        match self.slots[at] {
            0 => {
                keys.push(key);
                self.slots[at] = keys.len() as u32;
                keys.len() as u32 - 1
            }
            i => i - 1,
        }
    }

    /// The slot holding `key`, or the empty slot where it goes.
    fn probe(&self, keys: &[Key], key: &Key) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = self.hasher.hash_one(key) as usize & mask;
        loop {
            match self.slots[at] {
                0 => return at,
                i if keys[i as usize - 1] == *key => return at,
                _ => at = (at + 1) & mask,
            }
        }
    }
}

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
