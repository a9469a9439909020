//! Code images read in place: the main program's headers and notes and the vDSO, which the
//! kernel and the loader map for the life of the process, and object files mapped
//! read-only for their unwind tables.

use std::fs::File;
use std::io;

/// An entry of the auxiliary vector the kernel gave the process (`getauxval`); 0 where it
/// is missing.
pub fn aux(key: libc::c_ulong) -> u64 {
    // SAFETY: getauxval only reads the auxiliary vector; no preconditions.
    unsafe { libc::getauxval(key) }
}

/// Bytes of a 64-bit ELF program header (`Elf64_Phdr`), and the offsets of its fields read
/// here.
const PHDR_BYTES: usize = 56;
const PT_LOAD: u32 = 1;
const PT_PHDR: u32 = 6;

/// The main program as loaded: its program headers in place (`AT_PHDR`, `AT_PHNUM`) and
/// the load bias, read with neither `/proc/self/maps` nor the file.
#[derive(Clone, Copy, Debug)]
pub struct MainProgram {
    headers: &'static [u8],
    bias: u64,
}

/// The main program's headers, where the kernel says where they are: `None` without a
/// `PT_PHDR` entry to place them (the bias is unknown), or with an implausible count.
pub fn main_program() -> Option<MainProgram> {
    let (at, count) = (aux(libc::AT_PHDR), aux(libc::AT_PHNUM));
    if at == 0 || count == 0 || count > 0xffff || at % 8 != 0 {
        return None;
    }
    // SAFETY: the kernel's `AT_PHDR` is the address of the program's `AT_PHNUM` program
    // headers, mapped readable for the life of the process (the dynamic loader reads them
    // there too); 64-bit ELF on a 64-bit target.
    let headers =
        unsafe { std::slice::from_raw_parts(at as *const u8, count as usize * PHDR_BYTES) };
    let mut p = MainProgram { headers, bias: 0 };
    let phdr = p.header_fields().find(|h| h.0 == PT_PHDR)?;
    p.bias = at.wrapping_sub(phdr.1);
    Some(p)
}

impl MainProgram {
    /// The program headers' bytes (`Elf64_Phdr`s, native byte order).
    pub fn headers(&self) -> &'static [u8] {
        self.headers
    }

    /// Where the program is loaded against where its headers say: add it to a `p_vaddr`.
    pub fn bias(&self) -> u64 {
        self.bias
    }

    /// (p_type, p_vaddr, p_filesz) of each header.
    fn header_fields(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        let u64_at = |h: &[u8], at: usize| u64::from_ne_bytes(h[at..at + 8].try_into().unwrap());
        self.headers.chunks_exact(PHDR_BYTES).map(move |h| {
            let ty = u32::from_ne_bytes(h[0..4].try_into().unwrap());
            (ty, u64_at(h, 16), u64_at(h, 32))
        })
    }

    /// The bytes at `vaddr .. vaddr + len` (addresses as the headers give them), where a
    /// loaded segment's file bytes cover them all; `None` elsewhere.
    pub fn loaded(&self, vaddr: u64, len: u64) -> Option<&'static [u8]> {
        let covered = self.header_fields().any(|(ty, at, filesz)| {
            ty == PT_LOAD && at <= vaddr && vaddr.saturating_add(len) <= at.saturating_add(filesz)
        });
        if !covered || len > isize::MAX as u64 {
            return None;
        }
        // SAFETY: a loaded segment's file bytes are mapped readable at the bias for the life
        // of the process (the loader maps every PT_LOAD whole), and the range lies in one.
        Some(unsafe {
            std::slice::from_raw_parts(self.bias.wrapping_add(vaddr) as *const u8, len as usize)
        })
    }
}

/// The vDSO's image (`clock_gettime` and friends run there, and it is no file), in place:
/// where the kernel says it is (`AT_SYSINFO_EHDR`), as long as this process's
/// `/proc/self/maps` says its mapping is. `None` without one.
pub fn vdso() -> Option<&'static [u8]> {
    let base = aux(libc::AT_SYSINFO_EHDR);
    if base == 0 {
        return None;
    }
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let len = maps.lines().find_map(|line| {
        let (range, rest) = line.split_once(' ')?;
        let (start, end) = range.split_once('-')?;
        let (start, end) = (
            u64::from_str_radix(start, 16).ok()?,
            u64::from_str_radix(end, 16).ok()?,
        );
        let readable = rest.starts_with('r');
        (start == base && end > start && readable && rest.trim_end().ends_with("[vdso]"))
            .then_some(end - start)
    })?;
    // SAFETY: the kernel maps the vDSO image, readable, at AT_SYSINFO_EHDR for the life of
    // the process, `len` bytes long (this process's own mapping there, read just above).
    Some(unsafe { std::slice::from_raw_parts(base as *const u8, len as usize) })
}

/// A file mapped read-only and private; unmapped when dropped.
#[derive(Debug)]
pub struct Mapped {
    at: usize,
    len: usize,
}

impl std::ops::Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `len` readable bytes mapped at `at` by `map_object`, until drop.
        unsafe { std::slice::from_raw_parts(self.at as *const u8, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmaps the mapping `map_object` made, once; nothing borrows it then
            // (borrows of the bytes end with `self`'s).
            unsafe { libc::munmap(self.at as *mut libc::c_void, self.len) };
        }
    }
}

/// The object file (a program or library a process has loaded) at `path`, mapped read-only
/// with its descriptor closed at once: a program that closes every descriptor it did not
/// open, then opens files that take the same numbers, must never have one of them closed by
/// a descriptor of ours held meanwhile.
///
/// Only for object files that are loaded and running: the system does not truncate or
/// rewrite those in place (installers replace them with a new file), so the bytes hold
/// still while mapped, as addr2line, perf and every debugger that maps them rely on. A file
/// truncated under the mapping anyway makes a read past its new end fault.
pub fn map_object(path: &std::path::Path) -> io::Result<Mapped> {
    use std::os::fd::AsRawFd;
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Mapped { at: 0, len: 0 });
    }
    let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
    // SAFETY: a private read-only mapping of an open file at an address the kernel picks;
    // checked against MAP_FAILED.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(Mapped {
        at: at as usize,
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The main program's headers are found and name a loaded segment holding them; the
    /// vDSO image is an ELF image; a mapped file's bytes are the file's.
    #[test]
    fn images_in_place_are_what_they_say() {
        let p = main_program().expect("a PT_PHDR in a Rust test binary");
        assert_eq!(p.headers().len() % PHDR_BYTES, 0);
        let first = p
            .header_fields()
            .find(|h| h.0 == PT_LOAD)
            .expect("a PT_LOAD");
        let bytes = p.loaded(first.1, 4).expect("loaded");
        assert_eq!(
            bytes, b"\x7fELF",
            "the first segment starts with the ELF header"
        );
        assert!(p.loaded(first.1, u64::MAX / 2).is_none());
        if let Some(v) = vdso() {
            assert_eq!(&v[..4], b"\x7fELF");
        }
        let exe = std::env::current_exe().unwrap();
        let m = map_object(&exe).unwrap();
        assert_eq!(&m[..], &std::fs::read(&exe).unwrap()[..]);
        assert!(map_object(std::path::Path::new("/dev/null"))
            .unwrap()
            .is_empty());
    }
}
