//! Folded stacks for flame graph tools (inferno, `flamegraph.pl`, speedscope): one line per
//! distinct stack, `thread;outer;inner self_ns`, where `self_ns` is the time spent in the
//! innermost scope and not in its children, summed over the capture. Lines are sorted, and
//! equal stacks (threads of the same name) merged, so the output is deterministic. `;` in a
//! name becomes `:`, line breaks spaces.
//!
//! Memory is bounded by the number of distinct stacks (a calling-context tree per thread).

use std::collections::HashMap;
use std::io::{self, Read, Write};

use super::error::Error;
use super::filter::{Filter, LeftOut};
use super::format::folded_name;
use super::replay::replay;
use super::sink::{Close, Sink};
use super::time::TimeMap;
use crate::tscap::{Clock, IdIndex, Meta, Reader};

const NO_PARENT: u32 = u32::MAX;

struct Node {
    parent: u32,
    /// Scope id, or the thread index for a root.
    id: u64,
    self_ns: u64,
}

struct Open {
    node: u32,
    begin: u64,
    child: u64,
}

#[derive(Default)]
struct Folded {
    nodes: Vec<Node>,
    children: HashMap<(u32, u64), u32>,
    threads: IdIndex,
    roots: Vec<u32>,
    /// The open scopes of thread `cur` (the one being replayed); those of the others that
    /// have any, parked (a capture of many threads holds no stack for each).
    cur: usize,
    stack: Vec<Open>,
    parked: HashMap<usize, Vec<Open>>,
}

impl Folded {
    fn thread_key(&mut self, thread: u64) -> usize {
        let (k, new) = self.threads.get_or_insert(thread);
        if new {
            self.roots.push(self.nodes.len() as u32);
            self.nodes.push(Node {
                parent: NO_PARENT,
                id: thread,
                self_ns: 0,
            });
        }
        let k = k as usize;
        if k != self.cur {
            if !self.stack.is_empty() {
                self.parked
                    .insert(self.cur, std::mem::take(&mut self.stack));
            }
            if let Some(s) = self.parked.remove(&k) {
                self.stack = s;
            }
            self.cur = k;
        }
        k
    }
}

impl Sink for Folded {
    fn begin(&mut self, _: &Meta, thread: u64, id: u64, ns: u64) -> io::Result<()> {
        let k = self.thread_key(thread);
        let parent = self.stack.last().map_or(self.roots[k], |o| o.node);
        let next = self.nodes.len() as u32;
        let node = *self.children.entry((parent, id)).or_insert(next);
        if node == next {
            self.nodes.push(Node {
                parent,
                id,
                self_ns: 0,
            });
        }
        self.stack.push(Open {
            node,
            begin: ns,
            child: 0,
        });
        Ok(())
    }

    fn end(&mut self, _: &Meta, thread: u64, _: u64, _: u64, end: u64, _: Close) -> io::Result<()> {
        self.thread_key(thread);
        let Some(o) = self.stack.pop() else {
            return Ok(());
        };
        let dur = end.saturating_sub(o.begin);
        let n = &mut self.nodes[o.node as usize];
        n.self_ns = n.self_ns.saturating_add(dur.saturating_sub(o.child));
        if let Some(parent) = self.stack.last_mut() {
            parent.child = parent.child.saturating_add(dur);
        }
        Ok(())
    }
}

/// Writes the capture at `reader` as folded stacks, converting ticks at `clock`.
pub fn write<R: Read, W: Write>(
    reader: &mut Reader<R>,
    clock: Clock,
    filter: &Filter,
    mut out: W,
) -> Result<LeftOut, Error> {
    let map = TimeMap::new(reader.process(), clock);
    let mut f = Folded::default();
    let replayed = replay(reader, &map, filter, &mut f)?;
    let meta = reader.meta();
    // Every line's text in one buffer, then sorted and merged: a `String` and a map node
    // per line would cost several times the text.
    let mut text = String::new();
    let mut lines: Vec<(usize, usize, u64)> = Vec::new();
    let mut path = Vec::new();
    for (i, n) in f.nodes.iter().enumerate() {
        if n.self_ns == 0 || n.parent == NO_PARENT {
            continue;
        }
        path.clear();
        let mut at = i as u32;
        while at != NO_PARENT {
            path.push(at);
            at = f.nodes[at as usize].parent;
        }
        let start = text.len();
        for (j, &node) in path.iter().rev().enumerate() {
            let n = &f.nodes[node as usize];
            if j == 0 {
                text.push_str(&folded_name(&meta.thread_name(n.id)));
            } else {
                text.push(';');
                text.push_str(&folded_name(&meta.scope_name(n.id)));
            }
        }
        lines.push((start, text.len(), n.self_ns));
    }
    let line = |l: &(usize, usize, u64)| &text[l.0..l.1];
    lines.sort_unstable_by(|a, b| line(a).cmp(line(b)));
    let mut buf = String::new();
    let mut i = 0;
    while i < lines.len() {
        // Equal lines (different scopes of one name) are one, their times summed.
        let mut ns = lines[i].2;
        let mut j = i + 1;
        while j < lines.len() && line(&lines[j]) == line(&lines[i]) {
            ns = ns.saturating_add(lines[j].2);
            j += 1;
        }
        buf.push_str(line(&lines[i]));
        buf.push(' ');
        buf.push_str(&ns.to_string());
        buf.push('\n');
        if buf.len() >= 1 << 16 {
            out.write_all(buf.as_bytes())?;
            buf.clear();
        }
        i = j;
    }
    out.write_all(buf.as_bytes())?;
    out.flush()?;
    Ok(replayed.left_out)
}
