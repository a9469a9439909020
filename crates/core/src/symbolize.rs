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
//! headers with `object` (the copy addr2line builds), a few KiB per file, without mapping it.

// Used by the sampler's stop(); the integrator removes this once it calls in.
#![cfg_attr(not(test), allow(dead_code))]

use std::collections::HashMap;
use std::fs::File;
use std::io;

use addr2line::gimli;
use object::elf::{self, FileHeader32, FileHeader64};
use object::read::elf::{FileHeader, NoteIterator, ProgramHeader, SectionHeader, Sym};
use object::{Endianness, FileKind, ReadCache, StringTable};

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
    // Bytes, not `read_to_string`: one file name that is not UTF-8 must not make every
    // other mapping unknown. A mangled name only fails to open later.
    let bytes = std::fs::read("/proc/self/maps")?;
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
pub(crate) struct Symbolizer {
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
    info: ElfInfo,
    loader: LoaderState,
    /// Read on the first lookup that DWARF does not name; empty if that failed.
    symbols: Option<SymbolTable>,
}

enum LoaderState {
    NotLoaded,
    // Boxed: a `Loader` is large and most files of a process are never loaded.
    Loaded(Box<addr2line::Loader>),
    Failed,
}

impl ObjectFile {
    /// The file's DWARF and symbol tables, opened on first use; `None` if that failed, then
    /// or earlier.
    fn loader(&mut self) -> Option<&addr2line::Loader> {
        if let LoaderState::NotLoaded = self.loader {
            self.loader = match addr2line::Loader::new(&self.path) {
                Ok(loader) => LoaderState::Loaded(Box::new(loader)),
                Err(_) => LoaderState::Failed,
            };
        }
        match &self.loader {
            LoaderState::Loaded(loader) => Some(loader),
            LoaderState::NotLoaded | LoaderState::Failed => None,
        }
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
        let path = &self.path;
        let symbols = self
            .symbols
            .get_or_insert_with(|| read_symbols(path).unwrap_or_default());
        if let Some(raw) = symbols.find(svma) {
            let name = demangle(raw, None);
            match frames.last_mut() {
                Some(outermost) => {
                    outermost.name = name;
                    outermost.system_name = raw.to_owned();
                }
                None => frames.push(Frame {
                    name,
                    system_name: raw.to_owned(),
                    file: String::new(),
                    line: 0,
                }),
            }
        }
        frames
    }
}

impl Symbolizer {
    /// Modules are the executable mappings with a real file path (starting with `/`), sorted
    /// by start. Reads build ids from the files' ELF notes. Never fails: a file that cannot
    /// be read gives an empty build id and no frames.
    pub(crate) fn new(maps: &[MapEntry]) -> Symbolizer {
        let mut entries: Vec<&MapEntry> = maps
            .iter()
            .filter(|entry| entry.executable && entry.path.starts_with('/'))
            .collect();
        entries.sort_by_key(|entry| entry.start);

        let mut files: Vec<ObjectFile> = Vec::new();
        let mut file_of_path: HashMap<&str, usize> = HashMap::new();
        let mut modules = Vec::with_capacity(entries.len());
        let mut module_files = Vec::with_capacity(entries.len());
        for entry in entries {
            let file = *file_of_path.entry(&entry.path).or_insert_with(|| {
                files.push(ObjectFile {
                    path: entry.path.clone(),
                    info: read_elf_file(&entry.path).unwrap_or_default(),
                    loader: LoaderState::NotLoaded,
                    symbols: None,
                });
                files.len() - 1
            });
            modules.push(Module {
                start: entry.start,
                limit: entry.end,
                offset: entry.offset,
                path: entry.path.clone(),
                build_id: files[file].info.build_id.clone(),
                has_debug_info: files[file].info.has_debug_info,
            });
            module_files.push(file);
        }
        Symbolizer {
            modules,
            module_files,
            files,
        }
    }

    /// The executable file mappings, sorted by start address.
    pub(crate) fn modules(&self) -> &[Module] {
        &self.modules
    }

    /// Index into [`modules()`](Self::modules) of the module containing `addr`.
    pub(crate) fn module_of(&self, addr: u64) -> Option<usize> {
        let index = self
            .modules
            .partition_point(|module| module.start <= addr)
            .checked_sub(1)?;
        (addr < self.modules[index].limit).then_some(index)
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
        let Some(index) = self.module_of(addr) else {
            return Vec::new();
        };
        let module = &self.modules[index];
        let Some(file_offset) = (addr - module.start).checked_add(module.offset) else {
            return Vec::new();
        };
        let file = &mut self.files[self.module_files[index]];
        let Some(svma) = file.info.svma(file_offset) else {
            return Vec::new();
        };
        file.frames(svma)
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

/// What [`Symbolizer::new`] learns from an ELF file's headers, without loading its DWARF.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ElfInfo {
    build_id: String,
    has_debug_info: bool,
    loads: Vec<LoadSegment>,
}

/// A `PT_LOAD` program header: the file bytes `file_offset..file_offset + file_size` sit
/// at virtual address `vaddr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LoadSegment {
    file_offset: u64,
    file_size: u64,
    vaddr: u64,
}

impl ElfInfo {
    /// The file's virtual address of the byte at `file_offset`; `None` outside every
    /// loaded segment.
    fn svma(&self, file_offset: u64) -> Option<u64> {
        let segment = self.loads.iter().find(|segment| {
            file_offset >= segment.file_offset
                && file_offset - segment.file_offset < segment.file_size
        })?;
        Some((file_offset - segment.file_offset).wrapping_add(segment.vaddr))
    }
}

/// Build id, `PT_LOAD` segments and DWARF presence from the headers of the ELF file at
/// `path`; `None` if it cannot be opened or is not ELF.
fn read_elf_file(path: &str) -> Option<ElfInfo> {
    // `ReadCache` reads only the byte ranges asked for: the headers, the note areas and
    // section names, a few KiB of a file that may be hundreds of MiB.
    let data = ReadCache::new(File::open(path).ok()?);
    match FileKind::parse(&data).ok()? {
        FileKind::Elf32 => read_elf_info::<FileHeader32<Endianness>>(&data),
        FileKind::Elf64 => read_elf_info::<FileHeader64<Endianness>>(&data),
        _ => None,
    }
}

/// [`read_elf_file`] for one ELF class. `None` if the file header does not parse; a table
/// that does not is left empty, so a corrupt part hides only itself.
///
/// The low-level `FileHeader` API, not `ElfFile::parse` and `Object::build_id`: that parse
/// also reads the whole symbol table, megabytes in a large binary, and fails with it.
fn read_elf_info<Elf: FileHeader>(data: &ReadCache<File>) -> Option<ElfInfo> {
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let segments = header.program_headers(endian, data).unwrap_or_default();
    let sections = header.sections(endian, data).unwrap_or_default();

    let loads = segments
        .iter()
        .filter(|segment| segment.p_type(endian) == elf::PT_LOAD)
        .map(|segment| LoadSegment {
            file_offset: segment.p_offset(endian).into(),
            file_size: segment.p_filesz(endian).into(),
            vaddr: segment.p_vaddr(endian).into(),
        })
        .collect();
    // The build id is in a `PT_NOTE` segment of every linked executable and library; the
    // `SHT_NOTE` sections are the fallback.
    let segment_notes = segments.iter().map(|segment| segment.notes(endian, data));
    let section_notes = sections.iter().map(|section| section.notes(endian, data));
    let build_id = segment_notes
        .chain(section_notes)
        .find_map(|notes| find_build_id(endian, notes.ok()??))
        .unwrap_or_default();
    // Compressed DWARF keeps the name (`SHF_COMPRESSED`) or takes a `z` (GNU style); a
    // file stripped to a separate debug file keeps the name as `SHT_NOBITS`.
    let has_debug_info = [&b".debug_line"[..], b".zdebug_line"].iter().any(|name| {
        sections
            .section_by_name(endian, name)
            .is_some_and(|(_, section)| {
                section.sh_type(endian) != elf::SHT_NOBITS && section.sh_size(endian).into() > 0
            })
    });
    Some(ElfInfo {
        build_id,
        has_debug_info,
        loads,
    })
}

/// The `NT_GNU_BUILD_ID` note among `notes` (of one segment or section) as lowercase hex.
fn find_build_id<Elf: FileHeader>(
    endian: Elf::Endian,
    mut notes: NoteIterator<'_, Elf>,
) -> Option<String> {
    while let Some(note) = notes.next().ok()? {
        if note.name() == elf::ELF_NOTE_GNU && note.n_type(endian) == elf::NT_GNU_BUILD_ID {
            return Some(
                note.desc()
                    .iter()
                    .map(|byte| format!("{byte:02x}"))
                    .collect(),
            );
        }
    }
    None
}

/// A function symbol: `size` bytes of code at file address `start`.
#[derive(Debug)]
struct Symbol {
    start: u64,
    size: u64,
    /// Raw (mangled) name.
    name: String,
}

/// The function symbols of a file, which name addresses that DWARF does not.
#[derive(Debug, Default)]
struct SymbolTable {
    /// Sorted by start, then by size, largest first; one symbol per (start, size).
    symbols: Vec<Symbol>,
    /// `max_end[i]`: the largest end among `symbols[..=i]`. Symbols may overlap or nest, so
    /// the one containing an address need not be the last to start before it; this bounds
    /// the search backwards.
    max_end: Vec<u64>,
}

impl SymbolTable {
    /// Of aliases (same start and size), the first in `symbols` is kept. A symbol of size 0
    /// is kept but names nothing, not even its start.
    fn new(mut symbols: Vec<Symbol>) -> SymbolTable {
        // Stable: aliases keep their order.
        symbols.sort_by_key(|symbol| (symbol.start, std::cmp::Reverse(symbol.size)));
        symbols.dedup_by_key(|symbol| (symbol.start, symbol.size));
        let max_end = symbols
            .iter()
            .scan(0, |max, symbol| {
                *max = symbol.start.saturating_add(symbol.size).max(*max);
                Some(*max)
            })
            .collect();
        SymbolTable { symbols, max_end }
    }

    /// The raw name of the symbol with `start <= svma < start + size`, the innermost (the
    /// last to start) when several are; `None` when no symbol covers `svma`.
    fn find(&self, svma: u64) -> Option<&str> {
        let after = self.symbols.partition_point(|symbol| symbol.start <= svma);
        (0..after)
            .rev()
            .take_while(|&i| self.max_end[i] > svma)
            .map(|i| &self.symbols[i])
            .find(|symbol| svma - symbol.start < symbol.size)
            .map(|symbol| symbol.name.as_str())
    }
}

/// The function symbols of the ELF file at `path`, from `.symtab`, else `.dynsym` (all a
/// stripped library keeps); `None` if the file cannot be opened or is not ELF.
fn read_symbols(path: &str) -> Option<SymbolTable> {
    let data = ReadCache::new(File::open(path).ok()?);
    match FileKind::parse(&data).ok()? {
        FileKind::Elf32 => read_elf_symbols::<FileHeader32<Endianness>>(&data),
        FileKind::Elf64 => read_elf_symbols::<FileHeader64<Endianness>>(&data),
        _ => None,
    }
}

/// [`read_symbols`] for one ELF class. Reads the symbol and string tables, not the DWARF.
fn read_elf_symbols<Elf: FileHeader>(data: &ReadCache<File>) -> Option<SymbolTable> {
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    for sh_type in [elf::SHT_SYMTAB, elf::SHT_DYNSYM] {
        let Ok(table) = sections.symbols(endian, data, sh_type) else {
            continue;
        };
        // One read for all names: through the cache, each would be a read of its own.
        let strings = sections
            .section(table.string_section())
            .and_then(|section| section.data(endian, data))
            .unwrap_or_default();
        let strings = StringTable::new(strings, 0, strings.len() as u64);
        let mut symbols: Vec<(bool, Symbol)> = table
            .iter()
            .filter_map(|sym| {
                // Code, and assembly symbols that have a size but no type.
                let code = matches!(
                    sym.st_type(),
                    elf::STT_FUNC | elf::STT_GNU_IFUNC | elf::STT_NOTYPE
                );
                let size = sym.st_size(endian).into();
                if !code || size == 0 || sym.is_undefined(endian) {
                    return None;
                }
                let name = sym.name(endian, strings).ok().filter(|n| !n.is_empty())?;
                let name = String::from_utf8_lossy(name).into_owned();
                let start = sym.st_value(endian).into();
                // Of aliases, an exported name: `__getpid`, not libc's own `__GI___getpid`.
                let local = sym.st_bind() == elf::STB_LOCAL;
                Some((local, Symbol { start, size, name }))
            })
            .collect();
        symbols.sort_by_key(|&(local, _)| local);
        let table = SymbolTable::new(symbols.into_iter().map(|(_, symbol)| symbol).collect());
        if !table.symbols.is_empty() {
            return Some(table);
        }
    }
    Some(SymbolTable::default())
}

#[cfg(test)]
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
        Symbolizer::new(&read_self_maps().unwrap())
    }

    #[test]
    fn function_of_the_test_binary_gets_its_name_file_and_line() {
        let (first, last) = marker_function(1);
        let mut symbolizer = self_symbolizer();
        let frames = symbolizer.lookup(marker_function as *const () as usize as u64);
        let frame = frames.last().expect("no frames for marker_function");
        assert_eq!(frame.name, "tickscope::symbolize::tests::marker_function");
        // The mangled name keeps the hash that `name` drops.
        assert!(
            frame.system_name.starts_with("_ZN") || frame.system_name.starts_with("_R"),
            "{frame:?}"
        );
        assert!(frame.file.starts_with('/'), "{frame:?}");
        assert!(frame.file.ends_with("symbolize.rs"), "{frame:?}");
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
        assert_eq!(frames[0].name, "tickscope::symbolize::tests::inlined_pc");
        assert!((first..=last).contains(&frames[0].line), "{frames:#?}");
        assert_eq!(
            frames[1].name,
            "tickscope::symbolize::tests::calls_inlined_pc"
        );
        assert_eq!(frames[1].line, call_line, "{frames:#?}");
        assert!(frames.iter().all(|f| f.file.ends_with("symbolize.rs")));
    }

    #[test]
    fn libc_function_is_named_from_its_dynamic_symbol_table() {
        let addr = libc::getpid as *const () as usize as u64;
        let mut symbolizer = self_symbolizer();
        let module = symbolizer.module_of(addr).expect("getpid in no module");
        let path = &symbolizer.modules()[module].path;
        assert!(path.contains("libc"), "{path}");
        let frames = symbolizer.lookup(addr);
        assert_eq!(frames.len(), 1, "{frames:#?}");
        assert!(frames[0].name.contains("getpid"), "{frames:#?}");
        assert_eq!(frames[0].line, 0);
    }

    #[test]
    fn libc_address_just_past_a_symbol_gets_no_invented_name() {
        let getpid = libc::getpid as *const () as usize as u64;
        let mut symbolizer = self_symbolizer();
        let index = symbolizer.module_of(getpid).expect("getpid in no module");
        let (module, file) = (&symbolizer.modules[index], symbolizer.module_files[index]);
        let info = &symbolizer.files[file].info;
        let table = read_symbols(&module.path).expect("libc unreadable");
        let covered = |svma: u64| {
            let symbols = &table.symbols;
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
        let gap = (table.symbols.iter())
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
    fn symbol_names_only_addresses_from_its_start_to_its_end() {
        let symbol = |start, size, name: &str| Symbol {
            start,
            size,
            name: name.to_owned(),
        };
        let table = SymbolTable::new(vec![
            symbol(0x100, 0x10, "f"),
            symbol(0x100, 0x10, "f_alias"),
            symbol(0x200, 0x100, "outer"),
            symbol(0x240, 0x20, "nested"),
            symbol(0x400, 0, "sizeless"),
        ]);
        let cases = [
            (0xff, None),
            (0x100, Some("f")),
            (0x10f, Some("f")),
            (0x110, None),
            (0x23f, Some("outer")),
            (0x240, Some("nested")),
            (0x25f, Some("nested")),
            (0x260, Some("outer")),
            (0x2ff, Some("outer")),
            (0x300, None),
            (0x400, None),
            (0x401, None),
        ];
        for (svma, name) in cases {
            assert_eq!(table.find(svma), name, "at {svma:#x}");
        }
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
    fn file_offset_maps_to_address_only_inside_a_load_segment() {
        let info = ElfInfo {
            loads: vec![LoadSegment {
                file_offset: 0x1000,
                file_size: 0x500,
                vaddr: 0x401000,
            }],
            ..ElfInfo::default()
        };
        assert_eq!(info.svma(0xfff), None);
        assert_eq!(info.svma(0x1000), Some(0x401000));
        assert_eq!(info.svma(0x1234), Some(0x401234));
        assert_eq!(info.svma(0x14ff), Some(0x4014ff));
        assert_eq!(info.svma(0x1500), None);
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
