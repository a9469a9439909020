//! What the sampler reads from ELF images beyond what `tickscope_pprof::elf` reads for both
//! symbolisers: the unwind tables of a file or of an image in memory (the vDSO's), and the
//! program's own code mapping from its program headers in memory (`AT_PHDR`). Both need
//! `unsafe` (a mapped file, memory the kernel describes), which `tickscope-pprof` forbids.

use object::elf::{self, FileHeader64};
use object::read::elf::{FileHeader, NoteIterator, ProgramHeader, SectionHeader};
use object::{Endianness, FileKind};
use tickscope_pprof::elf::{find_build_id, load_segments, section_names, LoadSegment};

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
pub(crate) fn main_program_in_memory() -> Option<(u64, u64, u64, String)> {
    use crate::sys::image;
    use object::elf::{ProgramHeader64, PF_X, PT_INTERP, PT_LOAD, PT_NOTE};
    let (page, interpreter) = (image::aux(libc::AT_PAGESZ), image::aux(libc::AT_BASE));
    if !page.is_power_of_two() {
        return None;
    }
    let program = image::main_program()?;
    let headers =
        object::pod::slice_from_all_bytes::<ProgramHeader64<Endianness>>(program.headers()).ok()?;
    let bias = program.bias();
    let endian = Endianness::default();
    // A dynamic program run as `ld.so ./prog`: the loader rewrote the headers' entries to
    // the program's, but /proc/self/exe names the loader. Its mappings say which is which.
    if interpreter == 0 && headers.iter().any(|h| h.p_type(endian) == PT_INTERP) {
        return None;
    }
    let text = headers
        .iter()
        .find(|h| h.p_type(endian) == PT_LOAD && h.p_flags(endian) & PF_X != 0)?;
    let start = bias.wrapping_add(text.p_vaddr(endian)) & !(page - 1);
    let end = text.p_vaddr(endian).checked_add(text.p_memsz(endian))?;
    let limit = bias.wrapping_add(end).wrapping_add(page - 1) & !(page - 1);
    let offset = text.p_offset(endian) & !(page - 1);
    // A note is read only where a loaded segment's file bytes cover it.
    let build_id = headers
        .iter()
        .filter(|h| h.p_type(endian) == PT_NOTE)
        .find_map(|h| {
            let notes = program.loaded(h.p_vaddr(endian), h.p_filesz(endian))?;
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
pub(crate) fn read_unwind_sections(path: &str) -> Option<UnwindSections> {
    let map = crate::sys::image::map_object(std::path::Path::new(path)).ok()?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use tickscope_pprof::elf::svma_in;

    /// A Rust library's layout: read-only data, then code starting in the same page of
    /// the file, a page further on in memory. Its executable mapping starts at the code's
    /// offset rounded down, which the data segment also covers.
    #[test]
    fn an_executable_mapping_is_placed_by_the_code_segment_not_the_one_sharing_its_page() {
        let data = LoadSegment {
            file_offset: 0,
            file_size: 0x7c61c,
            vaddr: 0,
            mem_size: 0x7c61c,
            executable: false,
        };
        let code = LoadSegment {
            file_offset: 0x7c61c,
            file_size: 0x1b9054,
            vaddr: 0x7d61c,
            mem_size: 0x1b9054,
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
}
