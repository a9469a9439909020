//! Names for the bare addresses of legacy profiles, from the symbol tables of the binaries
//! their mappings name: "addresses symbolised when the binaries are present, shown as
//! addresses otherwise".
//!
//! For each mapping whose file can be read and is an ELF object, every location in it that
//! has no lines yet gets the function whose symbol (static `.symtab` or dynamic `.dynsym`)
//! covers the address. A runtime address becomes an ELF virtual address through the
//! mapping's start and file offset and the file's `PT_LOAD` segments, which works for
//! position-independent executables and shared objects wherever they were loaded; a
//! fixed-address executable's addresses are its virtual addresses already.
//!
//! A stripped binary's symbols are read from its separate debug file where one is installed
//! (Debian's `-dbgsym` packages, `objcopy --only-keep-debug`), found as gdb, perf and
//! `go tool pprof` find it: by build id under `/usr/lib/debug/.build-id/`, or by the
//! `.gnu_debuglink` name beside the binary, in its `.debug/` directory, or under
//! `/usr/lib/debug` at the binary's directory.
//!
//! Only function names: no file names, line numbers or inline frames (those need DWARF), and
//! names are not demangled.

use std::collections::HashMap;

use object::{Object, ObjectKind, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};
use tickscope_pprof::elf::{alias_rank, AliasRank};

use crate::model::{Line, Mapping, Profile};
use crate::store::StrId;

/// Names the unsymbolised locations of `p` from the binaries its mappings name, marking
/// those mappings `has_functions`. Returns one warning per binary that is needed but cannot
/// be read or is not ELF.
pub fn symbolize(p: &mut Profile) -> Vec<String> {
    symbolize_with_debug_root(p, DEBUG_ROOT)
}

/// Where separate debug files are installed.
const DEBUG_ROOT: &str = "/usr/lib/debug";

/// [`symbolize`], looking for separate debug files under `root` instead of [`DEBUG_ROOT`].
fn symbolize_with_debug_root(p: &mut Profile, root: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    // The mappings with locations still to name.
    let mut wanted = vec![false; p.mappings.len()];
    for l in &p.locations {
        if l.lines.is_empty() && l.address != 0 {
            if let Some(w) = l.mapping.and_then(|m| wanted.get_mut(m as usize)) {
                *w = true;
            }
        }
    }
    // Functions by name, so that every binary's `main` is one function.
    let mut functions: HashMap<String, u32> = HashMap::new();
    for (i, f) in p.functions.iter().enumerate() {
        if f.filename == StrId::EMPTY && f.start_line == 0 {
            functions
                .entry(p.str(f.name).to_string())
                .or_insert(i as u32);
        }
    }
    for (index, wanted) in wanted.into_iter().enumerate() {
        let Some(mapping) = p.mappings.get(index).filter(|_| wanted) else {
            continue;
        };
        // Catch-all mappings and the kernel's pseudo-files ([vdso], [stack]) name nothing.
        if mapping.file.is_empty() || mapping.file.starts_with('[') {
            continue;
        }
        let mapping = mapping.clone();
        let data = match std::fs::read(&mapping.file) {
            Ok(d) => d,
            Err(e) => {
                warnings.push(format!("cannot read binary {}: {e}", mapping.file));
                continue;
            }
        };
        let mut binary = match Binary::parse(&data) {
            Ok(b) => b,
            Err(e) => {
                warnings.push(format!(
                    "cannot read binary {}: not an ELF file we can read ({e})",
                    mapping.file
                ));
                continue;
            }
        };
        // A stripped binary's local functions are in its debug file, if one is installed.
        let debug = match binary.has_symtab {
            true => None,
            false => binary.debug_file(&mapping.file, root),
        };
        if let Some((debug, cache)) = debug {
            if let Err(e) = binary.add_symbols_of(&cache) {
                warnings.push(format!(
                    "cannot read the debug file {debug} of {}: {e}",
                    mapping.file
                ));
            }
        }
        for li in 0..p.locations.len() {
            let l = p.locations[li];
            if l.mapping != Some(index as u32) || !l.lines.is_empty() || l.address == 0 {
                continue;
            }
            let Some(name) = binary
                .virtual_address(l.address, &mapping)
                .and_then(|a| binary.function_at(a))
            else {
                continue;
            };
            let function = match functions.get(name) {
                Some(&f) => f,
                None => {
                    let id = p.functions.len() as u64 + 1;
                    let f = p.push_function(id, name, name, "", 0);
                    functions.insert(name.to_string(), f);
                    f
                }
            };
            p.set_lines(li, &[Line { function, line: 0 }]);
        }
        if let Some(m) = p.mappings.get_mut(index) {
            m.has_functions = true;
        }
    }
    // Ids must stay unique when the profile already had functions with other ids.
    let mut next = p.functions.iter().map(|f| f.id).max().unwrap_or(0);
    let mut seen = std::collections::HashSet::new();
    for f in &mut p.functions {
        if f.id == 0 || !seen.insert(f.id) {
            next += 1;
            f.id = next;
            seen.insert(next);
        }
    }
    p.seal();
    warnings
}

/// What symbolisation needs of an ELF file.
struct Binary {
    /// A fixed-address executable (`ET_EXEC`): runtime addresses are virtual addresses.
    fixed: bool,
    /// `PT_LOAD` segments: (virtual address, memory size, file offset, file size).
    segments: Vec<(u64, u64, u64, u64)>,
    /// Function symbols by address, one per address.
    symbols: Vec<FunctionSymbol>,
    /// Sections loaded in memory: (address, size), by address.
    sections: Vec<(u64, u64)>,
    /// Its build id (GNU note), and the file name and CRC in its `.gnu_debuglink`.
    build_id: Vec<u8>,
    debug_link: Option<(String, u32)>,
    /// It has a static symbol table (not stripped): its local functions are named.
    has_symtab: bool,
}

/// A function symbol of an ELF file: address, size, name, and its rank among the aliases
/// of its address (`tickscope_pprof::elf::alias_rank`).
type FunctionSymbol = (u64, u64, String, AliasRank);

/// The function symbols of an ELF file, static and dynamic.
fn function_symbols<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Vec<FunctionSymbol> {
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
        .filter_map(|s| {
            let name = s.name().ok()?;
            // `is_global` is true of weak symbols too; the rank looks at weakness first.
            let rank = alias_rank(name, s.is_weak(), s.is_global() && !s.is_weak());
            (!name.is_empty()).then(|| (s.address(), s.size(), name.to_string(), rank))
        })
        .collect()
}

/// Per address, one symbol: one with a size first, then the alias perf would name it by,
/// then the first name alphabetically.
fn sort_symbols(symbols: &mut Vec<FunctionSymbol>) {
    symbols.sort_by(|a, b| (a.0, a.1 == 0, &a.3, &a.2).cmp(&(b.0, b.1 == 0, &b.3, &b.2)));
    symbols.dedup_by_key(|s| s.0);
}

/// The CRC-32 of the file at `path` (`.gnu_debuglink`'s, the same as gzip's), read in
/// pieces.
fn file_crc32(path: &str) -> Option<u32> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut crc = flate2::Crc::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Some(crc.sum()),
            Ok(n) => crc.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

impl Binary {
    fn parse(data: &[u8]) -> Result<Binary, object::Error> {
        let file = object::File::parse(data)?;
        let segments = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (s.address(), s.size(), offset, size)
            })
            .collect();
        let mut symbols = function_symbols(&file);
        sort_symbols(&mut symbols);
        let build_id = file.build_id().ok().flatten().unwrap_or_default().to_vec();
        let debug_link = file
            .gnu_debuglink()
            .ok()
            .flatten()
            .and_then(|(name, crc)| Some((std::str::from_utf8(name).ok()?, crc)))
            .filter(|(name, _)| !name.is_empty() && !name.contains('/'))
            .map(|(name, crc)| (name.to_string(), crc));
        let has_symtab = file.symbol_table().is_some();
        let mut sections: Vec<(u64, u64)> = file
            .sections()
            .map(|s| (s.address(), s.size()))
            .filter(|&(a, n)| a != 0 && n != 0)
            .collect();
        sections.sort_unstable();
        Ok(Binary {
            fixed: file.kind() == ObjectKind::Executable,
            segments,
            symbols,
            sections,
            build_id,
            debug_link,
            has_symtab,
        })
    }

    /// The separate debug file of this binary, read from `path`: by build id,
    /// `ROOT/.build-id/ab/cdef….debug`; by `.gnu_debuglink`, the name beside the binary, in
    /// its `.debug/` directory, or under `ROOT` at the binary's directory (`ROOT` is
    /// `/usr/lib/debug`). Only a file that exists and has the same build id, or, where
    /// either has none, the CRC its link gives (a debug file of another build would name
    /// the wrong functions). Its path, and the file opened for reading the parts asked for
    /// (a debug file may be hundreds of megabytes of DWARF this does not need).
    fn debug_file(
        &self,
        path: &str,
        root: &str,
    ) -> Option<(String, object::ReadCache<std::fs::File>)> {
        let id: String = self.build_id.iter().map(|b| format!("{b:02x}")).collect();
        let mut candidates = Vec::new();
        if id.len() > 2 {
            candidates.push(format!("{root}/.build-id/{}/{}.debug", &id[..2], &id[2..]));
        }
        let dir = std::path::Path::new(path)
            .parent()
            .and_then(|d| d.to_str())
            .filter(|d| d.starts_with('/'));
        if let (Some((link, _)), Some(dir)) = (&self.debug_link, dir) {
            candidates.push(format!("{dir}/{link}"));
            candidates.push(format!("{dir}/.debug/{link}"));
            candidates.push(format!("{root}{dir}/{link}"));
        }
        candidates.into_iter().filter(|c| c != path).find_map(|c| {
            let cache = object::ReadCache::new(std::fs::File::open(&c).ok()?);
            let theirs = object::File::parse(&cache)
                .ok()?
                .build_id()
                .ok()
                .flatten()
                .map(<[u8]>::to_vec)
                .unwrap_or_default();
            let same = match (
                theirs.is_empty() || self.build_id.is_empty(),
                &self.debug_link,
            ) {
                (false, _) => theirs == self.build_id,
                (true, Some((_, crc))) => file_crc32(&c) == Some(*crc),
                (true, None) => false,
            };
            same.then_some((c, cache))
        })
    }

    /// Adds the function symbols of `debug`, this binary's separate debug file (its
    /// addresses are the binary's).
    fn add_symbols_of(
        &mut self,
        debug: &object::ReadCache<std::fs::File>,
    ) -> Result<(), object::Error> {
        let file = object::File::parse(debug)?;
        self.symbols.extend(function_symbols(&file));
        sort_symbols(&mut self.symbols);
        Ok(())
    }

    /// The ELF virtual address of a runtime address in `mapping`.
    fn virtual_address(&self, address: u64, mapping: &Mapping) -> Option<u64> {
        if self.fixed
            && self
                .segments
                .iter()
                .any(|&(vaddr, memsz, _, _)| address >= vaddr && address - vaddr < memsz)
        {
            return Some(address);
        }
        // The file offset the address was loaded from, then the segment holding it.
        let offset = address
            .checked_sub(mapping.start)?
            .checked_add(mapping.offset)?;
        self.segments
            .iter()
            .find(|&&(_, _, off, filesz)| offset >= off && offset - off < filesz)
            .and_then(|&(vaddr, _, off, _)| vaddr.checked_add(offset - off))
    }

    /// The function whose symbol covers `address`: the nearest symbol at or below it, if
    /// its size reaches the address (a symbol without a size covers up to the next one in
    /// its own section: `_init` does not cover the PLT stubs after it, which are unnamed, as
    /// pprof leaves them).
    fn function_at(&self, address: u64) -> Option<&str> {
        let i = self.symbols.partition_point(|s| s.0 <= address);
        let (start, size, name, _) = self.symbols.get(i.checked_sub(1)?)?;
        let covers = if *size == 0 {
            self.section_of(*start) == self.section_of(address)
        } else {
            address - start < *size
        };
        covers.then_some(name.as_str())
    }

    /// The section holding `address`, by its start.
    fn section_of(&self, address: u64) -> Option<u64> {
        let i = self.sections.partition_point(|s| s.0 <= address);
        let &(start, size) = self.sections.get(i.checked_sub(1)?)?;
        (address - start < size).then_some(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// A test whose external tool is missing: skipped with a line on a developer's machine, a
    /// failure under `CI=true` (CI installs every tool the tests use, so a missing one is a bug).
    fn skip_unless_ci(why: &str) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and {why}"
        );
        eprintln!("skipped: {why}");
    }

    fn libprofiler() -> Option<PathBuf> {
        let listed = Command::new("ldconfig")
            .arg("-p")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter(|l| l.trim_start().starts_with("libprofiler.so"))
                    .find_map(|l| l.split("=> ").nth(1).map(|p| PathBuf::from(p.trim())))
            });
        listed
            .or_else(|| Some(PathBuf::from("/usr/lib/x86_64-linux-gnu/libprofiler.so.0")))
            .filter(|p| p.exists())
    }

    const PROGRAM: &str = r#"
#include <stdio.h>
#include <time.h>

volatile double sink;

__attribute__((noinline)) double tickscope_hot_function(long n) {
    double x = 0;
    for (long i = 0; i < n; i++) {
        x += (double)i * 0.5;
    }
    return x;
}

int main(void) {
    /* About 0.4 s of CPU time: a few hundred samples at 1000 Hz. */
    while (clock() < CLOCKS_PER_SEC / 5 * 2) {
        sink += tickscope_hot_function(100000);
    }
    printf("%f\n", sink);
    return 0;
}
"#;

    /// Compiles the program (`extra`: more gcc flags), runs it under gperftools' CPU profiler
    /// and reads the profile it writes. `None` when gcc or libprofiler is missing.
    fn profile_program(dir: &Path, name: &str, extra: &[&str]) -> Option<Profile> {
        profile_prepared(dir, name, extra, |_| {})
    }

    /// [`profile_program`], with `prepare` run on the binary between compiling and running
    /// it (to strip it, say).
    fn profile_prepared(
        dir: &Path,
        name: &str,
        extra: &[&str],
        prepare: impl FnOnce(&Path),
    ) -> Option<Profile> {
        let Some(lib) = libprofiler() else {
            skip_unless_ci("libprofiler.so (google-perftools) not found");
            return None;
        };
        let source = dir.join("prog.c");
        std::fs::write(&source, PROGRAM).unwrap();
        let binary = dir.join(name);
        let compiled = Command::new("gcc")
            .args(["-O0", "-fno-omit-frame-pointer"])
            .args(extra)
            .arg("-o")
            .arg(&binary)
            .arg(&source)
            .status();
        match compiled {
            Ok(s) if s.success() => {}
            other => {
                skip_unless_ci(&format!("gcc failed or is missing ({other:?})"));
                return None;
            }
        }
        prepare(&binary);
        let out = dir.join(format!("{name}.prof"));
        let run = Command::new(&binary)
            .env("LD_PRELOAD", &lib)
            .env("CPUPROFILE", &out)
            .env("CPUPROFILE_FREQUENCY", "1000")
            .output()
            .unwrap();
        assert!(run.status.success(), "{run:?}");
        Some(crate::load(&out).unwrap())
    }

    /// The share of samples (by count) whose leaf is the hot function, after symbolize().
    fn hot_share(p: &mut Profile, binary: &Path) -> f64 {
        hot_share_with(p, binary, DEBUG_ROOT)
    }

    /// [`hot_share`], with separate debug files looked for under `root`.
    fn hot_share_with(p: &mut Profile, binary: &Path, root: &str) -> f64 {
        assert_eq!(p.format, crate::Format::GperftoolsCpu);
        let main = p
            .mappings
            .iter()
            .position(|m| Path::new(&m.file) == binary)
            .unwrap_or_else(|| panic!("no mapping for {}: {:?}", binary.display(), p.mappings));
        let warnings = symbolize_with_debug_root(p, root);
        assert!(
            !warnings
                .iter()
                .any(|w| w.contains(&*binary.to_string_lossy())),
            "{warnings:?}"
        );
        assert!(p.mappings[main].has_functions);
        p.check().unwrap();
        let leaf_name = |s: &crate::Sample| {
            let l = &p.locations[p.stack(s).next()? as usize];
            Some(p.function_name(p.lines(l).first()?).to_string())
        };
        let total: i64 = p.samples.iter().map(|s| p.values(s)[0]).sum();
        let hot: i64 = p
            .samples
            .iter()
            .filter(|s| leaf_name(s).as_deref() == Some("tickscope_hot_function"))
            .map(|s| p.values(s)[0])
            .sum();
        assert!(total > 20, "too few samples: {total}");
        hot as f64 / total as f64
    }

    /// A gperftools profile of a C program names its hot function once symbolised, both for
    /// a position-independent executable and a fixed-address one.
    #[test]
    fn gperftools_profile_of_a_c_program_is_symbolised() {
        let dir = std::env::temp_dir().join(format!("tickscope-symbolize-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, flags) in [("pie", &["-fPIE", "-pie"][..]), ("fixed", &["-no-pie"][..])] {
            let Some(mut p) = profile_program(&dir, name, flags) else {
                break;
            };
            let share = hot_share(&mut p, &dir.join(name));
            assert!(
                share > 0.5,
                "{name}: hot function leaf in {share} of samples"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A stripped binary's functions come from its separate debug file, found by its
    /// `.gnu_debuglink` beside it (checked by its CRC where there is no build id) or by its
    /// build id under the debug root; without one, its hot function has no name.
    #[test]
    fn a_stripped_binarys_functions_come_from_its_debug_file() {
        let dir = std::env::temp_dir().join(format!("tickscope-debugfile-{}", std::process::id()));
        let root = dir.join("debug-root");
        std::fs::create_dir_all(&root).unwrap();
        let run = |what: &str, cmd: &mut Command| {
            let s = cmd.status();
            assert!(matches!(s, Ok(s) if s.success()), "{what}: {s:?}");
        };
        // Its debug info put aside, then stripped of every symbol (the hot function is not
        // exported: only the debug file names it).
        let strip = |binary: &Path, debug: &Path| {
            run(
                "objcopy",
                Command::new("objcopy")
                    .arg("--only-keep-debug")
                    .arg(binary)
                    .arg(debug),
            );
            run(
                "strip",
                Command::new("strip").arg("--strip-all").arg(binary),
            );
        };
        let debug_of = |binary: &Path| binary.with_extension("debug");
        // Stripped, and linked to its debug file beside it.
        let strip_and_link = |b: &Path| {
            strip(b, &debug_of(b));
            run(
                "objcopy --add-gnu-debuglink",
                Command::new("objcopy")
                    .arg(format!("--add-gnu-debuglink={}", debug_of(b).display()))
                    .arg(b),
            );
        };
        let Some(mut linked) =
            profile_prepared(&dir, "linked", &["-g", "-fPIE", "-pie"], strip_and_link)
        else {
            return;
        };
        let share = hot_share_with(&mut linked, &dir.join("linked"), root.to_str().unwrap());
        assert!(
            share > 0.5,
            "by .gnu_debuglink: hot function leaf in {share} of samples"
        );

        // By build id: the debug file under ROOT/.build-id/ab/cdef….debug, no link.
        let mut id_file = None;
        let mut by_id = profile_prepared(&dir, "by-id", &["-g", "-fPIE", "-pie"], |b| {
            strip(b, &debug_of(b));
            let data = std::fs::read(b).unwrap();
            let id = object::File::parse(&*data)
                .unwrap()
                .build_id()
                .unwrap()
                .expect("gcc wrote no build id");
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let at = root.join(".build-id").join(&hex[..2]);
            std::fs::create_dir_all(&at).unwrap();
            let file = at.join(format!("{}.debug", &hex[2..]));
            std::fs::rename(debug_of(b), &file).unwrap();
            id_file = Some(file);
        })
        .unwrap();
        let share = hot_share_with(&mut by_id, &dir.join("by-id"), root.to_str().unwrap());
        assert!(
            share > 0.5,
            "by build id: hot function leaf in {share} of samples"
        );

        // Without it, nothing names the hot function.
        std::fs::remove_file(id_file.unwrap()).unwrap();
        let mut bare = crate::load(dir.join("by-id.prof")).unwrap();
        let share = hot_share_with(&mut bare, &dir.join("by-id"), root.to_str().unwrap());
        assert_eq!(
            share, 0.0,
            "a stripped binary's hot function named without its debug file"
        );

        // No build id: the link's CRC says whether the file beside it is its debug file.
        let mut no_id = profile_prepared(
            &dir,
            "no-id",
            &["-g", "-fPIE", "-pie", "-Wl,--build-id=none"],
            strip_and_link,
        )
        .unwrap();
        let mut other = crate::load(dir.join("no-id.prof")).unwrap();
        let share = hot_share_with(&mut no_id, &dir.join("no-id"), root.to_str().unwrap());
        assert!(
            share > 0.5,
            "by .gnu_debuglink, no build id: hot function leaf in {share}"
        );
        // Another build's debug file in its place (here, another program's): refused.
        std::fs::copy(dir.join("linked.debug"), dir.join("no-id.debug")).unwrap();
        let share = hot_share_with(&mut other, &dir.join("no-id"), root.to_str().unwrap());
        assert_eq!(
            share, 0.0,
            "a debug file whose CRC is not the link's was read"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The libc this test process links.
    fn libc_path() -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.ends_with("/libc.so.6"))
            .expect("the test links libc")
            .to_owned()
    }

    /// Of the aliases of an address, the name perf gives: libc's `.dynsym` has both
    /// `pthread_mutex_lock` and `__pthread_mutex_lock` there (the first alphabetically was
    /// chosen before).
    #[test]
    fn aliases_are_named_as_perf_names_them() {
        let libc = libc_path();
        let data = std::fs::read(&libc).unwrap();
        let bin = Binary::parse(&data).unwrap();
        let at = |name: &str| bin.symbols.iter().find(|s| s.2 == name).map(|s| s.0);
        let lock = at("pthread_mutex_lock").expect("libc exports pthread_mutex_lock");
        assert_eq!(at("__pthread_mutex_lock"), None, "one name per address");
        assert_eq!(bin.function_at(lock + 1), Some("pthread_mutex_lock"));
    }

    /// PLT stubs belong to no function: pprof leaves them as `[library]`; the nearest symbol
    /// below them (`_init`, sized 0) must not take them.
    #[test]
    fn plt_stubs_are_left_unnamed_and_functions_still_named() {
        let libc = libc_path();
        let data = std::fs::read(&libc).unwrap();
        let bin = Binary::parse(&data).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let plt = file.section_by_name(".plt").expect("libc has a PLT");
        for stub in (plt.address()..plt.address() + plt.size()).step_by(16) {
            assert_eq!(bin.function_at(stub + 4), None, "{libc}: PLT at {stub:#x}");
        }
        // A sized function is still found, inside it.
        let &(start, size, ref name, _) = bin.symbols.iter().find(|s| s.1 > 16).unwrap();
        assert_eq!(bin.function_at(start + size / 2), Some(name.as_str()));
        // A zero-sized symbol covers up to the next one in its section, as before.
        let zero = Binary {
            fixed: false,
            segments: vec![],
            symbols: vec![
                (0x100, 0, "_init".into(), alias_rank("_init", false, true)),
                (0x200, 0x10, "f".into(), alias_rank("f", false, true)),
            ],
            sections: vec![(0x100, 0x20), (0x120, 0x40), (0x200, 0x100)],
            build_id: vec![],
            debug_link: None,
            has_symtab: true,
        };
        assert_eq!(zero.function_at(0x110), Some("_init"));
        assert_eq!(zero.function_at(0x130), None, "the PLT after .init");
        assert_eq!(zero.function_at(0x205), Some("f"));
    }

    #[test]
    fn missing_and_non_elf_binaries_give_warnings() {
        let dir = std::env::temp_dir().join(format!("tickscope-nonelf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = dir.join("not-elf");
        std::fs::write(&text, "just text").unwrap();
        let mut p = Profile::default();
        for (i, file) in [
            text.to_string_lossy().into_owned(),
            "/nonexistent/binary".into(),
            "[vdso]".into(),
        ]
        .into_iter()
        .enumerate()
        {
            p.mappings.push(Mapping {
                id: i as u64 + 1,
                start: 0x1000 * (i as u64 + 1),
                limit: 0x1000 * (i as u64 + 2),
                file,
                ..Mapping::default()
            });
            p.locations.push(crate::Location {
                id: i as u64 + 1,
                mapping: Some(i as u32),
                address: 0x1000 * (i as u64 + 1) + 0x10,
                ..Default::default()
            });
        }
        let warnings = symbolize(&mut p);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("not-elf") && warnings[0].contains("not an ELF"));
        assert!(warnings[1].contains("/nonexistent/binary"));
        assert!(p.locations.iter().all(|l| l.lines.is_empty()));
        assert!(p.mappings.iter().all(|m| !m.has_functions));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A shared object (libprofiler itself) loaded at an arbitrary base: a runtime address in
    /// an exported function maps back to its name through the segments.
    #[test]
    fn symbols_of_a_shared_object_resolve_through_its_segments() {
        let Some(lib) = libprofiler() else {
            skip_unless_ci("libprofiler.so not found");
            return;
        };
        let data = std::fs::read(&lib).unwrap();
        let binary = Binary::parse(&data).unwrap();
        assert!(!binary.fixed);
        let (address, _, name, _) = binary
            .symbols
            .iter()
            .find(|s| s.2 == "ProfilerStart")
            .expect("libprofiler exports ProfilerStart")
            .clone();
        // Loaded at 0x7f0000000000 with the executable segment mapped from its file offset.
        let &(vaddr, _, offset, _) = binary
            .segments
            .iter()
            .find(|&&(v, m, _, _)| address >= v && address - v < m)
            .unwrap();
        let base = 0x7f00_0000_0000;
        let mapping = Mapping {
            start: base + offset,
            limit: base + offset + 0x10_0000,
            offset,
            ..Mapping::default()
        };
        let runtime = address - vaddr + offset + base;
        let found = binary.virtual_address(runtime + 1, &mapping);
        assert_eq!(found, Some(address + 1));
        assert_eq!(binary.function_at(address + 1), Some(name.as_str()));
    }
}
