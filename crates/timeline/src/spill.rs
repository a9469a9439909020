//! Per-key byte streams whose total can outgrow memory: kept in memory up to a limit, then
//! moved in blocks to an unnamed temporary file, and read back key by key.
//!
//! speedscope wants each thread's events together while a capture interleaves threads chunk
//! by chunk; this keeps that export's memory bounded whatever the capture's length.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Bytes held in memory, all keys together, before they move to the file.
const HOLD: usize = 32 << 20;

pub(crate) struct Spill {
    bufs: Vec<Vec<u8>>,
    /// Per key, its blocks in the file: (offset, length).
    blocks: Vec<Vec<(u64, u64)>>,
    file: Option<File>,
    file_len: u64,
    held: usize,
    hold: usize,
}

impl Spill {
    pub(crate) fn new() -> Spill {
        Spill::with_limit(HOLD)
    }

    pub(crate) fn with_limit(hold: usize) -> Spill {
        Spill {
            bufs: Vec::new(),
            blocks: Vec::new(),
            file: None,
            file_len: 0,
            held: 0,
            hold,
        }
    }

    /// Appends `bytes` to key `k`'s stream.
    pub(crate) fn push(&mut self, k: usize, bytes: &[u8]) -> io::Result<()> {
        if self.bufs.len() <= k {
            self.bufs.resize_with(k + 1, Vec::new);
        }
        self.bufs[k].extend_from_slice(bytes);
        self.held += bytes.len();
        if self.held > self.hold {
            self.spill()?;
        }
        Ok(())
    }

    /// Whether key `k` has any bytes.
    pub(crate) fn is_empty(&self, k: usize) -> bool {
        self.bufs.get(k).map_or(true, Vec::is_empty)
            && self.blocks.get(k).map_or(true, Vec::is_empty)
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.file.is_none() {
            self.file = Some(temp_file()?);
        }
        // Per key only once something has been spilled.
        self.blocks.resize_with(self.bufs.len(), Vec::new);
        let file = self.file.as_mut().expect("just created");
        file.seek(SeekFrom::Start(self.file_len))?;
        for (k, buf) in self.bufs.iter_mut().enumerate() {
            if buf.is_empty() {
                continue;
            }
            file.write_all(buf)?;
            self.blocks[k].push((self.file_len, buf.len() as u64));
            self.file_len += buf.len() as u64;
            buf.clear();
        }
        self.held = 0;
        Ok(())
    }

    /// Writes key `k`'s stream to `out`.
    pub(crate) fn copy_to(&mut self, k: usize, out: &mut impl Write) -> io::Result<()> {
        if let (Some(file), Some(blocks)) = (self.file.as_mut(), self.blocks.get(k)) {
            for &(offset, len) in blocks {
                file.seek(SeekFrom::Start(offset))?;
                io::copy(&mut (&mut *file).take(len), out)?;
            }
        }
        if let Some(buf) = self.bufs.get(k) {
            out.write_all(buf)?;
        }
        Ok(())
    }
}

/// A new temporary file, unlinked at once where the system allows it (so nothing is left
/// behind, even if the process dies).
fn temp_file() -> io::Result<File> {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir();
    loop {
        let path = dir.join(format!(
            "tickscope-spill-{}-{}",
            std::process::id(),
            N.fetch_add(1, Relaxed)
        ));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => {
                let _ = std::fs::remove_file(&path);
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_come_back_whole_and_in_order_across_the_file() {
        let mut s = Spill::with_limit(10);
        for i in 0..100u8 {
            s.push((i % 3) as usize, &[i]).unwrap();
        }
        assert!(s.file.is_some(), "small limit: spilled");
        for k in 0..3 {
            let mut out = Vec::new();
            s.copy_to(k, &mut out).unwrap();
            let want: Vec<u8> = (0..100u8).filter(|i| (i % 3) as usize == k).collect();
            assert_eq!(out, want);
        }
        assert!(s.is_empty(7));
        assert!(!s.is_empty(1));
    }
}
