//! The separate debug file of a stripped ELF file, found as gdb and perf find it.

use std::path::Path;

use super::{read_elf_file, DebugLink, ElfInfo};

/// Where distributions install separate debug files (`libc6-dbg`, `*-dbgsym`, `*-debuginfo`).
pub const DEBUG_ROOT: &str = "/usr/lib/debug";

/// The separate debug file of the ELF file at `path` (stripped, its DWARF and symbols put
/// aside as Debian's `-dbg`/`-dbgsym` packages and `objcopy --only-keep-debug` do), `info`
/// its headers; `root` is where debug files are installed ([`DEBUG_ROOT`]).
///
/// - By build id, `ROOT/.build-id/ab/cdef….debug`: a file there is taken as it is, by its
///   name, without opening it (as gdb and perf take it).
/// - By `.gnu_debuglink`, the name beside the file, in its `.debug/` directory, or under
///   `ROOT` at the file's directory (the file's path must be absolute): the first that is
///   an ELF file with the file's build id, or, where either has none, whose CRC-32 is the
///   one the link gives (a debug file of another build would name the wrong functions).
///   That check reads the whole candidate, only for files without a build id.
pub fn debug_file(path: &str, info: &ElfInfo, root: &str) -> Option<String> {
    let id = &info.build_id;
    if id.len() > 2 {
        let by_id = format!("{root}/.build-id/{}/{}.debug", &id[..2], &id[2..]);
        if Path::new(&by_id).is_file() {
            return Some(by_id);
        }
    }
    let link = info.debug_link.as_ref()?;
    // Not a relative directory: `ROOT` before it would name nothing.
    let dir = Path::new(path)
        .parent()?
        .to_str()
        .filter(|d| d.starts_with('/'))?;
    let name = &link.name;
    let candidates = [
        format!("{dir}/{name}"),
        format!("{dir}/.debug/{name}"),
        format!("{root}{dir}/{name}"),
    ];
    candidates
        .into_iter()
        .find(|c| c != path && is_debug_file_of(c, info, link))
}

/// Whether the file at `candidate` is the debug file `link` (of the file `info`) names: an
/// ELF file with the same build id, or, where either has none, the CRC the link gives.
fn is_debug_file_of(candidate: &str, info: &ElfInfo, link: &DebugLink) -> bool {
    let Ok(theirs) = read_elf_file(candidate) else {
        return false;
    };
    if !theirs.build_id.is_empty() && !info.build_id.is_empty() {
        return theirs.build_id == info.build_id;
    }
    link.crc
        .is_some_and(|crc| file_crc32(candidate) == Some(crc))
}

/// The CRC-32 of the file at `path` (`.gnu_debuglink`'s, the same as gzip's), read 64 KiB at
/// a time; `None` if it cannot be read.
fn file_crc32(path: &str) -> Option<u32> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut crc = 0;
    let mut piece = vec![0u8; 64 << 10];
    loop {
        match file.read(&mut piece) {
            Ok(0) => return Some(crc),
            Ok(n) => crc = crate::write::crc32_update(crc, &piece[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stripped file's debug file: found under the root by build id, or beside the file by
    /// its `.gnu_debuglink` name, where one whose build id differs is not taken, nor, without
    /// build ids to compare, one whose CRC is not the link's.
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
        // By debuglink, beside the file, whose build id is the file's.
        let beside = root.join("bin");
        std::fs::create_dir_all(&beside).unwrap();
        std::fs::copy(exe, beside.join("prog.debug")).unwrap();
        let mut linked = info.clone();
        linked.debug_link = Some(DebugLink {
            name: "prog.debug".into(),
            crc: None,
        });
        let prog = beside.join("prog");
        let prog = prog.to_str().unwrap();
        let beside_debug = beside.join("prog.debug");
        assert_eq!(
            debug_file(prog, &linked, "/nonexistent").as_deref(),
            beside_debug.to_str()
        );
        // A linked file whose build id is not the program's is not its debug file.
        let mut other = linked.clone();
        other.build_id = "ab".repeat(20);
        assert_eq!(debug_file(prog, &other, "/nonexistent"), None);
        // No build id to go by: taken when its CRC is the link's, not otherwise.
        let crc = file_crc32(beside_debug.to_str().unwrap()).unwrap();
        let mut no_id = linked.clone();
        no_id.build_id.clear();
        for (crc, taken) in [(Some(crc), true), (Some(!crc), false), (None, false)] {
            no_id.debug_link.as_mut().unwrap().crc = crc;
            let found = debug_file(prog, &no_id, "/nonexistent");
            assert_eq!(found.is_some(), taken, "crc {crc:x?}: {found:?}");
        }
        // A file beside, never one named by a relative path.
        assert_eq!(debug_file("bin/prog", &linked, "/nonexistent"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The CRC of a file read in pieces is the CRC of its bytes (gzip's: the check value).
    #[test]
    fn a_files_crc_is_read_in_pieces() {
        let path = std::env::temp_dir().join(format!("tickscope-crc-{}", std::process::id()));
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 300) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let whole = crate::write::crc32_update(0, &bytes);
        assert_eq!(file_crc32(path.to_str().unwrap()), Some(whole));
        assert_eq!(crate::write::crc32_update(0, b"123456789"), 0xcbf4_3926);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(file_crc32(path.to_str().unwrap()), None);
    }
}
