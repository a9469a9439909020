//! Symbolisation: raw instruction addresses of this process → pprof Mappings and Lines.
//!
//! The sampler's signal handler records bare addresses (the interrupted pc and return
//! addresses). At `stop()`, outside signal context, this module turns them into:
//! - [`Module`]s: the executable, file-backed mappings of `/proc/self/maps` ([`parse_maps`]),
//!   each with the GNU build id of its file;
//! - [`Frame`]s: function, file and line for an address, one frame per inlined call, from
//!   the file's DWARF through `addr2line`, or from its ELF symbol table when it has none.
//!   A symbol names only the addresses it covers (`start..start + size`): an address in a
//!   function missing from the table (a static one of a library without `.symtab`) gets no
//!   frame rather than the name of whichever symbol precedes it.
//!
//! An address is translated in two steps, so that PIE executables and shared libraries both
//! work: runtime address → file offset (through the mapping's offset) → ELF virtual address
//! (through the `PT_LOAD` program header that holds that file offset), which is what the
//! file's DWARF and symbol tables speak.
//!
//! The build id, the load segments and whether DWARF line info exists are read from the ELF
//! headers, a few KiB per file, without mapping it, and the symbol tables for only the
//! addresses looked up, by `tickscope_pprof::elf`, which the CLI's symboliser reads them with
//! too: the separate debug file is found, and aliases named, alike in both. What is the
//! sampler's alone stays here: DWARF through addr2line, this process's maps, its own mapping
//! from `AT_PHDR` and the unwind tables (`elf`).

use std::collections::HashMap;
use std::io;

use addr2line::gimli;

mod elf;

pub(crate) use elf::{read_unwind_sections, read_unwind_sections_in, UnwindSections};

#[cfg(test)]
use tickscope_pprof::elf::read_symbols;
use tickscope_pprof::elf::{
    self as shared, read_symbols_covering, ElfInfo, SymbolTable, DEBUG_ROOT,
};

/// The headers of the ELF file at `path`; `None` if it cannot be read or is not ELF (then
/// its addresses are not named, and its module has no build id).
fn read_elf_file(path: &str) -> Option<ElfInfo> {
    shared::read_elf_file(path).ok()
}

/// One line of `/proc/<pid>/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MapEntry {
    /// First address of the mapping.
    pub start: u64,
    /// One past the last address of the mapping.
    pub end: u64,
    /// Offset in the file of the byte mapped at `start`.
    pub offset: u64,
    /// The mapping is readable.
    pub readable: bool,
    /// The mapping is writable.
    pub writable: bool,
    /// The mapping is executable.
    pub executable: bool,
    /// The file, `""` for an anonymous mapping; pseudo paths (`[stack]`, `[vdso]`,
    /// `/x (deleted)`) are kept verbatim.
    pub path: String,
}

/// Parses `/proc/<pid>/maps` text; lines that do not parse are skipped (never panics).
pub(crate) fn parse_maps(text: &str) -> Vec<MapEntry> {
    text.lines().filter_map(parse_maps_line).collect()
}

/// Reads and parses `/proc/self/maps`.
pub(crate) fn read_self_maps() -> io::Result<Vec<MapEntry>> {
    read_maps_of(None)
}

/// Reads and parses `/proc/PID/maps` (`None`: this process's).
pub(crate) fn read_maps_of(pid: Option<u32>) -> io::Result<Vec<MapEntry>> {
    // Bytes, not `read_to_string`: one file name that is not UTF-8 must not make every
    // other mapping unknown. A mangled name only fails to open later.
    let mut bytes = Vec::new();
    // Above descriptor 2: the drain thread reads this while the program runs.
    io::Read::read_to_end(
        &mut crate::sys::fd::open_read(
            format!("{}/maps", crate::sys::procfs::proc_dir(pid)).as_ref(),
        )?,
        &mut bytes,
    )?;
    Ok(parse_maps(&String::from_utf8_lossy(&bytes)))
}

/// `start-end perms offset dev inode   path`, as `show_map_vma()` in the kernel's
/// `fs/proc/task_mmu.c` writes it: fields separated by one space, the path padded with
/// spaces to a column and free to contain spaces itself.
fn parse_maps_line(line: &str) -> Option<MapEntry> {
    let mut rest = line;
    let range = next_field(&mut rest)?;
    let perms = next_field(&mut rest)?.as_bytes();
    let offset = parse_hex(next_field(&mut rest)?)?;
    let dev = next_field(&mut rest)?;
    let inode = next_field(&mut rest)?;

    let (start, end) = range.split_once('-')?;
    let (start, end) = (parse_hex(start)?, parse_hex(end)?);
    if start >= end {
        return None;
    }
    let &[r, w, x, shared] = perms else {
        return None;
    };
    if !matches!(
        (r, w, x, shared),
        (b'r' | b'-', b'w' | b'-', b'x' | b'-', b'p' | b's')
    ) {
        return None;
    }
    let (major, minor) = dev.split_once(':')?;
    parse_hex(major)?;
    parse_hex(minor)?;
    if !inode.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(MapEntry {
        start,
        end,
        offset,
        readable: r == b'r',
        writable: w == b'w',
        executable: x == b'x',
        path: rest.trim_start_matches(' ').to_owned(),
    })
}

/// Splits the next space-separated field off `rest`; `None` when there is none.
fn next_field<'a>(rest: &mut &'a str) -> Option<&'a str> {
    let trimmed = rest.trim_start_matches(' ');
    let end = trimmed.find(' ').unwrap_or(trimmed.len());
    let (field, tail) = trimmed.split_at(end);
    *rest = tail;
    (!field.is_empty()).then_some(field)
}

/// Hex digits only: `from_str_radix` alone would also take a leading `+`.
fn parse_hex(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(text, 16).ok()
}

/// One executable, file-backed mapping of the process (what pprof calls a Mapping).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Module {
    /// First address of the mapping.
    pub start: u64,
    /// One past the last address of the mapping (pprof's `memory_limit`).
    pub limit: u64,
    /// Offset in the file of the byte mapped at `start`.
    pub offset: u64,
    /// The file, as `/proc/self/maps` names it.
    pub path: String,
    /// Lowercase hex of the file's `NT_GNU_BUILD_ID` note; `""` if none or unreadable.
    pub build_id: String,
    /// The file has DWARF line info (a non-empty `.debug_line`), so frames get files and
    /// lines, not only names.
    pub has_debug_info: bool,
}

/// The program's own code mapping, from its program headers in memory: no file read, no
/// `/proc/self/maps` (see [`elf::main_program_in_memory`]). It has no `has_debug_info`: a
/// profile without samples has no frames to give lines to.
pub(crate) fn main_module() -> Option<Module> {
    let (start, limit, offset, build_id) = elf::main_program_in_memory()?;
    let path = std::fs::read_link("/proc/self/exe").ok()?;
    Some(Module {
        start,
        limit,
        offset,
        path: path.into_os_string().into_string().ok()?,
        build_id,
        has_debug_info: false,
    })
}

/// A program named by its file alone (another process's, whose mappings were read before
/// its own were mapped, or not at all): for `File:` and its build id, at no address.
pub(crate) fn file_module(path: &str) -> Module {
    Module {
        start: 0,
        limit: 0,
        offset: 0,
        path: path.to_string(),
        build_id: read_elf_file(path).map(|i| i.build_id).unwrap_or_default(),
        has_debug_info: false,
    }
}

/// A source-level frame. An address gives several when functions were inlined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    /// Demangled: Rust without the `::h0123…` hash suffix, C++ in source form.
    pub name: String,
    /// The raw (mangled) symbol name if known, else the same as `name`.
    pub system_name: String,
    /// The source file, absolute when DWARF gives a compilation directory; `""` if unknown.
    pub file: String,
    /// The source line; 0 if unknown.
    pub line: u32,
}

/// Maps addresses of this process to modules and source frames.
///
/// Built from one snapshot of the process's mappings: libraries loaded after it are
/// unknown to it. Each file's DWARF is loaded on the first lookup that needs it.
pub struct Symbolizer {
    /// Sorted by `start`; mappings never overlap, so binary search finds an address.
    modules: Vec<Module>,
    /// `files[module_files[i]]` is the file that `modules[i]` maps: a file mapped twice is
    /// read and loaded once.
    module_files: Vec<usize>,
    files: Vec<ObjectFile>,
}

/// An ELF file of the process and what is cached about it, failures included, so that no
/// lookup opens it again.
struct ObjectFile {
    path: String,
    /// Where its DWARF and symbols are read: the file itself, or its separate debug file
    /// when it has no debug info of its own ([`shared::debug_file`]); looked for on the first
    /// lookup (a short program's exit reads only the files its samples are in).
    debug_path: Option<String>,
    /// Its ELF headers and notes, read at the first need: a short program's exit reads the
    /// files its samples are in and the program's own, never the other libraries it maps.
    info: std::cell::OnceCell<ElfInfo>,
    loader: LoaderState,
    /// Its separate debug file's DWARF is compressed and not read (see [`Self::loader`]):
    /// names come from that file's symbol table, without lines.
    dwarf_skipped: bool,
    /// The shared library this code is in, when it asked for its own frames to be named by
    /// its symbol table alone ([`own_frames_by_symbols`]).
    own_library: bool,
    /// Read on the first lookup that DWARF does not name; empty if that failed.
    symbols: Option<SymbolTable>,
    /// The file addresses the caller said it would look up ([`Symbolizer::will_look_up`]),
    /// sorted: the symbol table then keeps only the symbols that cover them.
    wanted: Vec<u64>,
    /// `symbols` holds only those that cover `wanted`: a lookup of another address reads
    /// the whole table.
    symbols_partial: bool,
}

enum LoaderState {
    NotLoaded,
    // Boxed: a `Loader` is large and most files of a process are never loaded.
    Loaded(Box<addr2line::Loader>),
    Failed,
}

/// The ELF information of the file at `path`, read into `cell` at the first call.
fn info_of<'a>(cell: &'a std::cell::OnceCell<ElfInfo>, path: &str) -> &'a ElfInfo {
    cell.get_or_init(|| read_elf_file(path).unwrap_or_default())
}

impl ObjectFile {
    fn info(&self) -> &ElfInfo {
        info_of(&self.info, &self.path)
    }

    /// Where its DWARF and symbols are read (see `debug_path`).
    fn debug_path(&mut self) -> &str {
        // Not `self.info()`: `debug_path` is borrowed mutably beside it.
        let (path, info) = (&self.path, info_of(&self.info, &self.path));
        self.debug_path.get_or_insert_with(|| {
            if info.has_debug_info {
                path.clone()
            } else {
                shared::debug_file(path, info, DEBUG_ROOT).unwrap_or_else(|| path.clone())
            }
        })
    }

    /// Whether frames get files and lines: DWARF of its own or in its debug file (once
    /// looked for).
    fn has_debug_info(&self) -> bool {
        !self.own_library && self.info().has_debug_info
            || (self.debug_path.as_ref().is_some_and(|d| *d != self.path) && !self.dwarf_skipped)
    }

    /// The file's DWARF and symbol tables, opened on first use; `None` if that failed, then
    /// or earlier.
    fn loader(&mut self) -> Option<&addr2line::Loader> {
        if let (LoaderState::NotLoaded, true) = (&self.loader, self.own_library) {
            self.loader = LoaderState::Failed;
            self.dwarf_skipped = true;
        }
        if let LoaderState::NotLoaded = self.loader {
            let path = self.debug_path().to_string();
            // A separate debug file with compressed DWARF (libc6-dbg's: 4 MB that inflate
            // to 15) cost 30-50 ms to load at the exit of every process with a sample in
            // libc; its symbol table names the functions (no lines, no inlined frames).
            let separate = path != self.path;
            // A file with no DWARF and no debug file (most of a distribution's programs):
            // addr2line would only build a map of its symbols, as the symbol table below
            // does (cc1's 29,000 dynamic symbols, twice, in every compiler run's exit).
            if !separate && !self.info().has_debug_info {
                self.loader = LoaderState::Failed;
                return None;
            }
            if separate && read_elf_file(&path).is_some_and(|i| i.debug_compressed) {
                self.loader = LoaderState::Failed;
                self.dwarf_skipped = true;
                return None;
            }
            self.loader = match addr2line::Loader::new(&path) {
                Ok(loader) => LoaderState::Loaded(Box::new(loader)),
                Err(_) => LoaderState::Failed,
            };
        }
        match &self.loader {
            LoaderState::Loaded(loader) => Some(loader),
            LoaderState::NotLoaded | LoaderState::Failed => None,
        }
    }

    /// The symbol-table name of the function at `svma`, demangled (no DWARF read).
    #[cfg(feature = "capture")]
    fn symbol(&mut self, svma: u64) -> Option<String> {
        self.symbol_table(svma)
            .find(svma)
            .map(|raw| demangle(&raw, None))
    }

    /// The symbol table that names `svma`: its debug file's, else its own (a debug file
    /// may keep none), read at the first need. Only the symbols that cover the addresses
    /// the caller said it would look up ([`Symbolizer::will_look_up`]), if `svma` is one of
    /// them; otherwise the whole table, from then on.
    fn symbol_table(&mut self, svma: u64) -> &SymbolTable {
        self.debug_path();
        if self.wanted.binary_search(&svma).is_err() {
            self.wanted = Vec::new();
            if self.symbols_partial {
                self.symbols = None;
                self.symbols_partial = false;
            }
        }
        let (path, fallback) = (self.debug_path.as_deref().unwrap_or(&self.path), &self.path);
        let wanted =
            (self.symbols.is_none() && !self.wanted.is_empty()).then_some(&self.wanted[..]);
        self.symbols_partial |= wanted.is_some();
        self.symbols.get_or_insert_with(|| {
            read_symbols_covering(path, wanted)
                .ok()
                .filter(SymbolTable::has_symbols)
                .or_else(|| read_symbols_covering(fallback, wanted).ok())
                .unwrap_or_default()
        })
    }

    /// The frames at `svma` (an address in the file's own address space).
    fn frames(&mut self, svma: u64) -> Vec<Frame> {
        // Malformed DWARF may fail half-way through the inline chain; then the symbol table
        // is the better answer, as the last frame must be the real function.
        let mut frames = self
            .loader()
            .and_then(|loader| dwarf_frames(loader, svma))
            .unwrap_or_default();
        // The outermost frame has no name when a unit has line info but no function entries
        // (hand-written assembly), and there is no frame at all without DWARF.
        if !frames.last().map_or(true, |frame| frame.name.is_empty()) {
            return frames;
        }
        if let Some(raw) = self.symbol_table(svma).find(svma) {
            let name = demangle(&raw, None);
            match frames.last_mut() {
                Some(outermost) => {
                    outermost.name = name;
                    outermost.system_name = raw.into_owned();
                }
                None => frames.push(Frame {
                    name,
                    system_name: raw.into_owned(),
                    file: String::new(),
                    line: 0,
                }),
            }
        }
        frames
    }
}

/// Set by [`own_frames_by_symbols`].
static OWN_FRAMES_BY_SYMBOLS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The shared library this code is linked into (libtickscope.so, preloaded) names its own
/// frames by its symbol table alone, without reading its DWARF: a profile written at a
/// program's exit with a sample in the library's hooks (a shell's `sigaction`, around every
/// fork) read the units of all 18 MB of it for one line, about 15 ms per process. Not for
/// a program's own binary, nor a library of the user's that uses the crate: their lines
/// are wanted.
pub(crate) fn own_frames_by_symbols() {
    OWN_FRAMES_BY_SYMBOLS.store(true, std::sync::atomic::Ordering::Relaxed);
}

impl Symbolizer {
    /// Modules are the executable mappings with a real file path (starting with `/`), sorted
    /// by start. No file is read here: lookups read what they need, and
    /// [`read_module_info`](Self::read_module_info) the build ids. Never fails: a file that
    /// cannot be read gives an empty build id and no frames.
    /// A symboliser of this process's mappings as they are now; `None` if they cannot be
    /// read.
    pub fn of_this_process() -> Option<Symbolizer> {
        read_self_maps().ok().map(|maps| Symbolizer::new(&maps))
    }

    pub(crate) fn new(maps: &[MapEntry]) -> Symbolizer {
        let mut entries: Vec<&MapEntry> = maps
            .iter()
            .filter(|entry| entry.executable && entry.path.starts_with('/'))
            .collect();
        entries.sort_by_key(|entry| entry.start);

        let own = OWN_FRAMES_BY_SYMBOLS
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| {
                let here = Symbolizer::new as *const () as u64;
                maps.iter()
                    .find(|m| (m.start..m.end).contains(&here))
                    .map(|m| m.path.as_str())
            })
            .flatten();
        let mut files: Vec<ObjectFile> = Vec::new();
        let mut file_of_path: HashMap<&str, usize> = HashMap::new();
        let mut modules = Vec::with_capacity(entries.len());
        let mut module_files = Vec::with_capacity(entries.len());
        for entry in entries {
            let file = *file_of_path.entry(&entry.path).or_insert_with(|| {
                files.push(ObjectFile {
                    path: entry.path.clone(),
                    debug_path: None,
                    info: Default::default(),
                    loader: LoaderState::NotLoaded,
                    dwarf_skipped: false,
                    own_library: own == Some(entry.path.as_str()),
                    symbols: None,
                    wanted: Vec::new(),
                    symbols_partial: false,
                });
                files.len() - 1
            });
            modules.push(Module {
                start: entry.start,
                limit: entry.end,
                offset: entry.offset,
                path: entry.path.clone(),
                build_id: String::new(),
                has_debug_info: false,
            });
            module_files.push(file);
        }
        Symbolizer {
            modules,
            module_files,
            files,
        }
    }

    /// The executable file mappings, sorted by start address. Their `build_id` and
    /// `has_debug_info` are filled by [`read_module_info`](Self::read_module_info).
    pub(crate) fn modules(&self) -> &[Module] {
        &self.modules
    }

    /// Fills the `build_id` and `has_debug_info` of the modules `wanted` picks (by index),
    /// reading their files' notes if no lookup has yet. `has_debug_info` counts the separate
    /// debug file a lookup in the module found (they are looked for at the first lookup).
    /// The others keep an empty build id.
    pub(crate) fn read_module_info(&mut self, wanted: impl Fn(usize, &Module) -> bool) {
        for (i, (m, &f)) in self.modules.iter_mut().zip(&self.module_files).enumerate() {
            if wanted(i, m) {
                let file = &self.files[f];
                m.build_id = file.info().build_id.clone();
                m.has_debug_info = file.has_debug_info();
            }
        }
    }

    /// Index into [`modules()`](Self::modules) of the module containing `addr`.
    pub fn module_of(&self, addr: u64) -> Option<usize> {
        let index = self
            .modules
            .partition_point(|module| module.start <= addr)
            .checked_sub(1)?;
        (addr < self.modules[index].limit).then_some(index)
    }

    /// The file `addr` (a runtime address in this process) is mapped from, and the address
    /// in that file's own address space; `None` if it is in no module's file.
    fn file_and_svma(&mut self, addr: u64) -> Option<(&mut ObjectFile, u64)> {
        let index = self.module_of(addr)?;
        let module = &self.modules[index];
        let file_offset = (addr - module.start).checked_add(module.offset)?;
        let file = &mut self.files[self.module_files[index]];
        let svma = file.info().svma(file_offset)?;
        Some((file, svma))
    }

    /// The function at `addr` from the symbol tables alone: no DWARF parsing, no inlined
    /// frames, so cheap enough for the capture's collector to name the sampler's stacks as
    /// they appear (the pprof profile, built once at the end, has the full detail).
    #[cfg(feature = "capture")]
    pub fn function(&mut self, addr: u64) -> Option<String> {
        let (file, svma) = self.file_and_svma(addr)?;
        file.symbol(svma)
    }

    /// Says which runtime addresses [`lookup`](Self::lookup) will be asked for (all of
    /// them, before the first): a file without DWARF then reads the names of only the
    /// symbols that cover them (a program's exit names a few addresses in files of tens of
    /// thousands of symbols). An address not said here is looked up all the same, at the
    /// cost of reading its file's whole table.
    pub(crate) fn will_look_up(&mut self, addrs: impl IntoIterator<Item = u64>) {
        for addr in addrs {
            if let Some((file, svma)) = self.file_and_svma(addr) {
                file.wanted.push(svma);
            }
        }
        for file in &mut self.files {
            file.wanted.sort_unstable();
            file.wanted.dedup();
        }
    }

    /// Source frames at `addr`, a runtime address in this process (the caller already
    /// subtracted 1 from return addresses, so that they fall inside the call).
    ///
    /// Innermost (most deeply inlined) frame first, the real function last: the order of
    /// pprof's `Location.line`. Without DWARF, one frame named from the ELF symbol table
    /// (`.symtab`, else `.dynsym`) with file `""` and line 0, if a symbol covers the address.
    /// Empty if nothing is known: the address is in no module or in no symbol, the file is
    /// stripped or gone.
    pub(crate) fn lookup(&mut self, addr: u64) -> Vec<Frame> {
        match self.file_and_svma(addr) {
            Some((file, svma)) => file.frames(svma),
            None => Vec::new(),
        }
    }
}

fn dwarf_frames(loader: &addr2line::Loader, svma: u64) -> Option<Vec<Frame>> {
    let mut iter = loader.find_frames(svma).ok()?;
    let mut frames = Vec::new();
    while let Some(frame) = iter.next().ok()? {
        let (name, system_name) = match &frame.function {
            Some(function) => {
                let raw = function.raw_name().ok()?;
                (demangle(&raw, function.language), raw.into_owned())
            }
            None => (String::new(), String::new()),
        };
        let (file, line) = match frame.location {
            Some(location) => (
                location.file.unwrap_or_default().to_owned(),
                location.line.unwrap_or(0),
            ),
            None => (String::new(), 0),
        };
        frames.push(Frame {
            name,
            system_name,
            file,
            line,
        });
    }
    Some(frames)
}

/// Demangles `raw` as `language` (from DWARF), or as Rust then C++ when unknown (symbol
/// tables). Rust names lose their hash suffix: addr2line formats them with `{:#}`.
fn demangle(raw: &str, language: Option<gimli::DwLang>) -> String {
    // Only names with an ELF mangling prefix (`_Z` Itanium C++ and legacy Rust, `_R` Rust
    // v0): cpp_demangle also accepts a bare type encoding, so a C function named `f` would
    // come back as `float`.
    if !(raw.starts_with("_Z") || raw.starts_with("_R")) {
        return raw.to_owned();
    }
    let demangled = match language {
        Some(language) => addr2line::demangle(raw, language),
        None => addr2line::demangle(raw, gimli::DW_LANG_Rust)
            .or_else(|| addr2line::demangle(raw, gimli::DW_LANG_C_plus_plus)),
    };
    demangled.unwrap_or_else(|| raw.to_owned())
}

#[cfg(test)]
#[allow(unsafe_code)] // reads the program counter with asm, for a test
mod tests {
    use super::*;

    #[test]
    fn parse_maps_reads_every_field_and_skips_garbage() {
        let text = "\
55d0c5a00000-55d0c5a2c000 r--p 00000000 fd:01 1835023                    /usr/bin/cat
55d0c5a2c000-55d0c5a5b000 r-xp 0002c000 fd:01 1835023                    /usr/bin/cat
7f1e3c000000-7f1e3c021000 rw-p 00000000 00:00 0 
7f1e3c400000-7f1e3c401000 rw-s 00001000 00:05 42                         /dev/shm/my file (1)
this is not a mapping
7ffd1a9e0000-7ffd1aa01000 rw-p 00000000 00:00 0                          [stack]
7ffd1abf2000-7ffd1abf4000 r-xp 00000000 00:00 0                          [vdso]
1000-0 r-xp 00000000 00:00 0
1000-2000 rwzp 00000000 00:00 0
1000-2000 r-xp 0000000g 00:00 0
1000-2000 r-xp 00000000 00:00 +1
7f1e3c800000-7f1e3c801000 r-xp 00000000 fd:01 99                         /tmp/gone (deleted)
";
        let entry = |start, end, offset, perms: &str, path: &str| MapEntry {
            start,
            end,
            offset,
            readable: perms.as_bytes()[0] == b'r',
            writable: perms.as_bytes()[1] == b'w',
            executable: perms.as_bytes()[2] == b'x',
            path: path.to_owned(),
        };
        let expected = vec![
            entry(0x55d0c5a00000, 0x55d0c5a2c000, 0, "r--", "/usr/bin/cat"),
            entry(
                0x55d0c5a2c000,
                0x55d0c5a5b000,
                0x2c000,
                "r-x",
                "/usr/bin/cat",
            ),
            entry(0x7f1e3c000000, 0x7f1e3c021000, 0, "rw-", ""),
            entry(
                0x7f1e3c400000,
                0x7f1e3c401000,
                0x1000,
                "rw-",
                "/dev/shm/my file (1)",
            ),
            entry(0x7ffd1a9e0000, 0x7ffd1aa01000, 0, "rw-", "[stack]"),
            entry(0x7ffd1abf2000, 0x7ffd1abf4000, 0, "r-x", "[vdso]"),
            entry(
                0x7f1e3c800000,
                0x7f1e3c801000,
                0,
                "r-x",
                "/tmp/gone (deleted)",
            ),
        ];
        assert_eq!(parse_maps(text), expected);
    }

    #[test]
    fn parse_maps_skips_lines_cut_before_the_inode() {
        let line = "55d0c5a2c000-55d0c5a5b000 r-xp 0002c000 fd:01 1835023   /usr/bin/cat";
        let inode_at = line.find("1835023").unwrap();
        for end in 0..=line.len() {
            let entries = parse_maps(&line[..end]);
            if end <= inode_at {
                assert_eq!(entries, Vec::new(), "{:?}", &line[..end]);
                continue;
            }
            // From the first inode digit on, the line is a mapping with a shorter path.
            let [entry] = &entries[..] else {
                panic!("{:?} gave {entries:?}", &line[..end]);
            };
            assert_eq!((entry.start, entry.end), (0x55d0c5a2c000, 0x55d0c5a5b000));
            assert_eq!(entry.offset, 0x2c000);
            assert!("/usr/bin/cat".starts_with(&entry.path), "{entry:?}");
        }
    }

    #[test]
    fn read_self_maps_finds_an_executable_mapping_of_the_test_binary() {
        let maps = read_self_maps().unwrap();
        let exe = std::env::current_exe().unwrap();
        let exe = exe.to_str().unwrap();
        assert!(
            maps.iter().any(|m| m.executable && m.path == exe),
            "{exe} not in {maps:#?}"
        );
    }

    /// A function to find by address. Returns the lines of its signature and its last statement.
    #[inline(never)]
    fn marker_function(x: u64) -> (u32, u32) {
        let first = line!() - 1;
        std::hint::black_box(x.wrapping_mul(3));
        (first, line!())
    }

    fn self_symbolizer() -> Symbolizer {
        let mut symbolizer = Symbolizer::new(&read_self_maps().unwrap());
        symbolizer.read_module_info(|_, _| true);
        symbolizer
    }

    #[test]
    fn function_of_the_test_binary_gets_its_name_file_and_line() {
        let (first, last) = marker_function(1);
        let mut symbolizer = self_symbolizer();
        let frames = symbolizer.lookup(marker_function as *const () as usize as u64);
        let frame = frames.last().expect("no frames for marker_function");
        assert_eq!(
            frame.name,
            "tickscope_sampler::symbolize::tests::marker_function"
        );
        // The mangled name keeps the hash that `name` drops.
        assert!(
            frame.system_name.starts_with("_ZN") || frame.system_name.starts_with("_R"),
            "{frame:?}"
        );
        assert!(frame.file.starts_with('/'), "{frame:?}");
        assert!(frame.file.ends_with("symbolize/mod.rs"), "{frame:?}");
        assert!(
            (first..=last).contains(&frame.line),
            "{frame:?}, lines {first}..={last}"
        );
    }

    /// Returns an address inside its own body, which `#[inline(always)]` copies into the
    /// caller even without optimisation, and the lines of that body.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[inline(always)]
    fn inlined_pc() -> (u64, u32, u32) {
        let first = line!();
        let pc: u64;
        // SAFETY: reads the program counter into a register; touches no memory, stack or
        // flags.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::asm!("lea {}, [rip]", out(reg) pc, options(nomem, nostack, preserves_flags));
        }
        // SAFETY: as above.
        #[cfg(target_arch = "aarch64")]
        unsafe {
            std::arch::asm!("adr {}, .", out(reg) pc, options(nomem, nostack, preserves_flags));
        }
        (pc, first, line!())
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[inline(never)]
    fn calls_inlined_pc() -> (u64, u32, u32, u32) {
        let call_line = line!() + 1;
        let (pc, first, last) = inlined_pc();
        (pc, first, last, call_line)
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn inlined_function_comes_first_and_its_caller_last() {
        let (pc, first, last, call_line) = calls_inlined_pc();
        let frames = self_symbolizer().lookup(pc);
        assert_eq!(frames.len(), 2, "{frames:#?}");
        assert_eq!(
            frames[0].name,
            "tickscope_sampler::symbolize::tests::inlined_pc"
        );
        assert!((first..=last).contains(&frames[0].line), "{frames:#?}");
        assert_eq!(
            frames[1].name,
            "tickscope_sampler::symbolize::tests::calls_inlined_pc"
        );
        assert_eq!(frames[1].line, call_line, "{frames:#?}");
        assert!(frames.iter().all(|f| f.file.ends_with("symbolize/mod.rs")));
    }

    /// Told beforehand which addresses it will look up, the symbolizer keeps only the
    /// symbols that cover them (libc's table: thousands), and names each address exactly
    /// as the whole table does, in functions, between them and at their ends; an address
    /// it was not told of is named all the same.
    #[test]
    fn addresses_said_beforehand_are_named_as_by_the_whole_table() {
        let getpid = libc::getpid as *const () as usize as u64;
        let mut whole = self_symbolizer();
        let index = whole.module_of(getpid).expect("getpid in no module");
        let module = whole.modules()[index].clone();
        // Every 997th byte of libc's code, getpid's own address left out.
        let addrs: Vec<u64> = (module.start..module.limit)
            .step_by(997)
            .filter(|&a| a != getpid)
            .collect();
        let mut told = self_symbolizer();
        told.will_look_up(addrs.iter().copied());
        let mut named = 0;
        for &a in &addrs {
            let frames = told.lookup(a);
            named += usize::from(!frames.is_empty());
            assert_eq!(frames, whole.lookup(a), "at {a:#x}");
        }
        assert!(named > addrs.len() / 2, "{named} of {} named", addrs.len());
        let file = told.module_files[index];
        // Named from its symbol table (not DWARF): only the symbols that cover an address.
        if let Some(partial) = &told.files[file].symbols {
            let all = whole.files[file]
                .symbols
                .as_ref()
                .expect("the whole table read");
            assert!(told.files[file].symbols_partial);
            assert!(
                partial.symbols().len() <= addrs.len() * 2
                    && partial.symbols().len() < all.symbols().len(),
                "{} kept of {}",
                partial.symbols().len(),
                all.symbols().len()
            );
        }
        let frames = told.lookup(getpid);
        assert!(!frames.is_empty());
        assert_eq!(frames, whole.lookup(getpid));
    }

    #[test]
    /// libc is stripped: named from its dynamic symbols, or, with its separate debug file
    /// installed (`libc6-dbg`, which test.sh installs: required under CI), from that file's
    /// symbols and DWARF, with a source file and line.
    fn libc_function_is_named_from_its_symbols_or_its_debug_file() {
        let addr = libc::getpid as *const () as usize as u64;
        let mut symbolizer = self_symbolizer();
        let module = symbolizer.module_of(addr).expect("getpid in no module");
        let frames = symbolizer.lookup(addr);
        // Its debug file is looked for at the first lookup in it.
        symbolizer.read_module_info(|_, _| true);
        let debug_path = symbolizer.files[symbolizer.module_files[module]]
            .debug_path()
            .to_string();
        let m = symbolizer.modules()[module].clone();
        assert!(m.path.contains("libc"), "{}", m.path);
        let outer = frames.last().unwrap_or_else(|| panic!("no frames"));
        assert!(outer.name.contains("getpid"), "{frames:#?}");
        let installed = std::path::Path::new(&format!(
            "{DEBUG_ROOT}/.build-id/{}/{}.debug",
            &m.build_id[..2],
            &m.build_id[2..]
        ))
        .exists();
        assert!(
            installed || std::env::var("CI").as_deref() != Ok("true"),
            "libc's debug file is not installed (test.sh installs libc6-dbg)"
        );
        // Debian ships it with compressed DWARF, too costly to inflate at every exit: then
        // its symbol table names the function, without a line.
        let compressed =
            installed && read_elf_file(&debug_path).is_some_and(|i| i.debug_compressed);
        assert_eq!(m.has_debug_info, installed && !compressed);
        if installed && !compressed {
            assert!(
                frames[0].line > 0 && !frames[0].file.is_empty(),
                "{frames:#?}"
            );
        } else {
            assert_eq!(frames.len(), 1, "{frames:#?}");
            assert_eq!(frames[0].line, 0);
            // Of a function's aliases, the name perf gives (`tickscope_pprof`'s `alias_rank`),
            // not `__pthread_mutex_lock@GLIBC_2.2.5` or `___pthread_mutex_lock`: the debug
            // file's symbol table keeps the version in the name, `.dynsym` does not.
            let lock = libc::pthread_mutex_lock as *const () as usize as u64;
            let named = symbolizer.lookup(lock);
            let expected = if installed {
                "pthread_mutex_lock@@GLIBC_2.2.5"
            } else {
                "pthread_mutex_lock"
            };
            assert_eq!(named.last().map(|f| f.name.as_str()), Some(expected));
        }
    }

    #[test]
    fn libc_address_just_past_a_symbol_gets_no_invented_name() {
        let getpid = libc::getpid as *const () as usize as u64;
        let mut symbolizer = self_symbolizer();
        let index = symbolizer.module_of(getpid).expect("getpid in no module");
        let file = symbolizer.module_files[index];
        // The table the symbolizer names it from: its debug file's when installed.
        let debug_path = symbolizer.files[file].debug_path().to_string();
        let (module, info) = (&symbolizer.modules[index], symbolizer.files[file].info());
        let table = read_symbols(&debug_path)
            .ok()
            .filter(|t| !t.symbols().is_empty())
            .or_else(|| read_symbols(&module.path).ok())
            .expect("libc unreadable");
        let covered = |svma: u64| {
            let symbols = table.symbols();
            symbols.iter().any(|s| svma.wrapping_sub(s.start) < s.size)
        };
        // The runtime address of `svma` when it is in this executable mapping.
        let runtime = |svma: u64| {
            let load = info
                .loads
                .iter()
                .find(|l| svma.wrapping_sub(l.vaddr) < l.file_size)?;
            let offset = (svma - load.vaddr + load.file_offset).checked_sub(module.offset)?;
            Some(module.start + offset).filter(|&addr| addr < module.limit)
        };
        // The first byte after a function, where no symbol is: the old nearest-preceding
        // lookup named it after that function.
        let gap = (table.symbols().iter())
            .map(|symbol| symbol.start + symbol.size)
            .filter(|&end| !covered(end))
            .find_map(|end| Some((end, runtime(end)?)));
        let Some((svma, addr)) = gap else {
            eprintln!("note: {} has no gap between symbols; skipped", module.path);
            return;
        };
        let path = module.path.clone();
        // With a debug package, DWARF names the function there, rightly.
        let loader = symbolizer.files[file].loader();
        if loader
            .and_then(|loader| dwarf_frames(loader, svma))
            .is_some_and(|f| !f.is_empty())
        {
            eprintln!("note: {path} has DWARF at {svma:#x}; skipped");
            return;
        }
        assert_eq!(symbolizer.lookup(addr), Vec::new(), "{path} at {svma:#x}");
    }

    #[test]
    fn test_binary_module_has_a_hex_build_id_and_debug_info() {
        let symbolizer = self_symbolizer();
        let module = symbolizer
            .module_of(marker_function as *const () as usize as u64)
            .map(|index| &symbolizer.modules()[index])
            .expect("marker_function in no module");
        let id = &module.build_id;
        assert!(!id.is_empty() && id.len() % 2 == 0, "{module:?}");
        assert!(
            id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "{module:?}"
        );
        assert!(module.has_debug_info, "{module:?}");
    }

    #[test]
    fn address_in_no_module_gives_no_frames() {
        let mut symbolizer = self_symbolizer();
        assert_eq!(symbolizer.module_of(16), None);
        assert_eq!(symbolizer.lookup(16), Vec::new());
    }

    #[test]
    fn modules_are_sorted_executable_file_mappings() {
        let maps = parse_maps(
            "\
7000-8000 r-xp 00002000 fd:01 7 /lib/b.so
1000-2000 r-xp 00001000 fd:01 6 /lib/a.so
2000-3000 rw-p 00000000 fd:01 6 /lib/a.so
3000-4000 r-xp 00000000 00:00 0 [vdso]
4000-5000 r-xp 00000000 00:00 0
",
        );
        let symbolizer = Symbolizer::new(&maps);
        let spans: Vec<_> = symbolizer
            .modules()
            .iter()
            .map(|m| (m.start, m.limit, m.offset, m.path.as_str()))
            .collect();
        assert_eq!(
            spans,
            [
                (0x1000, 0x2000, 0x1000, "/lib/a.so"),
                (0x7000, 0x8000, 0x2000, "/lib/b.so")
            ]
        );
        assert_eq!(symbolizer.module_of(0xfff), None);
        assert_eq!(symbolizer.module_of(0x1000), Some(0));
        assert_eq!(symbolizer.module_of(0x1fff), Some(0));
        assert_eq!(symbolizer.module_of(0x3000), None);
        assert_eq!(symbolizer.module_of(0x7fff), Some(1));
        assert_eq!(symbolizer.module_of(0x8000), None);
    }

    #[test]
    fn build_ids_are_read_for_the_modules_asked_for_only() {
        // The test binary, mapped twice (one file, two modules): only the first is asked
        // for.
        let exe = std::env::current_exe().unwrap();
        let maps = parse_maps(&format!(
            "1000-2000 r-xp 00000000 fd:01 6 {0}\n3000-4000 r-xp 00000000 fd:01 6 {0}\n",
            exe.display()
        ));
        let mut symbolizer = Symbolizer::new(&maps);
        assert!(symbolizer.modules().iter().all(|m| m.build_id.is_empty()));
        symbolizer.read_module_info(|i, _| i == 0);
        assert!(!symbolizer.modules()[0].build_id.is_empty());
        assert_eq!(symbolizer.modules()[1].build_id, "");
    }

    /// The program's mapping from its headers in memory is the one `/proc/self/maps` and
    /// its file give.
    #[test]
    fn the_programs_mapping_from_memory_matches_its_maps_line_and_file() {
        let from_memory = main_module().expect("the test binary has its program headers");
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let mut symbolizer = self_symbolizer();
        symbolizer.read_module_info(|_, _| true);
        let from_maps = symbolizer
            .modules()
            .iter()
            .find(|m| std::path::Path::new(&m.path) == exe)
            .expect("the test binary in no module");
        assert_eq!(
            (
                from_memory.start,
                from_memory.limit,
                from_memory.offset,
                &from_memory.path,
                &from_memory.build_id
            ),
            (
                from_maps.start,
                from_maps.limit,
                from_maps.offset,
                &from_maps.path,
                &from_maps.build_id
            )
        );
        assert!(!from_memory.build_id.is_empty());
    }

    #[test]
    fn file_that_is_not_elf_gives_nothing() {
        assert_eq!(
            read_elf_file(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")),
            None
        );
    }

    #[test]
    fn missing_file_gives_a_module_without_build_id_and_no_frames() {
        let maps =
            parse_maps("1000-2000 r-xp 00000000 fd:01 6 /nonexistent/tickscope/libgone.so\n");
        let mut symbolizer = Symbolizer::new(&maps);
        symbolizer.read_module_info(|_, _| true);
        assert_eq!(symbolizer.modules().len(), 1);
        assert_eq!(symbolizer.modules()[0].build_id, "");
        assert!(!symbolizer.modules()[0].has_debug_info);
        assert_eq!(symbolizer.lookup(0x1800), Vec::new());
    }

    #[test]
    fn file_that_failed_to_load_is_not_opened_again() {
        // A copy of this test binary, mapped where the real one is executable: its headers
        // read, but it is gone when its DWARF is first needed.
        let exe = std::env::current_exe().unwrap();
        let maps = read_self_maps().unwrap();
        let text = maps
            .iter()
            .find(|m| m.executable && Some(m.path.as_str()) == exe.to_str())
            .expect("test binary not mapped executable");
        let path = std::env::temp_dir().join(format!("tickscope-symbolize-{}", std::process::id()));
        let away = path.with_extension("away");
        std::fs::copy(&exe, &path).unwrap();
        let line = format!(
            "{:x}-{:x} r-xp {:x} fd:01 6 {}\n",
            text.start,
            text.end,
            text.offset,
            path.display()
        );
        let mut symbolizer = Symbolizer::new(&parse_maps(&line));
        symbolizer.read_module_info(|_, _| true);
        let real = self_symbolizer();
        let index = real.module_of(text.start).unwrap();
        let build_id = &symbolizer.modules()[0].build_id;
        assert!(!build_id.is_empty());
        assert_eq!(build_id, &real.modules()[index].build_id);
        std::fs::rename(&path, &away).unwrap();

        assert_eq!(symbolizer.lookup(text.start), Vec::new());
        assert!(matches!(symbolizer.files[0].loader, LoaderState::Failed));
        // Back again, but the failure is cached: no second attempt.
        std::fs::rename(&away, &path).unwrap();
        assert_eq!(symbolizer.lookup(text.start), Vec::new());
        assert!(matches!(symbolizer.files[0].loader, LoaderState::Failed));
        std::fs::remove_file(&path).unwrap();
    }
}
