//! Arbitrary bytes into `tickscope view`'s index of a capture (a live capture's bytes come
//! from the network), then window queries over them, wide (from the bins) and narrow
//! (decoding the chunks again): none may panic, loop or allocate without bound.
#![no_main]

use std::io;

use libfuzzer_sys::fuzz_target;
use tickscope_timeline::tscap::Reader;
use tickscope_timeline::TimeMap;
use tickscope_view::index::query::{Source, Window};
use tickscope_view::index::{Budget, Index};

struct Bytes<'a>(&'a [u8]);

impl Source for Bytes<'_> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = usize::try_from(offset).map_err(io::Error::other)?;
        let end = at.checked_add(buf.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(self.0.get(at..end).ok_or(io::ErrorKind::UnexpectedEof)?);
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(r) = Reader::new(data, "fuzz") else { return };
    let mut r = r.salvage(true);
    let map = TimeMap::new(r.process(), r.process().clock());
    let mut idx = Index::new(&r, map, Budget::for_capture(data.len() as u64));
    let _ = idx.read_all(&mut r);
    idx.flush();
    let source = Bytes(data);
    let end = map.ns(idx.last).max(1);
    let windows = [
        (0, end, 1000),
        (0, end / 7 + 1, 333),
        (end / 2, end, 7),
        (end / 3, end / 3 + 50, 2000),
    ];
    for (from, until, px) in windows {
        if let Ok(w) = Window::new(from, until.max(from + 1), px) {
            let _ = idx.query(&source, w);
            let _ = idx.lives(w);
        }
    }
});
