//! What a node is: its identity at the granularity asked for ([`NodeInfo`], [`Aggregation`]),
//! the table of every location's node built once per report ([`NodeTable`]), and the
//! interner that keeps each identity once.

use std::hash::BuildHasher;

use rustc_hash::FxHashMap;

use crate::model::{Line, Location, Profile};
use crate::store::{Span, StrId};

use crate::views::options::Granularity;

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
pub(super) struct Key {
    name: StrId,
    file: StrId,
    objfile: StrId,
    address: u64,
    start_line: i64,
    lineno: i64,
}

/// A printable name: a string of the profile (the function's name, the usual case), or of
/// the table when this bit is set.
pub(super) const LOCAL: u32 = 1 << 31;

/// Nodes for every location of a profile: built once, reused by every graph of a report.
pub(crate) struct NodeTable {
    keys: Vec<Key>,
    /// Printable names (see [`LOCAL`]).
    names: Vec<u32>,
    /// Cleaned file names, binaries and composed printable names.
    local: crate::store::Strings,
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
    /// How many nodes the table holds (ids are `0..node_count()`).
    pub(crate) fn node_count(&self) -> usize {
        self.names.len()
    }

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
    pub(crate) fn sprint(&self, id: u32) -> String {
        self.info(id).sprint()
    }
}

impl std::ops::Index<usize> for NodeNames<'_> {
    type Output = str;

    fn index(&self, id: usize) -> &str {
        self.get(id as u32)
    }
}

pub(super) fn lines_of<'a>(p: &'a Profile, loc: &Location, inlines: bool) -> &'a [Line] {
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
pub(super) struct Interner {
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
