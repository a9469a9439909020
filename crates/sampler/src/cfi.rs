//! Unwinding from unwind tables (DWARF CFI, `.eh_frame`) on the drain thread.
//!
//! With [`Unwind::Tables`](super::Unwind::Tables) and the perf source, a thread is not
//! signalled: its task-clock event copies the thread's user registers and the top of its
//! stack into a ring ([`super::timer::arm_ring`]), and the drain thread unwinds each copy
//! here with `framehop`, outside signal context. Code built without frame pointers (nearly
//! every C library and program a distribution ships) then has its callers, as
//! gperftools/libunwind and `perf --call-graph dwarf` find them.
//!
//! - **Modules are added lazily.** A walk that reaches an address in a mapping whose unwind
//!   tables are not loaded yet loads them (`.eh_frame` and `.eh_frame_hdr`, read from the
//!   file, or from memory for the vDSO) and walks again from the start: a walk through a
//!   module the unwinder does not know would follow a guessed rule. A short process whose
//!   samples touch two libraries reads those two, never the other thirty it maps.
//! - **A walk ends** where the tables say the stack ends (`_start`, a thread's
//!   `clone3`), at an address in no file-backed or vDSO mapping (JIT code), in a file without
//!   `.eh_frame`, or where it would read past the bytes perf copied: the sample is then
//!   marked truncated, so the profile counts how often the copy was too short.

use std::collections::HashMap;

use framehop::{
    CacheNative, ExplicitModuleSectionInfo, MayAllocateDuringUnwind, Module, UnwindRegsNative,
    Unwinder, UnwinderNative,
};

use crate::symbolize::{self, MapEntry, UnwindSections};

/// What walking by the unwind tables did, for the profile's comments: threads sampled
/// through stack rings, those that could not get one (then on the signal) and the last
/// error, samples walked, and those whose walk ran past the copied stack.
#[derive(Clone, Debug, Default)]
pub(crate) struct WalkStats {
    pub threads: u64,
    pub unarmed: u64,
    pub error: Option<String>,
    pub walked: u64,
    pub truncated: u64,
}

/// A thread's user registers at a sample, as perf copied them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UserRegs {
    pub pc: u64,
    pub sp: u64,
    /// The frame pointer (`rbp`, `x29`).
    pub fp: u64,
    /// The link register (`x30`; 0 on x86_64).
    pub lr: u64,
}

impl UserRegs {
    fn native(self) -> UnwindRegsNative {
        #[cfg(target_arch = "x86_64")]
        return UnwindRegsNative::new(self.pc, self.sp, self.fp);
        #[cfg(target_arch = "aarch64")]
        return UnwindRegsNative::new(self.lr, self.sp, self.fp);
    }
}

/// A module's unwind tables, as the unwinder holds them.
type Tables = crate::sys::memory::Zeroed<u8>;

/// The drain thread's unwinder: the modules added so far and framehop's rule cache.
pub(crate) struct Cfi {
    /// Modules' tables in mappings that fork children do not get (only this thread reads
    /// them: see `sys::memory::not_into_fork_children`).
    unwinder: UnwinderNative<Tables, MayAllocateDuringUnwind>,
    cache: CacheNative<MayAllocateDuringUnwind>,
    /// The executable mappings of the last reading, sorted by start.
    maps: Vec<MapEntry>,
    /// Whether `maps` was read since the last [`Cfi::new_pass`]: an address in no mapping
    /// reads them again at most once a pass (a library loaded since).
    maps_fresh: bool,
    /// Mapping start → whether its module was added (false: tried, and it has no tables).
    tried: HashMap<u64, bool>,
    /// Ranges of the mappings whose modules were added, sorted by start.
    added: Vec<(u64, u64)>,
    /// Samples walked, and those whose walk reached the end of the copied stack.
    pub walked: u64,
    pub truncated: u64,
    /// The process whose stacks these are: `None`, this one; else another, sampled from
    /// outside (`sampler::attach`), whose mappings are read from `/proc/PID/maps`.
    pid: Option<u32>,
    /// Readings of the mappings taken so far (see [`Cfi::maps`]).
    pub readings: u64,
}

impl Default for Cfi {
    fn default() -> Self {
        Cfi {
            unwinder: UnwinderNative::new(),
            cache: CacheNative::new(),
            maps: Vec::new(),
            maps_fresh: false,
            tried: HashMap::new(),
            added: Vec::new(),
            walked: 0,
            truncated: 0,
            pid: None,
            readings: 0,
        }
    }
}

impl Cfi {
    /// The unwinder of another process's stacks (see [`Cfi::pid`]).
    pub fn of_process(pid: u32) -> Cfi {
        Cfi {
            pid: Some(pid),
            ..Cfi::default()
        }
    }

    /// The executable mappings of the last reading (the [`Cfi::readings`]th).
    pub fn maps(&self) -> &[MapEntry] {
        &self.maps
    }

    /// Reads the process's mappings again now (see [`Cfi::set_maps`]).
    pub fn read_maps(&mut self) -> bool {
        match symbolize::read_maps_of(self.pid) {
            Ok(maps) => {
                self.set_maps(&maps);
                true
            }
            Err(_) => false,
        }
    }

    /// Takes a new reading of the process's mappings: modules whose mapping went (a
    /// `dlclose`) are removed, so that an address there is never walked by stale tables.
    pub fn set_maps(&mut self, maps: &[MapEntry]) {
        let mut exec: Vec<MapEntry> = maps.iter().filter(|m| m.executable).cloned().collect();
        exec.sort_by_key(|m| m.start);
        let still = |start: u64, old: &MapEntry| {
            exec.binary_search_by_key(&start, |m| m.start)
                .is_ok_and(|i| exec[i].end == old.end && exec[i].path == old.path)
        };
        let gone: Vec<u64> = self
            .maps
            .iter()
            .filter(|old| !still(old.start, old))
            .map(|old| old.start)
            .collect();
        for start in gone {
            if self.tried.remove(&start) == Some(true) {
                self.unwinder.remove_module(start);
                self.added.retain(|&(s, _)| s != start);
            }
        }
        self.maps = exec;
        self.maps_fresh = true;
        self.readings += 1;
    }

    /// A new drain pass: the mappings may be read again if a walk needs it.
    pub fn new_pass(&mut self) {
        self.maps_fresh = false;
    }

    /// Walks the stack of one sample: `stack` holds the bytes perf copied from `regs.sp`
    /// up. Puts the interrupted pc, then the return addresses, in `out` (at most
    /// `max + 1`); returns whether the walk was cut short (the copy ended, or `max` was
    /// passed).
    pub fn unwind(&mut self, regs: UserRegs, stack: &[u8], max: usize, out: &mut Vec<u64>) -> bool {
        self.walked += 1;
        // Each retry follows the addition of a module, so there are few: one per library
        // the stack passes through, the first time it does.
        for _ in 0..16 {
            out.clear();
            let mut ran_out = false;
            let mut read = |addr: u64| -> Result<u64, ()> {
                let at = addr.checked_sub(regs.sp).ok_or(())?;
                let at = usize::try_from(at).map_err(|_| ())?;
                match stack.get(at..at.checked_add(8).ok_or(())?) {
                    Some(b) => Ok(u64::from_ne_bytes(b.try_into().map_err(|_| ())?)),
                    None => {
                        ran_out = true;
                        Err(())
                    }
                }
            };
            let unknown = {
                let Cfi {
                    unwinder,
                    cache,
                    added,
                    ..
                } = self;
                let mut frames = unwinder.iter_frames(regs.pc, regs.native(), cache, &mut read);
                let mut unknown = None;
                while let Ok(Some(frame)) = frames.next() {
                    out.push(frame.address());
                    let lookup = frame.address_for_lookup();
                    if !covered(added, lookup) {
                        unknown = Some(lookup);
                        break;
                    }
                    if out.len() > max {
                        break;
                    }
                }
                unknown
            };
            if let Some(addr) = unknown {
                if self.add_module_for(addr) {
                    continue;
                }
            }
            let cut = ran_out || out.len() > max;
            self.truncated += cut as u64;
            return cut;
        }
        // Sixteen libraries loaded by one walk: cut there, counted as any cut walk.
        self.truncated += 1;
        true
    }

    /// Adds the module of the mapping holding `addr`; false if there is none, it has no
    /// unwind tables, or it was tried before.
    fn add_module_for(&mut self, addr: u64) -> bool {
        let mut entry = self.mapping_of(addr);
        if entry.is_none() && !self.maps_fresh {
            self.read_maps();
            entry = self.mapping_of(addr);
        }
        let Some(entry) = entry.cloned() else {
            return false;
        };
        if self.tried.contains_key(&entry.start) {
            return false;
        }
        let added = self.module(&entry).map(|m| self.unwinder.add_module(m));
        self.tried.insert(entry.start, added.is_some());
        if added.is_some() {
            let at = self.added.partition_point(|&(s, _)| s < entry.start);
            self.added.insert(at, (entry.start, entry.end));
        }
        added.is_some()
    }

    fn mapping_of(&self, addr: u64) -> Option<&MapEntry> {
        let i = self
            .maps
            .partition_point(|m| m.start <= addr)
            .checked_sub(1)?;
        let m = &self.maps[i];
        (addr < m.end).then_some(m)
    }

    /// The framehop module of one executable mapping, from its file's tables (or the
    /// vDSO's, in memory).
    fn module(&self, entry: &MapEntry) -> Option<Module<Tables>> {
        let sections = if entry.path == "[vdso]" {
            vdso_sections(entry, self.pid.is_some())?
        } else if entry.path.starts_with('/') {
            symbolize::read_unwind_sections(&entry.path)?
        } else {
            return None;
        };
        let svma = sections.mapping_svma(entry.offset, entry.end - entry.start)?;
        let (eh_frame_svma, eh_frame) = sections.eh_frame?;
        let (eh_frame_hdr_svma, eh_frame_hdr) = sections.eh_frame_hdr.unzip();
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: sections.text,
            got_svma: sections.got,
            eh_frame_svma: Some(eh_frame_svma),
            eh_frame: Some(eh_frame),
            eh_frame_hdr_svma,
            eh_frame_hdr,
            ..Default::default()
        };
        Some(Module::new(
            entry.path.clone(),
            entry.start..entry.end,
            entry.start.wrapping_sub(svma),
            info,
        ))
    }
}

/// Whether `addr` is in one of the `added` ranges (sorted by start).
fn covered(added: &[(u64, u64)], addr: u64) -> bool {
    let i = added.partition_point(|&(s, _)| s <= addr);
    i > 0 && addr < added[i - 1].1
}

/// The vDSO's unwind tables, read from its image in memory (`clock_gettime` and friends run
/// there, and it is no file). Another process's vDSO is the same image (one per kernel and
/// ABI), mapped elsewhere: this process's is read for it when it is as long.
fn vdso_sections(entry: &MapEntry, other: bool) -> Option<UnwindSections> {
    let image = crate::sys::image::vdso()?;
    let same_length = image.len() as u64 == entry.end.saturating_sub(entry.start);
    let same_place = image.as_ptr() as u64 == entry.start;
    if !same_length || !(other || same_place) {
        return None;
    }
    symbolize::read_unwind_sections_in(image)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::{Cfi, UserRegs};
    use crate::symbolize::{read_self_maps, Symbolizer};

    /// This function's registers at one instruction, and a copy of the stack from its stack
    /// pointer up to the end of the stack's mapping (at most `max` bytes): what a perf stack
    /// sample holds.
    #[inline(never)]
    #[allow(unsafe_code)] // reads registers and this thread's own stack, for the test
    fn capture(stack: &mut Vec<u8>, max: u64) -> UserRegs {
        let (pc, sp, fp): (u64, u64, u64);
        // SAFETY: reads three registers into locals; no memory is touched.
        unsafe {
            std::arch::asm!("lea {}, [rip]", "mov {}, rsp", "mov {}, rbp",
                out(reg) pc, out(reg) sp, out(reg) fp, options(nomem, nostack, preserves_flags));
        }
        let maps = read_self_maps().unwrap();
        let end = maps
            .iter()
            .find(|m| m.start <= sp && sp < m.end)
            .expect("the stack's mapping")
            .end;
        let len = (end - sp).min(max) as usize;
        // SAFETY: `sp..sp + len` lies in the mapping that holds this thread's stack pointer,
        // readable and live while this function runs.
        stack.extend_from_slice(unsafe { std::slice::from_raw_parts(sp as *const u8, len) });
        UserRegs { pc, sp, fp, lr: 0 }
    }

    /// The names of the functions at `frames` (return addresses looked up one byte back).
    fn names(frames: &[u64]) -> Vec<String> {
        let mut sym = Symbolizer::new(&read_self_maps().unwrap());
        frames
            .iter()
            .enumerate()
            .flat_map(|(i, &a)| sym.lookup(if i == 0 { a } else { a - 1 }))
            .map(|f| f.name)
            .collect()
    }

    #[test]
    fn a_copied_stack_is_walked_through_its_callers_by_the_unwind_tables() {
        let mut stack = Vec::new();
        let regs = capture(&mut stack, 64 << 10);
        let mut cfi = Cfi::default();
        cfi.set_maps(&read_self_maps().unwrap());
        let mut frames = Vec::new();
        let cut = cfi.unwind(regs, &stack, 128, &mut frames);
        assert_eq!(frames[0], regs.pc);
        let names = names(&frames);
        let at = |name: &str| names.iter().position(|n| n.ends_with(name));
        // This test's thread runs under the harness: capture, this test, then the
        // harness's callers, in that order.
        let (c, t) = (
            at("tests::capture"),
            at("a_copied_stack_is_walked_through_its_callers_by_the_unwind_tables"),
        );
        assert!(c.is_some() && t.is_some() && c < t, "{names:?}");
        assert!(
            names.len() > t.unwrap() + 3,
            "the harness's frames too: {names:?}"
        );
        assert!(!cut, "64 KiB hold this stack: {names:?}");
        // The tables of the modules walked through were loaded, and only on demand.
        assert!(cfi.tried.values().any(|&added| added));
        assert!(
            cfi.tried.len() < cfi.maps.len(),
            "{} of {}",
            cfi.tried.len(),
            cfi.maps.len()
        );
    }

    #[test]
    fn a_walk_that_runs_past_the_copied_bytes_is_marked_cut() {
        let mut stack = Vec::new();
        let regs = capture(&mut stack, 64 << 10);
        let mut cfi = Cfi::default();
        let mut frames = Vec::new();
        assert!(cfi.unwind(regs, &stack[..16], 128, &mut frames));
        assert_eq!(cfi.truncated, 1);
        // A walk cut at `max` frames is cut too.
        let mut frames = Vec::new();
        assert!(cfi.unwind(regs, &stack, 1, &mut frames));
        assert_eq!(frames.len(), 2);
    }
}
