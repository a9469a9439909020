//! What the symboliser reads from ELF files with `object`, without loading their DWARF:
//! build id, `PT_LOAD` segments, whether line info exists, and the function symbols.

use std::fs::File;

use object::elf::{self, FileHeader32, FileHeader64};
use object::read::elf::{FileHeader, NoteIterator, ProgramHeader, SectionHeader, Sym};
use object::{Endianness, FileKind, ReadCache};
use tickscope_fmt::symbols::alias_rank_of_bytes;

/// What [`Symbolizer::new`] learns from an ELF file's headers, without loading its DWARF.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct ElfInfo {
    pub(super) build_id: String,
    pub(super) has_debug_info: bool,
    /// Its `.debug_info` is compressed (`SHF_COMPRESSED`, or GNU's `.zdebug_info`), as
    /// Debian's debug packages ship it: reading its DWARF means inflating megabytes.
    pub(super) debug_compressed: bool,
    pub(super) loads: Vec<LoadSegment>,
    /// The file name in `.gnu_debuglink`: where a stripped file's debug info was put.
    pub(super) debug_link: Option<String>,
}

/// A `PT_LOAD` program header: the file bytes `file_offset..file_offset + file_size` sit
/// at virtual address `vaddr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LoadSegment {
    pub(super) file_offset: u64,
    pub(super) file_size: u64,
    pub(super) vaddr: u64,
    /// `PF_X`: its pages are mapped executable.
    pub(super) executable: bool,
}

impl ElfInfo {
    /// The file's virtual address of the byte at `file_offset`; `None` outside every
    /// loaded segment.
    pub(super) fn svma(&self, file_offset: u64) -> Option<u64> {
        svma_in(&self.loads, file_offset)
    }
}

/// The virtual address of the byte at `file_offset` by the segments `loads`.
fn svma_in(loads: &[LoadSegment], file_offset: u64) -> Option<u64> {
    let segment = loads.iter().find(|segment| {
        file_offset >= segment.file_offset && file_offset - segment.file_offset < segment.file_size
    })?;
    Some((file_offset - segment.file_offset).wrapping_add(segment.vaddr))
}

/// Build id, `PT_LOAD` segments and DWARF presence from the headers of the ELF file at
/// `path`; `None` if it cannot be opened or is not ELF.
pub(super) fn read_elf_file(path: &str) -> Option<ElfInfo> {
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

    let loads = load_segments::<Elf>(segments, endian);
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
    let names = section_names(header, endian, data, &sections);
    let name_of = |section: &Elf::SectionHeader| -> &[u8] {
        let start = section.sh_name(endian) as usize;
        names
            .get(start..)
            .map(|rest| &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())])
            .unwrap_or_default()
    };
    let has_debug_info = sections.iter().any(|section| {
        let name = name_of(section);
        (name == b".debug_line" || name == b".zdebug_line")
            && section.sh_type(endian) != elf::SHT_NOBITS
            && section.sh_size(endian).into() > 0
    });
    let debug_compressed = sections.iter().any(|section| {
        let name = name_of(section);
        name == b".zdebug_info"
            || (name == b".debug_info"
                && section.sh_flags(endian).into() & u64::from(elf::SHF_COMPRESSED) != 0)
    });
    // `.gnu_debuglink`: the debug file's name, NUL-terminated (then padding and a CRC).
    let debug_link = sections
        .iter()
        .find(|section| name_of(section) == b".gnu_debuglink")
        .and_then(|section| section.data(endian, data).ok())
        .and_then(|bytes| {
            let name = &bytes[..bytes.iter().position(|&b| b == 0)?];
            let name = std::str::from_utf8(name).ok()?;
            // A file name, never a path: nothing outside the directories searched.
            (!name.is_empty() && !name.contains('/')).then(|| name.to_string())
        });
    Some(ElfInfo {
        build_id,
        has_debug_info,
        debug_compressed,
        loads,
        debug_link,
    })
}

/// What unwinding from unwind tables needs of an ELF file: `.eh_frame` and its index
/// `.eh_frame_hdr` (bytes and file addresses), the address of `.text` and `.got` (bases of
/// some pointer encodings), and the `PT_LOAD` segments that translate a mapping's file
/// offset to those addresses.
#[derive(Debug, Default)]
pub(crate) struct UnwindSections {
    /// Copied out of the file into mappings that fork children do not get: the drain
    /// thread keeps them (see `sys::memory::not_into_fork_children`).
    pub(crate) eh_frame: Option<(std::ops::Range<u64>, crate::sys::memory::Zeroed<u8>)>,
    pub(crate) eh_frame_hdr: Option<(std::ops::Range<u64>, crate::sys::memory::Zeroed<u8>)>,
    pub(crate) text: Option<std::ops::Range<u64>>,
    pub(crate) got: Option<std::ops::Range<u64>>,
    pub(crate) loads: Vec<LoadSegment>,
}

impl UnwindSections {
    /// The file's virtual address of the first byte of an executable mapping of `len`
    /// bytes from file offset `offset` (a `/proc/self/maps` line's). The kernel maps whole
    /// pages, so the offset is the code segment's rounded down, and that page may also hold
    /// the end of the segment before it (a Rust library's read-only data, say): the segment
    /// is the executable one that the mapping holds or starts in, never the one before.
    pub(crate) fn mapping_svma(&self, offset: u64, len: u64) -> Option<u64> {
        let code = || self.loads.iter().filter(|segment| segment.executable);
        // The code segment that starts in the mapping, else one the mapping starts in (a
        // segment split by `mprotect`).
        let segment = code()
            .find(|segment| (offset..offset.saturating_add(len)).contains(&segment.file_offset))
            .or_else(|| {
                code().find(|segment| {
                    let end = segment.file_offset.saturating_add(segment.file_size);
                    (segment.file_offset..end).contains(&offset)
                })
            })?;
        Some(
            segment
                .vaddr
                .wrapping_add(offset.wrapping_sub(segment.file_offset)),
        )
    }
}

/// The program's own code mapping, read from its program headers in memory (`AT_PHDR`),
/// as (start, limit, file offset, build id): what a profile without samples names, with
/// neither `/proc/self/maps` nor the file read (a short program exec'd under `record`).
/// `None` where the headers do not say (no `PT_PHDR` to place them, no executable segment).
#[allow(unsafe_code)]
pub(crate) fn main_program_in_memory() -> Option<(u64, u64, u64, String)> {
    use object::elf::{ProgramHeader64, PF_X, PT_INTERP, PT_LOAD, PT_NOTE, PT_PHDR};
    let aux = |key| {
        // SAFETY: getauxval only reads the auxiliary vector; 0 where an entry is missing.
        unsafe { libc::getauxval(key) }
    };
    let (at, count, page, interpreter) = (
        aux(libc::AT_PHDR),
        aux(libc::AT_PHNUM),
        aux(libc::AT_PAGESZ),
        aux(libc::AT_BASE),
    );
    if at == 0 || count == 0 || count > 0xffff || at % 8 != 0 || !page.is_power_of_two() {
        return None;
    }
    // SAFETY: the kernel's `AT_PHDR` is the address of the program's `AT_PHNUM` program
    // headers, mapped readable for the life of the process (the dynamic loader reads them
    // there too); 64-bit ELF on this 64-bit target, 8-aligned (checked above).
    let headers = unsafe {
        std::slice::from_raw_parts(at as *const ProgramHeader64<Endianness>, count as usize)
    };
    let endian = Endianness::default();
    // A dynamic program run as `ld.so ./prog`: the loader rewrote the headers' entries to
    // the program's, but /proc/self/exe names the loader. Its mappings say which is which.
    if interpreter == 0 && headers.iter().any(|h| h.p_type(endian) == PT_INTERP) {
        return None;
    }
    let field = |h: &ProgramHeader64<Endianness>| {
        (
            h.p_type(endian),
            h.p_vaddr(endian),
            h.p_memsz(endian),
            h.p_filesz(endian),
        )
    };
    // Where the headers say they are loaded, against where they are: the load bias.
    let bias = headers
        .iter()
        .map(field)
        .find(|h| h.0 == PT_PHDR)
        .map(|h| at.wrapping_sub(h.1))?;
    let text = headers
        .iter()
        .find(|h| h.p_type(endian) == PT_LOAD && h.p_flags(endian) & PF_X != 0)?;
    let start = bias.wrapping_add(text.p_vaddr(endian)) & !(page - 1);
    let end = text.p_vaddr(endian).checked_add(text.p_memsz(endian))?;
    let limit = bias.wrapping_add(end).wrapping_add(page - 1) & !(page - 1);
    let offset = text.p_offset(endian) & !(page - 1);
    // A note is read only where a loaded segment's file bytes cover it.
    let loaded = |from: u64, len: u64| {
        headers.iter().map(field).any(|h| {
            h.0 == PT_LOAD && h.1 <= from && from.saturating_add(len) <= h.1.saturating_add(h.3)
        })
    };
    let build_id = headers
        .iter()
        .filter(|h| h.p_type(endian) == PT_NOTE)
        .filter(|h| loaded(h.p_vaddr(endian), h.p_filesz(endian)))
        .find_map(|h| {
            // SAFETY: the note segment lies within a loaded segment's file bytes (checked
            // above), mapped readable at the bias for the life of the process.
            let notes = unsafe {
                std::slice::from_raw_parts(
                    bias.wrapping_add(h.p_vaddr(endian)) as *const u8,
                    h.p_filesz(endian) as usize,
                )
            };
            let iter =
                NoteIterator::<FileHeader64<Endianness>>::new(endian, h.p_align(endian), notes);
            find_build_id(endian, iter.ok()?)
        })
        .unwrap_or_default();
    Some((start, limit, offset, build_id))
}

/// [`UnwindSections`] of the ELF file at `path` (only those sections are copied, not the
/// code); `None` if it cannot be opened or is not a 64-bit ELF file.
///
/// The file is mapped and its descriptor closed at once: this runs on the sampler's drain
/// thread while the program runs, and a program that closes every descriptor it did not
/// open, then opens files that take the same numbers, must never have one of them closed
/// by us. A descriptor held for the whole parse (milliseconds for libc) lost that race under
/// load; held for an `mmap`, as long as any other read of `/proc`.
#[allow(unsafe_code)]
pub(crate) fn read_unwind_sections(path: &str) -> Option<UnwindSections> {
    let file = File::open(path).ok()?;
    // SAFETY: a read-only private mapping of a loaded library or program, which the system
    // does not truncate while it is mapped and running (as addr2line maps them too); it is
    // only read through the slice below, and dropped before this returns.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    drop(file);
    read_unwind_sections_in(&map[..])
}

/// [`read_unwind_sections`] of an ELF image already in memory (the vDSO's).
pub(crate) fn read_unwind_sections_in<'data, R: object::ReadRef<'data>>(
    data: R,
) -> Option<UnwindSections> {
    match FileKind::parse(data).ok()? {
        FileKind::Elf64 => unwind_sections::<FileHeader64<Endianness>, R>(data),
        _ => None,
    }
}

fn unwind_sections<'data, Elf: FileHeader, R: object::ReadRef<'data>>(
    data: R,
) -> Option<UnwindSections> {
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let segments = header.program_headers(endian, data).ok()?;
    let sections = header.sections(endian, data).ok()?;
    let names = section_names(header, endian, data, &sections);
    let find = |wanted: &[u8]| {
        sections.iter().find(|section| {
            let start = section.sh_name(endian) as usize;
            names
                .get(start..)
                .is_some_and(|rest| rest.starts_with(wanted) && rest.get(wanted.len()) == Some(&0))
        })
    };
    let range = |section: &Elf::SectionHeader| {
        let start: u64 = section.sh_addr(endian).into();
        start..start + Into::<u64>::into(section.sh_size(endian))
    };
    let with_data = |name: &[u8]| {
        let section = find(name)?;
        if section.sh_type(endian) == elf::SHT_NOBITS {
            return None;
        }
        let bytes = section.data(endian, data).ok()?;
        Some((range(section), crate::sys::memory::bytes_not_forked(bytes)))
    };
    Some(UnwindSections {
        eh_frame: with_data(b".eh_frame"),
        eh_frame_hdr: with_data(b".eh_frame_hdr"),
        text: find(b".text").map(range),
        got: find(b".got").map(range),
        loads: load_segments::<Elf>(segments, endian),
    })
}

/// The `PT_LOAD` segments among a file's program headers.
fn load_segments<Elf: FileHeader>(
    segments: &[Elf::ProgramHeader],
    endian: Elf::Endian,
) -> Vec<LoadSegment> {
    segments
        .iter()
        .filter(|segment| segment.p_type(endian) == elf::PT_LOAD)
        .map(|segment| LoadSegment {
            file_offset: segment.p_offset(endian).into(),
            file_size: segment.p_filesz(endian).into(),
            vaddr: segment.p_vaddr(endian).into(),
            executable: segment.p_flags(endian) & elf::PF_X != 0,
        })
        .collect()
}

/// The section-name string table, read in one piece: looking a name up through `ReadCache`
/// reads the table from that name's offset on, one read per section (~450 system calls for
/// libc and ld.so at a short program's exit). Empty if it cannot be read.
fn section_names<'data, Elf: FileHeader, R: object::ReadRef<'data>>(
    header: &Elf,
    endian: Elf::Endian,
    data: R,
    sections: &object::read::elf::SectionTable<'data, Elf, R>,
) -> &'data [u8] {
    header
        .shstrndx(endian, data)
        .ok()
        .and_then(|i| sections.section(object::SectionIndex(i as usize)).ok())
        .and_then(|table| table.data(endian, data).ok())
        .unwrap_or_default()
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

/// The separate debug file of the ELF file at `path` (stripped, its DWARF and symbols put
/// aside as Debian's `-dbg`/`-dbgsym` packages and `objcopy --only-keep-debug` do): by build
/// id, `ROOT/.build-id/ab/cdef….debug`; by `.gnu_debuglink`, the name beside the file, in
/// its `.debug/` directory, or under `ROOT` at the file's directory, as gdb and perf look
/// (`ROOT` is `/usr/lib/debug`). Only a file that exists and, when both have a build id,
/// has the same one.
pub(super) fn debug_file(path: &str, info: &ElfInfo, root: &str) -> Option<String> {
    let id = &info.build_id;
    if id.len() > 2 {
        // Named by the build id: no need to open it to check (as gdb and perf).
        let by_id = format!("{root}/.build-id/{}/{}.debug", &id[..2], &id[2..]);
        if std::path::Path::new(&by_id).is_file() {
            return Some(by_id);
        }
    }
    let mut candidates = Vec::new();
    if let Some(link) = &info.debug_link {
        let dir = std::path::Path::new(path).parent()?.to_str()?;
        candidates.push(format!("{dir}/{link}"));
        candidates.push(format!("{dir}/.debug/{link}"));
        candidates.push(format!("{root}{dir}/{link}"));
    }
    candidates.into_iter().find(|c| {
        c != path
            && read_elf_file(c)
                .is_some_and(|d| d.build_id.is_empty() || id.is_empty() || d.build_id == *id)
    })
}

/// A function symbol: `size` bytes of code at file address `start`.
#[derive(Debug)]
pub(super) struct Symbol {
    pub(super) start: u64,
    pub(super) size: u64,
    /// Its raw (mangled) name: `SymbolTable::names[name.0..name.1]`.
    name: (u32, u32),
}

/// The function symbols of a file, which name addresses that DWARF does not. A name is
/// made a string only when it names an address: a profile written at exit looks up a few
/// addresses in tables of tens of thousands of symbols (cc1 exports 29,000).
#[derive(Debug, Default)]
pub(super) struct SymbolTable {
    /// Sorted by start, then by size, largest first; one symbol per (start, size).
    pub(super) symbols: Vec<Symbol>,
    /// `max_end[i]`: the largest end among `symbols[..=i]`. Symbols may overlap or nest, so
    /// the one containing an address need not be the last to start before it; this bounds
    /// the search backwards.
    pub(super) max_end: Vec<u64>,
    /// The names, one after another (the file's string table, or the names given).
    names: Vec<u8>,
    /// The file has code symbols, whether or not this table kept any.
    pub(super) has_symbols: bool,
}

impl SymbolTable {
    /// A table of `(start, size, name)`, aliases (same start and size) in order of
    /// preference: the first is kept. A symbol of size 0 is kept but names nothing, not even
    /// its start.
    #[cfg(test)]
    pub(super) fn new<'a>(symbols: impl IntoIterator<Item = (u64, u64, &'a str)>) -> SymbolTable {
        let mut names = Vec::new();
        let mut list = Vec::new();
        for (i, (start, size, name)) in symbols.into_iter().enumerate() {
            let at = names.len() as u32;
            names.extend_from_slice(name.as_bytes());
            list.push((
                Symbol {
                    start,
                    size,
                    name: (at, names.len() as u32),
                },
                i,
            ));
        }
        SymbolTable::sorted(list, names)
    }

    /// A table of `symbols`, each with its rank among aliases (the lowest is kept), over
    /// the `names` they point into.
    fn sorted<R: Ord>(mut symbols: Vec<(Symbol, R)>, names: Vec<u8>) -> SymbolTable {
        symbols.sort_unstable_by(|(a, ra), (b, rb)| {
            (a.start, std::cmp::Reverse(a.size), ra).cmp(&(b.start, std::cmp::Reverse(b.size), rb))
        });
        symbols.dedup_by_key(|(symbol, _)| (symbol.start, symbol.size));
        let symbols: Vec<Symbol> = symbols.into_iter().map(|(symbol, _)| symbol).collect();
        let max_end = symbols
            .iter()
            .scan(0, |max, symbol| {
                *max = symbol.start.saturating_add(symbol.size).max(*max);
                Some(*max)
            })
            .collect();
        SymbolTable {
            has_symbols: !symbols.is_empty(),
            symbols,
            max_end,
            names,
        }
    }

    /// The raw name of `symbol`, one of this table's.
    pub(super) fn name(&self, symbol: &Symbol) -> std::borrow::Cow<'_, str> {
        let bytes = self
            .names
            .get(symbol.name.0 as usize..symbol.name.1 as usize)
            .unwrap_or_default();
        String::from_utf8_lossy(bytes)
    }

    /// The raw name of the symbol with `start <= svma < start + size`, the innermost (the
    /// last to start) when several are; `None` when no symbol covers `svma`.
    pub(super) fn find(&self, svma: u64) -> Option<std::borrow::Cow<'_, str>> {
        let after = self.symbols.partition_point(|symbol| symbol.start <= svma);
        (0..after)
            .rev()
            .take_while(|&i| self.max_end[i] > svma)
            .map(|i| &self.symbols[i])
            .find(|symbol| svma - symbol.start < symbol.size)
            .map(|symbol| self.name(symbol))
    }
}

/// The function symbols of the ELF file at `path`, from `.symtab`, else `.dynsym` (all a
/// stripped library keeps); `None` if the file cannot be opened or is not ELF.
#[cfg(test)]
pub(super) fn read_symbols(path: &str) -> Option<SymbolTable> {
    read_symbols_covering(path, None)
}

/// [`read_symbols`], keeping, when `wanted` (file addresses, sorted) is given, only the
/// symbols that cover one of them: the table then names those addresses exactly as the
/// whole table would (every symbol that could name one is in it, aliases too), and no
/// other. A profile written at exit names a few addresses in each file: the names of the
/// others are never read.
pub(super) fn read_symbols_covering(path: &str, wanted: Option<&[u64]>) -> Option<SymbolTable> {
    let file = File::open(path).ok()?;
    // The headers through the cache; the tables read below, a piece at a time.
    let data = ReadCache::new(&file);
    match FileKind::parse(&data).ok()? {
        FileKind::Elf32 => read_elf_symbols::<FileHeader32<Endianness>>(&file, &data, wanted),
        FileKind::Elf64 => read_elf_symbols::<FileHeader64<Endianness>>(&file, &data, wanted),
        _ => None,
    }
}

/// Whether one of `wanted` (sorted) is in `start..start + size`.
fn covers_one(wanted: &[u64], start: u64, size: u64) -> bool {
    let i = wanted.partition_point(|&a| a < start);
    wanted.get(i).is_some_and(|&a| a - start < size)
}

/// How much of a symbol or string table is read at once: tables are read through one
/// buffer of this size, never whole (cc1's are 700 KB and 1 MB; a buffer that size, new
/// in a process's exit, cost a page fault per 4 KiB, its zeroing and its copy).
const PIECE: usize = 64 << 10;

/// A code symbol of a table, before its name is read.
struct Candidate {
    start: u64,
    size: u64,
    name: u32,
    weak: bool,
    global: bool,
}

/// [`read_symbols_covering`] for one ELF class. Reads the symbol and string tables, not the
/// DWARF.
fn read_elf_symbols<Elf: FileHeader>(
    file: &File,
    data: &ReadCache<&File>,
    wanted: Option<&[u64]>,
) -> Option<SymbolTable> {
    use std::os::unix::fs::FileExt;
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    for sh_type in [elf::SHT_SYMTAB, elf::SHT_DYNSYM] {
        let Some(section) = sections.iter().find(|s| s.sh_type(endian) == sh_type) else {
            continue;
        };
        let strings = sections
            .section(object::SectionIndex(section.sh_link(endian) as usize))
            .ok()
            .and_then(|s| s.file_range(endian));
        let (Some((table_at, table_len)), Some((strings_at, strings_len))) =
            (section.file_range(endian), strings)
        else {
            continue;
        };
        // Whether the file has code symbols at all (then an address none covers is named
        // by none), when only some are kept.
        let mut any = false;
        let mut candidates = Vec::new();
        let entry = std::mem::size_of::<Elf::Sym>();
        let count = usize::try_from(table_len).ok()? / entry;
        let mut piece = vec![0u8; (PIECE / entry).max(1) * entry];
        let mut first = 0;
        while first < count {
            let n = (piece.len() / entry).min(count - first);
            let bytes = &mut piece[..n * entry];
            file.read_exact_at(bytes, table_at + (first * entry) as u64)
                .ok()?;
            let symbols: &[Elf::Sym] = object::pod::slice_from_all_bytes(bytes).ok()?;
            for sym in symbols {
                // Code, and assembly symbols that have a size but no type.
                let code = matches!(
                    sym.st_type(),
                    elf::STT_FUNC | elf::STT_GNU_IFUNC | elf::STT_NOTYPE
                );
                let size = sym.st_size(endian).into();
                if !code || size == 0 || sym.is_undefined(endian) {
                    continue;
                }
                let start = sym.st_value(endian).into();
                if wanted.is_some_and(|w| !covers_one(w, start, size)) {
                    any = true;
                    continue;
                }
                let bind = sym.st_bind();
                candidates.push(Candidate {
                    start,
                    size,
                    name: sym.st_name(endian),
                    weak: bind == elf::STB_WEAK,
                    global: bind == elf::STB_GLOBAL,
                });
            }
            first += n;
        }
        let mut offsets: Vec<u32> = candidates.iter().map(|c| c.name).collect();
        offsets.sort_unstable();
        offsets.dedup();
        let (names, ranges) = read_strings(file, strings_at, strings_len, &offsets);
        let symbols: Vec<(Symbol, _)> = candidates
            .into_iter()
            .enumerate()
            .filter_map(|(i, c)| {
                // A name that runs off the table's end names nothing, as object's reader
                // has it; nor does an empty one.
                let at = offsets.binary_search(&c.name).ok()?;
                let name @ (from, to) = ranges[at]?;
                if from == to {
                    return None;
                }
                // Of aliases, the name perf gives: an exported `__getpid`, not libc's own
                // `__GI___getpid` (`tickscope_fmt::symbols`); the table's order among
                // equals.
                let bytes = &names[from as usize..to as usize];
                let rank = alias_rank_of_bytes(bytes, c.weak, c.global);
                let symbol = Symbol {
                    start: c.start,
                    size: c.size,
                    name,
                };
                Some((symbol, (rank, i)))
            })
            .collect();
        if !symbols.is_empty() || any {
            let mut table = SymbolTable::sorted(symbols, names);
            table.has_symbols = true;
            return Some(table);
        }
    }
    Some(SymbolTable::default())
}

/// The NUL-terminated strings at `offsets` (sorted) of the string table at `at..at + len` of
/// `file`: their bytes one after another, and each one's range there (`None` for one that
/// runs off the table's end). The table is read a piece at a time, only where a string is.
fn read_strings(
    file: &File,
    at: u64,
    len: u64,
    offsets: &[u32],
) -> (Vec<u8>, Vec<Option<(u32, u32)>>) {
    use std::os::unix::fs::FileExt;
    let mut window: Vec<u8> = Vec::new();
    let mut window_at = 0u64;
    let mut names = Vec::new();
    let mut ranges = Vec::with_capacity(offsets.len());
    for &offset in offsets {
        let offset = u64::from(offset);
        let mut size = PIECE;
        let found = loop {
            if offset >= window_at && offset < window_at + window.len() as u64 {
                let from = (offset - window_at) as usize;
                if let Ok(name) = std::ffi::CStr::from_bytes_until_nul(&window[from..]) {
                    break Some((from, name.to_bytes().len()));
                }
                if window_at + window.len() as u64 >= len {
                    break None;
                }
                // Longer than what is left of the window: read from the string on, twice
                // as much as it had.
                size = (window.len() - from).saturating_mul(2).max(PIECE);
            }
            if offset >= len {
                break None;
            }
            window.resize(size.min((len - offset) as usize), 0);
            if file.read_exact_at(&mut window, at + offset).is_err() {
                window.clear();
                break None;
            }
            window_at = offset;
        };
        ranges.push(found.and_then(|(from, n)| {
            let start = u32::try_from(names.len()).ok()?;
            names.extend_from_slice(&window[from..from + n]);
            Some((start, u32::try_from(names.len()).ok()?))
        }));
    }
    (names, ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stripped file's debug file: found under the root by build id, or beside the file by
    /// its `.gnu_debuglink` name, where one whose build id differs is not taken.
    #[test]
    fn a_debug_file_is_found_by_build_id_or_debuglink_and_must_match() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_str().unwrap();
        let info = read_elf_file(exe).unwrap();
        assert!(info.build_id.len() > 2, "the test binary has a build id");
        let root = std::env::temp_dir().join(format!("tickscope-debug-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let by_id = root.join(".build-id").join(&info.build_id[..2]);
        std::fs::create_dir_all(&by_id).unwrap();
        let found = by_id.join(format!("{}.debug", &info.build_id[2..]));
        std::fs::copy(exe, &found).unwrap();
        let r = root.to_str().unwrap();
        assert_eq!(
            debug_file("/nowhere/prog", &info, r).as_deref(),
            found.to_str()
        );
        // By debuglink, beside the file (no build id to go by).
        let beside = root.join("bin");
        std::fs::create_dir_all(&beside).unwrap();
        std::fs::copy(exe, beside.join("prog.debug")).unwrap();
        let mut linked = info.clone();
        linked.build_id.clear();
        linked.debug_link = Some("prog.debug".into());
        let prog = beside.join("prog");
        assert_eq!(
            debug_file(prog.to_str().unwrap(), &linked, r).as_deref(),
            beside.join("prog.debug").to_str()
        );
        // A linked file whose build id is not the program's is not its debug file.
        let mut other = linked.clone();
        other.build_id = "ab".repeat(20);
        assert_eq!(debug_file(prog.to_str().unwrap(), &other, r), None);
        // A link that names a path is not followed.
        linked.debug_link = Some("../x.debug".into());
        assert_eq!(
            debug_file(prog.to_str().unwrap(), &linked, "/nonexistent"),
            None
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn symbol_names_only_addresses_from_its_start_to_its_end() {
        let table = SymbolTable::new([
            (0x100, 0x10, "f"),
            (0x100, 0x10, "f_alias"),
            (0x200, 0x100, "outer"),
            (0x240, 0x20, "nested"),
            (0x400, 0, "sizeless"),
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
            assert_eq!(table.find(svma).as_deref(), name, "at {svma:#x}");
        }
    }

    /// A Rust library's layout: read-only data, then code starting in the same page of
    /// the file, a page further on in memory. Its executable mapping starts at the code's
    /// offset rounded down, which the data segment also covers.
    #[test]
    fn an_executable_mapping_is_placed_by_the_code_segment_not_the_one_sharing_its_page() {
        let data = LoadSegment {
            file_offset: 0,
            file_size: 0x7c61c,
            vaddr: 0,
            executable: false,
        };
        let code = LoadSegment {
            file_offset: 0x7c61c,
            file_size: 0x1b9054,
            vaddr: 0x7d61c,
            executable: true,
        };
        let sections = UnwindSections {
            loads: vec![data, code],
            ..UnwindSections::default()
        };
        // Mapped from 0x7c000 for 0x1ba000 bytes: its first byte is at 0x7d000.
        assert_eq!(sections.mapping_svma(0x7c000, 0x1ba000), Some(0x7d000));
        // A mapping split inside the code (mprotect): placed in the code too.
        assert_eq!(sections.mapping_svma(0x80000, 0x1000), Some(0x81000));
        // No code in it: no answer, rather than the data's address.
        assert_eq!(sections.mapping_svma(0x1000, 0x1000), None);
        // The byte-offset lookup the symboliser uses still places code bytes.
        assert_eq!(svma_in(&sections.loads, 0x7c61c), Some(0x7d61c));
    }

    #[test]
    fn file_offset_maps_to_address_only_inside_a_load_segment() {
        let info = ElfInfo {
            loads: vec![LoadSegment {
                file_offset: 0x1000,
                file_size: 0x500,
                vaddr: 0x401000,
                executable: true,
            }],
            ..ElfInfo::default()
        };
        assert_eq!(info.svma(0xfff), None);
        assert_eq!(info.svma(0x1000), Some(0x401000));
        assert_eq!(info.svma(0x1234), Some(0x401234));
        assert_eq!(info.svma(0x14ff), Some(0x4014ff));
        assert_eq!(info.svma(0x1500), None);
    }
}
