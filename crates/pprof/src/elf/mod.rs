//! What both symbolisers read from ELF files, with `object` and without loading their DWARF:
//! the build id, the `PT_LOAD` segments that turn a file offset into a file address, whether
//! DWARF is there (and compressed), `.gnu_debuglink` and the separate debug file it and the
//! build id lead to ([`debug_file`]), and the function symbols that cover some addresses
//! ([`read_symbols_covering`]), aliases ranked as perf ranks them ([`alias_rank`]).
//!
//! The sampler (`tickscope-sampler`) names its process's addresses at exit with it, and adds
//! DWARF through addr2line; the profile crate (`tickscope-profile`) names the bare addresses
//! of a profile read from a file. Both read only what they need: headers, notes and section
//! names through `object::ReadCache` (a few KiB), symbol and string tables 64 KiB at a time,
//! the names of only the symbols that cover a wanted address; never a whole binary.
//!
//! The generic functions ([`load_segments`], [`section_names`], [`find_build_id`]) take
//! `object`'s ELF types, for readers of other images (the sampler's unwind tables, its own
//! program headers in memory): `object` is the version the workspace sets.
//!
//! ```no_run
//! use tickscope_pprof::elf;
//!
//! let info = elf::read_elf_file("/usr/bin/ls")?;
//! // The file address of the byte at file offset 0x1234, if a segment loads it.
//! if let Some(svma) = info.svma(0x1234) {
//!     // Its debug file's symbols if one is installed, else its own.
//!     let debug = elf::debug_file("/usr/bin/ls", &info, elf::DEBUG_ROOT);
//!     let from = debug.as_deref().unwrap_or("/usr/bin/ls");
//!     let table = elf::read_symbols_covering(from, Some(&[svma]))?;
//!     println!("{:?}", table.find(svma));
//! }
//! # Ok::<(), elf::Error>(())
//! ```

use std::fmt;
use std::fs::File;

use object::elf::{self as abi, FileHeader32, FileHeader64};
use object::read::elf::{FileHeader, NoteIterator, ProgramHeader, SectionHeader};
use object::{Endian, Endianness, FileKind, ReadCache};

mod alias;
mod debug;
mod symbols;

pub use alias::{alias_rank, alias_rank_of_bytes, AliasRank};
pub use debug::{debug_file, DEBUG_ROOT};
pub use symbols::{read_symbols, read_symbols_covering, Symbol, SymbolTable};

/// Why an ELF file could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// It could not be opened or read: the system's error.
    Io(std::io::Error),
    /// It is not an ELF file this reader reads: another format, or headers that do not
    /// parse; what was wrong, as `object` says it.
    NotElf(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => e.fmt(f),
            Error::NotElf(why) => write!(f, "not an ELF file we can read ({why})"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            Error::NotElf(_) => None,
        }
    }
}

/// The error of `file` that did not parse because of `why`: the system's error where its
/// first bytes cannot be read (a directory, a failing disk), else [`Error::NotElf`].
fn not_elf(file: &File, why: impl fmt::Display) -> Error {
    use std::os::unix::fs::FileExt;
    match file.read_at(&mut [0; 16], 0) {
        Err(e) => Error::Io(e),
        Ok(_) => Error::NotElf(why.to_string()),
    }
}

/// What [`read_elf_file`] learns from an ELF file's headers, without loading its DWARF.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElfInfo {
    /// Lowercase hex of its `NT_GNU_BUILD_ID` note; `""` if it has none.
    pub build_id: String,
    /// It has DWARF line info (a non-empty `.debug_line` or `.zdebug_line`).
    pub has_debug_info: bool,
    /// Its `.debug_info` is compressed (`SHF_COMPRESSED`, or GNU's `.zdebug_info`), as
    /// Debian's debug packages ship it: reading its DWARF means inflating megabytes.
    pub debug_compressed: bool,
    /// It has a static symbol table (`.symtab`: it is not stripped), so its local functions
    /// are named by it.
    pub has_symtab: bool,
    /// It is a fixed-address executable (`ET_EXEC`): it runs at its file addresses.
    pub fixed: bool,
    /// Its `PT_LOAD` segments, in the order of its program headers.
    pub loads: Vec<LoadSegment>,
    /// Its `.gnu_debuglink`: where a stripped file's debug info was put.
    pub debug_link: Option<DebugLink>,
}

/// A `PT_LOAD` program header: the file bytes `file_offset..file_offset + file_size` sit at
/// file (virtual) address `vaddr`, in `mem_size` bytes of memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadSegment {
    /// Where its bytes start in the file.
    pub file_offset: u64,
    /// How many bytes of the file it loads.
    pub file_size: u64,
    /// The address it is loaded at, before any load bias.
    pub vaddr: u64,
    /// Its size in memory: `file_size` and the zeroed rest (`.bss`).
    pub mem_size: u64,
    /// `PF_X`: its pages are mapped executable.
    pub executable: bool,
}

/// A file's `.gnu_debuglink`: the name of its separate debug file, and that file's CRC-32.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebugLink {
    /// A file name, never a path (a link naming one is not kept): the debug file is looked
    /// for only in the directories [`debug_file`] searches.
    pub name: String,
    /// The CRC-32 (gzip's) of the whole debug file; `None` if the section is cut short.
    pub crc: Option<u32>,
}

impl ElfInfo {
    /// The file's virtual address of the byte at `file_offset`; `None` outside every
    /// loaded segment.
    pub fn svma(&self, file_offset: u64) -> Option<u64> {
        svma_in(&self.loads, file_offset)
    }
}

/// The virtual address of the byte at `file_offset` by the segments `loads`; `None` outside
/// every one's file bytes.
pub fn svma_in(loads: &[LoadSegment], file_offset: u64) -> Option<u64> {
    let segment = loads.iter().find(|segment| {
        file_offset >= segment.file_offset && file_offset - segment.file_offset < segment.file_size
    })?;
    Some((file_offset - segment.file_offset).wrapping_add(segment.vaddr))
}

/// Build id, `PT_LOAD` segments, DWARF presence, `.symtab` presence and `.gnu_debuglink` from
/// the headers of the ELF file at `path`. [`Error::Io`] if it cannot be opened or read,
/// [`Error::NotElf`] if its file header does not parse; a part that does not parse (a
/// table, a note) is left empty, so that it hides only itself.
pub fn read_elf_file(path: &str) -> Result<ElfInfo, Error> {
    let file = File::open(path).map_err(Error::Io)?;
    // `ReadCache` reads only the byte ranges asked for: the headers, the note areas and
    // section names, a few KiB of a file that may be hundreds of MiB.
    let data = ReadCache::new(&file);
    let info = match FileKind::parse(&data) {
        Ok(FileKind::Elf32) => read_elf_info::<FileHeader32<Endianness>>(&data),
        Ok(FileKind::Elf64) => read_elf_info::<FileHeader64<Endianness>>(&data),
        // As `object::File::parse` says it with only ELF built.
        Ok(_) => return Err(not_elf(&file, "Unsupported file format")),
        Err(e) => Err(e),
    };
    info.map_err(|e| not_elf(&file, e))
}

/// [`read_elf_file`] for one ELF class.
///
/// The low-level `FileHeader` API, not `ElfFile::parse` and `Object::build_id`: that parse
/// also reads the whole symbol table, megabytes in a large binary, and fails with it.
fn read_elf_info<Elf: FileHeader>(data: &ReadCache<&File>) -> object::Result<ElfInfo> {
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let segments = header.program_headers(endian, data).unwrap_or_default();
    let sections = header.sections(endian, data).unwrap_or_default();

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
            && section.sh_type(endian) != abi::SHT_NOBITS
            && section.sh_size(endian).into() > 0
    });
    let debug_compressed = sections.iter().any(|section| {
        let name = name_of(section);
        name == b".zdebug_info"
            || (name == b".debug_info"
                && section.sh_flags(endian).into() & u64::from(abi::SHF_COMPRESSED) != 0)
    });
    let has_symtab = sections.iter().any(|section| {
        section.sh_type(endian) == abi::SHT_SYMTAB && section.sh_size(endian).into() > 0
    });
    let debug_link = sections
        .iter()
        .find(|section| name_of(section) == b".gnu_debuglink")
        .and_then(|section| section.data(endian, data).ok())
        .and_then(|bytes| debug_link(endian, bytes));
    Ok(ElfInfo {
        build_id,
        has_debug_info,
        debug_compressed,
        has_symtab,
        fixed: header.e_type(endian) == abi::ET_EXEC,
        loads: load_segments::<Elf>(segments, endian),
        debug_link,
    })
}

/// The contents of a `.gnu_debuglink` section: the debug file's name, NUL-terminated, padded
/// to 4 bytes, then its CRC-32 in the file's byte order. `None` for an empty name or one that
/// is a path (nothing outside the directories searched is read).
fn debug_link(endian: impl Endian, bytes: &[u8]) -> Option<DebugLink> {
    let len = bytes.iter().position(|&b| b == 0)?;
    let name = std::str::from_utf8(&bytes[..len]).ok()?;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    let at = (len + 1).next_multiple_of(4);
    let crc = bytes
        .get(at..at + 4)
        .map(|crc| endian.read_u32_bytes(crc.try_into().expect("4 bytes")));
    Some(DebugLink {
        name: name.to_string(),
        crc,
    })
}

/// The `PT_LOAD` segments among a file's program headers `segments`.
pub fn load_segments<Elf: FileHeader>(
    segments: &[Elf::ProgramHeader],
    endian: Elf::Endian,
) -> Vec<LoadSegment> {
    segments
        .iter()
        .filter(|segment| segment.p_type(endian) == abi::PT_LOAD)
        .map(|segment| LoadSegment {
            file_offset: segment.p_offset(endian).into(),
            file_size: segment.p_filesz(endian).into(),
            vaddr: segment.p_vaddr(endian).into(),
            mem_size: segment.p_memsz(endian).into(),
            executable: segment.p_flags(endian) & abi::PF_X != 0,
        })
        .collect()
}

/// The section-name string table of the file `data` (`header`, `sections` its), read in one
/// piece: looking a name up through `ReadCache` reads the table from that name's offset on,
/// one read per section (~450 system calls for libc and ld.so at a short program's exit).
/// Empty if it cannot be read.
pub fn section_names<'data, Elf: FileHeader, R: object::ReadRef<'data>>(
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

/// The `NT_GNU_BUILD_ID` note among `notes` (of one segment or section) as lowercase hex;
/// `None` if there is none or the notes stop parsing before it.
pub fn find_build_id<Elf: FileHeader>(
    endian: Elf::Endian,
    mut notes: NoteIterator<'_, Elf>,
) -> Option<String> {
    while let Some(note) = notes.next().ok()? {
        if note.name() == abi::ELF_NOTE_GNU && note.n_type(endian) == abi::NT_GNU_BUILD_ID {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_offset_maps_to_address_only_inside_a_load_segment() {
        let info = ElfInfo {
            loads: vec![LoadSegment {
                file_offset: 0x1000,
                file_size: 0x500,
                vaddr: 0x401000,
                mem_size: 0x500,
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

    /// A file that cannot be read says the system's error; one that is not ELF says so, as
    /// the profile crate's warnings print them.
    #[test]
    fn a_file_that_cannot_be_read_says_why() {
        let missing = read_elf_file("/nonexistent/tickscope/prog").unwrap_err();
        assert!(
            matches!(&missing, Error::Io(e) if e.kind() == std::io::ErrorKind::NotFound),
            "{missing:?}"
        );
        let text = read_elf_file(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap_err();
        assert!(matches!(text, Error::NotElf(_)), "{text:?}");
        assert!(
            text.to_string()
                .starts_with("not an ELF file we can read ("),
            "{text}"
        );
        // A directory opens, but its first bytes cannot be read: the system says why.
        let dir = read_elf_file(env!("CARGO_MANIFEST_DIR")).unwrap_err();
        assert!(matches!(dir, Error::Io(_)), "{dir:?}");
    }

    /// The test binary: a build id, its segments, and a `.gnu_debuglink` parsed with its
    /// CRC in the file's byte order.
    #[test]
    fn the_test_binarys_headers_are_read() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let info = read_elf_file(exe.to_str().unwrap()).unwrap();
        assert!(info.build_id.len() > 2, "{info:?}");
        assert!(info.loads.iter().any(|l| l.executable), "{info:?}");
        assert!(info.loads.iter().all(|l| l.mem_size >= l.file_size));
        assert!(info.has_symtab && !info.fixed, "{info:?}");
        let section = [b"prog.debug\0\0".as_slice(), &0x1234_5678u32.to_le_bytes()].concat();
        let link = debug_link(Endianness::Little, &section).unwrap();
        assert_eq!(
            (link.name.as_str(), link.crc),
            ("prog.debug", Some(0x1234_5678))
        );
        let cut = debug_link(Endianness::Little, b"prog.debug\0\0\x78\x56").unwrap();
        assert_eq!(cut.crc, None);
        assert_eq!(
            debug_link(Endianness::Little, b"../x.debug\0\0\0\0\0\0"),
            None
        );
    }
}
