//! Symbolisation: raw instruction addresses of this process → pprof Mappings and Lines.
//!
//! The sampler's signal handler records bare addresses (the interrupted pc and return
//! addresses). At `stop()`, outside signal context, this module turns them into:
//! - [`Module`]s: the executable, file-backed mappings of `/proc/self/maps` ([`parse_maps`]),
//!   each with the GNU build id of its file;
//! - [`Frame`]s: function, file and line for an address, one frame per inlined call, from
//!   the file's DWARF through `addr2line`, or from its ELF symbol table when it has none.
//!
//! An address is translated in two steps, so that PIE executables and shared libraries both
//! work: runtime address → file offset (through the mapping's offset) → ELF virtual address
//! (through the `PT_LOAD` program header that holds that file offset), which is what the
//! file's DWARF and symbol tables speak.
//!
//! The build id, the load segments and whether DWARF line info exists are read from the ELF
//! headers by hand (a few KiB per file, without mapping it): `addr2line` 0.25 does not
//! re-export `object`, and this crate does not depend on `object` itself. With a direct
//! `object = "0.37"` dependency (the copy addr2line already builds) that reader could go.

// Used by the sampler's stop(); the integrator removes this once it calls in.
#![cfg_attr(not(test), allow(dead_code))]

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use addr2line::gimli;

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
    /// (`.symtab`, else `.dynsym`) with file `""` and line 0. Empty if nothing is known: the
    /// address is in no module, the file is stripped or gone.
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
        match file.loader() {
            Some(loader) => frames_at(loader, svma),
            None => Vec::new(),
        }
    }
}

/// The frames at `svma` (an address in the file's own address space).
fn frames_at(loader: &addr2line::Loader, svma: u64) -> Vec<Frame> {
    // Malformed DWARF may fail half-way through the inline chain; then the symbol table
    // is the better answer, as the last frame must be the real function.
    let mut frames = dwarf_frames(loader, svma).unwrap_or_default();
    // The outermost frame has no name when a unit has line info but no function entries
    // (hand-written assembly), and there is no frame at all without DWARF.
    if frames.last().map_or(true, |frame| frame.name.is_empty()) {
        if let Some(raw) = loader.find_symbol(svma) {
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
    }
    frames
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

// The ELF constants we read, from the System V gABI (`elf.h`).
const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const SHT_NOTE: u32 = 7;
const SHT_NOBITS: u32 = 8;
const NT_GNU_BUILD_ID: u32 = 3;
/// `e_phnum` value meaning "the count is in section 0's `sh_info`".
const PN_XNUM: u16 = 0xffff;
/// `e_shstrndx` value meaning "the index is in section 0's `sh_link`".
const SHN_XINDEX: u16 = 0xffff;
/// The most bytes read for one header table, note area or name table. Real files need a
/// few KiB; the cap keeps a corrupt header from asking for gigabytes.
const MAX_HEADER_READ: u64 = 1 << 20;

/// Reads at an offset without moving a cursor: a [`File`] (`pread`), or bytes in tests.
trait ReadAt {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

impl ReadAt for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
}

impl ReadAt for [u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| self.get(start..start.checked_add(buf.len())?))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

fn read_elf_file(path: &str) -> Option<ElfInfo> {
    read_elf_info(&File::open(path).ok()?)
}

/// Reads `len` bytes at `offset`, refusing more than [`MAX_HEADER_READ`].
fn read_bytes(src: &(impl ReadAt + ?Sized), offset: u64, len: u64) -> Option<Vec<u8>> {
    if len > MAX_HEADER_READ {
        return None;
    }
    let mut buf = vec![0; usize::try_from(len).ok()?];
    src.read_exact_at(&mut buf, offset).ok()?;
    Some(buf)
}

/// Class and byte order of an ELF file: where its header fields are and how to read them.
#[derive(Clone, Copy)]
struct Layout {
    is_64: bool,
    big_endian: bool,
}

impl Layout {
    /// The offset or size of a field: `for_64` in ELF64 structures, `for_32` in ELF32.
    fn pick(self, for_64: usize, for_32: usize) -> usize {
        if self.is_64 {
            for_64
        } else {
            for_32
        }
    }

    fn u16(self, bytes: &[u8], at: usize) -> Option<u16> {
        let raw: [u8; 2] = bytes.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(if self.big_endian {
            u16::from_be_bytes(raw)
        } else {
            u16::from_le_bytes(raw)
        })
    }

    fn u32(self, bytes: &[u8], at: usize) -> Option<u32> {
        let raw: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if self.big_endian {
            u32::from_be_bytes(raw)
        } else {
            u32::from_le_bytes(raw)
        })
    }

    fn u64(self, bytes: &[u8], at: usize) -> Option<u64> {
        let raw: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if self.big_endian {
            u64::from_be_bytes(raw)
        } else {
            u64::from_le_bytes(raw)
        })
    }

    /// An address-sized field (`Elf64_Addr`/`Elf64_Off`/`Elf64_Xword` or their 32-bit kin).
    fn word(self, bytes: &[u8], at: usize) -> Option<u64> {
        if self.is_64 {
            self.u64(bytes, at)
        } else {
            self.u32(bytes, at).map(u64::from)
        }
    }
}

/// A section header, the fields we use.
struct Section {
    name: u32,
    kind: u32,
    offset: u64,
    size: u64,
    align: u64,
}

impl Section {
    fn parse(layout: Layout, bytes: &[u8]) -> Option<Section> {
        Some(Section {
            name: layout.u32(bytes, 0)?,
            kind: layout.u32(bytes, 4)?,
            offset: layout.word(bytes, layout.pick(24, 16))?,
            size: layout.word(bytes, layout.pick(32, 20))?,
            align: layout.word(bytes, layout.pick(48, 32))?,
        })
    }
}

/// Build id, `PT_LOAD` segments and DWARF presence from an ELF file's headers. `None` if
/// it is not ELF; a part that cannot be read is left empty.
fn read_elf_info(src: &(impl ReadAt + ?Sized)) -> Option<ElfInfo> {
    let mut ident = [0; 16];
    src.read_exact_at(&mut ident, 0).ok()?;
    if ident[..4] != *b"\x7fELF" {
        return None;
    }
    let layout = Layout {
        is_64: match ident[4] {
            1 => false,
            2 => true,
            _ => return None,
        },
        big_endian: match ident[5] {
            1 => false,
            2 => true,
            _ => return None,
        },
    };
    let header = read_bytes(src, 0, layout.pick(64, 52) as u64)?;
    let phoff = layout.word(&header, layout.pick(32, 28))?;
    let shoff = layout.word(&header, layout.pick(40, 32))?;
    let phentsize = layout.u16(&header, layout.pick(54, 42))?;
    let e_phnum = layout.u16(&header, layout.pick(56, 44))?;
    let shentsize = layout.u16(&header, layout.pick(58, 46))?;
    let e_shnum = layout.u16(&header, layout.pick(60, 48))?;
    let e_shstrndx = layout.u16(&header, layout.pick(62, 50))?;

    // Section 0 holds the real counts when they do not fit the header's 16-bit fields.
    let shentsize_ok = usize::from(shentsize) >= layout.pick(64, 40);
    let section_0 = (shoff != 0 && shentsize_ok)
        .then(|| read_bytes(src, shoff, u64::from(shentsize)))
        .flatten();
    let section_0_u32 =
        |at_64: usize, at_32: usize| layout.u32(section_0.as_deref()?, layout.pick(at_64, at_32));
    let phnum = match e_phnum {
        PN_XNUM => section_0_u32(44, 28).map(u64::from), // sh_info
        count => Some(u64::from(count)),
    };
    let shnum = match e_shnum {
        0 => section_0
            .as_deref()
            .and_then(|bytes| layout.word(bytes, layout.pick(32, 20))), // sh_size
        count => Some(u64::from(count)),
    };
    let shstrndx = match e_shstrndx {
        SHN_XINDEX => section_0_u32(40, 24).map(u64::from), // sh_link
        index => Some(u64::from(index)),
    };

    let mut info = ElfInfo::default();

    // Program headers: the load segments, and the build id in a PT_NOTE segment, where
    // every linked executable and library has it.
    let phentsize_ok = usize::from(phentsize) >= layout.pick(56, 32);
    if let (Some(phnum), true) = (phnum, phentsize_ok && phoff != 0) {
        let table_len = phnum.checked_mul(u64::from(phentsize));
        let table = table_len.and_then(|len| read_bytes(src, phoff, len));
        for entry in table
            .as_deref()
            .unwrap_or_default()
            .chunks(phentsize.into())
        {
            let Some(kind) = layout.u32(entry, 0) else {
                continue;
            };
            let offset = layout.word(entry, layout.pick(8, 4));
            let vaddr = layout.word(entry, layout.pick(16, 8));
            let file_size = layout.word(entry, layout.pick(32, 16));
            let align = layout.word(entry, layout.pick(48, 28));
            let (Some(offset), Some(vaddr), Some(file_size), Some(align)) =
                (offset, vaddr, file_size, align)
            else {
                continue;
            };
            match kind {
                PT_LOAD => info.loads.push(LoadSegment {
                    file_offset: offset,
                    file_size,
                    vaddr,
                }),
                PT_NOTE if info.build_id.is_empty() => {
                    if let Some(notes) = read_bytes(src, offset, file_size) {
                        info.build_id = find_build_id(layout, &notes, align).unwrap_or_default();
                    }
                }
                _ => {}
            }
        }
    }

    // Section headers: DWARF presence, and the build id of a file without PT_NOTE.
    let sections: Vec<Section> = match (shnum, shentsize_ok && shoff != 0) {
        (Some(shnum), true) => shnum
            .checked_mul(u64::from(shentsize))
            .and_then(|len| read_bytes(src, shoff, len))
            .unwrap_or_default()
            .chunks(shentsize.into())
            .filter_map(|entry| Section::parse(layout, entry))
            .collect(),
        _ => Vec::new(),
    };
    let names = shstrndx
        .and_then(|index| sections.get(usize::try_from(index).ok()?))
        .and_then(|table| read_bytes(src, table.offset, table.size))
        .unwrap_or_default();
    for section in &sections {
        let name = usize::try_from(section.name)
            .ok()
            .and_then(|start| names.get(start..))
            .and_then(|tail| tail.split(|&b| b == 0).next())
            .unwrap_or_default();
        // Compressed DWARF keeps the name (`SHF_COMPRESSED`) or takes a `z` (GNU style);
        // a file stripped to a separate debug file keeps the name as SHT_NOBITS.
        if (name == b".debug_line" || name == b".zdebug_line")
            && section.kind != SHT_NOBITS
            && section.size > 0
        {
            info.has_debug_info = true;
        }
        if section.kind == SHT_NOTE && info.build_id.is_empty() {
            if let Some(notes) = read_bytes(src, section.offset, section.size) {
                info.build_id = find_build_id(layout, &notes, section.align).unwrap_or_default();
            }
        }
    }
    Some(info)
}

/// The `NT_GNU_BUILD_ID` note among `notes` (the contents of a note segment or section),
/// as lowercase hex.
fn find_build_id(layout: Layout, notes: &[u8], align: u64) -> Option<String> {
    // Name and descriptor are padded to the area's alignment: 4, or 8 for the 8-aligned
    // notes (`.note.gnu.property`) that newer toolchains emit.
    let align = if align == 8 { 8 } else { 4 };
    let pad = |at: usize| at.checked_add(align - 1).map(|end| end / align * align);
    let mut at = 0;
    while at < notes.len() {
        let name_size = usize::try_from(layout.u32(notes, at)?).ok()?;
        let desc_size = usize::try_from(layout.u32(notes, at + 4)?).ok()?;
        let kind = layout.u32(notes, at + 8)?;
        let name_at = at.checked_add(12)?;
        let desc_at = pad(name_at.checked_add(name_size)?)?;
        let desc_end = desc_at.checked_add(desc_size)?;
        let name = notes.get(name_at..name_at + name_size)?;
        let desc = notes.get(desc_at..desc_end)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() {
            return Some(desc.iter().map(|byte| format!("{byte:02x}")).collect());
        }
        at = pad(desc_end)?;
    }
    None
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

    /// A minimal ELF file: header, a `PT_LOAD` at file offset 0x1000 / address 0x401000, a
    /// `PT_NOTE` with build id `deadbeef` behind an 8-aligned property note, and sections
    /// `.shstrtab`, `.debug_line` (of `debug_line_kind`) and nothing else.
    fn synthetic_elf(layout: Layout, debug_line_kind: u32) -> Vec<u8> {
        let mut out = vec![0u8; 0x200];
        let put = |out: &mut Vec<u8>, at: usize, value: u64, size: usize| {
            let bytes = if layout.big_endian {
                value.to_be_bytes()[8 - size..].to_vec()
            } else {
                value.to_le_bytes()[..size].to_vec()
            };
            out[at..at + size].copy_from_slice(&bytes);
        };
        let word = layout.pick(8, 4);
        let (ph_size, sh_size) = (layout.pick(56, 32), layout.pick(64, 40));
        let (phoff, notes_at, names_at, shoff) = (0x40, 0xc0, 0x100, 0x120);

        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = if layout.is_64 { 2 } else { 1 };
        out[5] = if layout.big_endian { 2 } else { 1 };
        out[6] = 1;
        put(&mut out, layout.pick(32, 28), phoff, word);
        put(&mut out, layout.pick(40, 32), shoff, word);
        put(&mut out, layout.pick(54, 42), ph_size as u64, 2);
        put(&mut out, layout.pick(56, 44), 2, 2);
        put(&mut out, layout.pick(58, 46), sh_size as u64, 2);
        put(&mut out, layout.pick(60, 48), 3, 2);
        put(&mut out, layout.pick(62, 50), 1, 2);

        // (type, offset, vaddr, filesz, align)
        let segments = [
            (PT_LOAD, 0x1000, 0x401000, 0x500, 0x1000),
            (PT_NOTE, notes_at as u64, 0, 0x38, 8),
        ];
        for (i, (kind, offset, vaddr, filesz, align)) in segments.into_iter().enumerate() {
            let at = phoff as usize + i * ph_size;
            put(&mut out, at, kind.into(), 4);
            put(&mut out, at + layout.pick(8, 4), offset, word);
            put(&mut out, at + layout.pick(16, 8), vaddr, word);
            put(&mut out, at + layout.pick(32, 16), filesz, word);
            put(&mut out, at + layout.pick(48, 28), align, word);
        }

        // NT_GNU_PROPERTY_TYPE_0 (4-byte name, 12-byte desc padded to 16), then the id.
        put(&mut out, notes_at, 4, 4);
        put(&mut out, notes_at + 4, 12, 4);
        put(&mut out, notes_at + 8, 5, 4);
        out[notes_at + 12..notes_at + 16].copy_from_slice(b"GNU\0");
        let id_at = notes_at + 32;
        put(&mut out, id_at, 4, 4);
        put(&mut out, id_at + 4, 4, 4);
        put(&mut out, id_at + 8, NT_GNU_BUILD_ID.into(), 4);
        out[id_at + 12..id_at + 16].copy_from_slice(b"GNU\0");
        out[id_at + 16..id_at + 20].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);

        let names = b"\0.shstrtab\0.debug_line\0";
        out[names_at..names_at + names.len()].copy_from_slice(names);
        // (name, type, offset, size); section 0 stays all zero.
        let sections = [
            (1, 3, names_at as u64, names.len() as u64),
            (11, debug_line_kind, 0x1f0, 0x10),
        ];
        for (i, (name, kind, offset, size)) in sections.into_iter().enumerate() {
            let at = shoff as usize + (i + 1) * sh_size;
            put(&mut out, at, name, 4);
            put(&mut out, at + 4, kind.into(), 4);
            put(&mut out, at + layout.pick(24, 16), offset, word);
            put(&mut out, at + layout.pick(32, 20), size, word);
        }
        out.resize(shoff as usize + 3 * sh_size, 0);
        out
    }

    const LAYOUTS: [Layout; 4] = [
        Layout {
            is_64: true,
            big_endian: false,
        },
        Layout {
            is_64: true,
            big_endian: true,
        },
        Layout {
            is_64: false,
            big_endian: false,
        },
        Layout {
            is_64: false,
            big_endian: true,
        },
    ];

    #[test]
    fn elf_headers_give_build_id_debug_info_and_loads_in_every_class_and_byte_order() {
        const SHT_PROGBITS: u32 = 1;
        for layout in LAYOUTS {
            for (kind, has_debug_info) in [(SHT_PROGBITS, true), (SHT_NOBITS, false)] {
                let elf = synthetic_elf(layout, kind);
                let info = read_elf_info(&elf[..]).expect("not parsed as ELF");
                let expected = ElfInfo {
                    build_id: "deadbeef".to_owned(),
                    has_debug_info,
                    loads: vec![LoadSegment {
                        file_offset: 0x1000,
                        file_size: 0x500,
                        vaddr: 0x401000,
                    }],
                };
                assert_eq!(
                    info, expected,
                    "64-bit {}, big-endian {}",
                    layout.is_64, layout.big_endian
                );
            }
        }
    }

    #[test]
    fn extended_header_counts_are_read_from_section_0() {
        for layout in LAYOUTS {
            let plain = read_elf_info(&synthetic_elf(layout, 1)[..]).unwrap();
            let mut elf = synthetic_elf(layout, 1);
            let set = |elf: &mut Vec<u8>, at: usize, value: u64, size: usize| {
                let bytes = if layout.big_endian {
                    value.to_be_bytes()[8 - size..].to_vec()
                } else {
                    value.to_le_bytes()[..size].to_vec()
                };
                elf[at..at + size].copy_from_slice(&bytes);
            };
            set(&mut elf, layout.pick(56, 44), PN_XNUM.into(), 2);
            set(&mut elf, layout.pick(60, 48), 0, 2);
            set(&mut elf, layout.pick(62, 50), SHN_XINDEX.into(), 2);
            let section_0 = 0x120;
            let word = layout.pick(8, 4);
            set(&mut elf, section_0 + layout.pick(32, 20), 3, word); // sh_size: shnum
            set(&mut elf, section_0 + layout.pick(40, 24), 1, 4); // sh_link: shstrndx
            set(&mut elf, section_0 + layout.pick(44, 28), 2, 4); // sh_info: phnum
            assert_eq!(
                read_elf_info(&elf[..]),
                Some(plain),
                "64-bit {}, big-endian {}",
                layout.is_64,
                layout.big_endian
            );
        }
    }

    #[test]
    fn file_offset_maps_to_address_only_inside_a_load_segment() {
        let info = read_elf_info(&synthetic_elf(LAYOUTS[0], 1)[..]).unwrap();
        assert_eq!(info.svma(0xfff), None);
        assert_eq!(info.svma(0x1000), Some(0x401000));
        assert_eq!(info.svma(0x1234), Some(0x401234));
        assert_eq!(info.svma(0x14ff), Some(0x4014ff));
        assert_eq!(info.svma(0x1500), None);
    }

    #[test]
    fn truncated_or_foreign_files_never_panic() {
        assert_eq!(read_elf_info(&b"#!/bin/sh\n"[..]), None);
        for layout in LAYOUTS {
            let elf = synthetic_elf(layout, 1);
            for len in 0..elf.len() {
                // Whatever survives is fine; reading must not panic.
                let _ = read_elf_info(&elf[..len]);
            }
        }
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
        let path =
            std::env::temp_dir().join(format!("tickscope-symbolize-{}.so", std::process::id()));
        std::fs::write(&path, synthetic_elf(LAYOUTS[0], 1)).unwrap();
        let line = format!("7000-8000 r-xp 00001000 fd:01 6 {}\n", path.display());
        let mut symbolizer = Symbolizer::new(&parse_maps(&line));
        assert_eq!(symbolizer.modules()[0].build_id, "deadbeef");
        std::fs::remove_file(&path).unwrap();

        assert_eq!(symbolizer.lookup(0x7010), Vec::new());
        assert!(matches!(symbolizer.files[0].loader, LoaderState::Failed));
        // Back again, but the failure is cached: no second attempt.
        std::fs::write(&path, synthetic_elf(LAYOUTS[0], 1)).unwrap();
        assert_eq!(symbolizer.lookup(0x7010), Vec::new());
        assert!(matches!(symbolizer.files[0].loader, LoaderState::Failed));
        std::fs::remove_file(&path).unwrap();
    }
}
