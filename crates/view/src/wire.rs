//! A window's answer as the page reads it: little-endian binary, read with a `DataView`
//! (`assets/wire.js`, `readAnswer`). Sparse per-pixel lists hold the pixels that have
//! anything.
//!
//! | field | encoding |
//! |---|---|
//! | window | `f64 from_ns`, `f64 until_ns`, `u32 px`, `u8 decoded`, `f64 bin_ns` |
//! | threads | `u32 N`, then per thread: |
//! | – thread | `f64 index`, `u32 rows`, then per row (depth 0 first): |
//! | – – slices | `u32 N`, N × (`f64 begin_ns`, `f64 end_ns`, `f64 scope id`, `u8 close`) |
//! | – – busy | `u32 N`, N × (`u16 pixel`, `u8 busy`) (busy 1 to 255 of 255) |
//! | – frames, messages, samples | each `u32 N`, N × (`u16 pixel`, `u32 count`) |
//! | – message texts | `u32 N`, N × (`f64 ns`, `u32 bytes`, UTF-8) |
//! | – losses | `u32 N`, N × (`f64 ns`, `f64 events`) |
//! | counters | `u32 N`, then per counter: `f64 id`, `u32 N`, N × (`u16 pixel`, `f32 min`, `f32 max`, `f32 last`) |
//!
//! `close` is [`Close::code`](crate::index::Close::code): 0 ended, 1 abandoned, 2 cut, 3 open.

use crate::index::query::Answer;

/// The answer's bytes.
pub fn encode(a: &Answer) -> Vec<u8> {
    let mut w = W(Vec::with_capacity(64 << 10));
    w.f64(a.window.from_ns as f64);
    w.f64(a.window.until_ns as f64);
    w.u32(a.window.px);
    w.0.push(a.decoded as u8);
    w.f64(a.bin_ns);
    w.u32(a.threads.len() as u32);
    for t in &a.threads {
        w.f64(t.index as f64);
        w.u32(t.rows.len() as u32);
        for r in &t.rows {
            w.u32(r.slices.len() as u32);
            for s in &r.slices {
                w.f64(s.begin_ns);
                w.f64(s.end_ns);
                w.f64(s.id as f64);
                w.0.push(s.close.code());
            }
            let busy: Vec<(usize, u8)> = r
                .busy
                .iter()
                .enumerate()
                .filter(|b| *b.1 > 0)
                .map(|(p, &b)| (p, b))
                .collect();
            w.u32(busy.len() as u32);
            for (p, b) in busy {
                w.u16(p as u16);
                w.0.push(b);
            }
        }
        for counts in [&t.frames, &t.messages, &t.samples] {
            let n = counts.iter().filter(|&&c| c > 0).count();
            w.u32(n as u32);
            for (p, &c) in counts.iter().enumerate().filter(|c| *c.1 > 0) {
                w.u16(p as u16);
                w.u32(c);
            }
        }
        w.u32(t.texts.len() as u32);
        for (ns, text) in &t.texts {
            w.f64(*ns);
            w.u32(text.len() as u32);
            w.0.extend_from_slice(text.as_bytes());
        }
        w.u32(t.losses.len() as u32);
        for (ns, n) in &t.losses {
            w.f64(*ns);
            w.f64(*n as f64);
        }
    }
    w.u32(a.counters.len() as u32);
    for c in &a.counters {
        w.f64(c.id as f64);
        let set: Vec<_> = c
            .ranges
            .iter()
            .enumerate()
            .filter(|r| r.1.is_set())
            .collect();
        w.u32(set.len() as u32);
        for (p, r) in set {
            w.u16(p as u16);
            w.f32(r.min);
            w.f32(r.max);
            w.f32(r.last);
        }
    }
    w.0
}

struct W(Vec<u8>);

impl W {
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f32(&mut self, v: f32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
}
