//! Names for the bare addresses of legacy profiles, from the symbol tables of the binaries
//! their mappings name: "addresses symbolised when the binaries are present, shown as
//! addresses otherwise".
//!
//! For each mapping whose file can be read and is an ELF object, every location in it that
//! has no lines yet gets the function whose symbol (static `.symtab`, else dynamic `.dynsym`)
//! covers the address. A runtime address becomes an ELF virtual address through the
//! mapping's start and file offset and the file's `PT_LOAD` segments, which works for
//! position-independent executables and shared objects wherever they were loaded; a
//! fixed-address executable's addresses are its virtual addresses already.
//!
//! A stripped binary's symbols are read from its separate debug file where one is installed
//! (Debian's `-dbgsym` packages, `objcopy --only-keep-debug`), found as gdb, perf and
//! `go tool pprof` find it: by build id under `/usr/lib/debug/.build-id/`, or by the
//! `.gnu_debuglink` name beside the binary, in its `.debug/` directory, or under
//! `/usr/lib/debug` at the binary's directory (a linked file of another build is refused: by
//! its build id, or by the link's CRC where there is none).
//!
//! The ELF reading is `tickscope_pprof::elf`'s, the sampler's too: the same debug files
//! found, the same symbols named (a symbol names the addresses from its start to its end, so
//! one without a size names none; nested symbols, the innermost), aliases named as perf names
//! them; and the same costs: headers, and the symbol and string tables a piece at a time for
//! only the addresses wanted, never a whole binary.
//!
//! Only function names: no file names, line numbers or inline frames (those need DWARF), and
//! names are not demangled.

use std::collections::HashMap;

use tickscope_pprof::elf::{self, ElfInfo, SymbolTable};

use crate::model::{Line, Mapping, Profile};
use crate::store::StrId;

/// Names the unsymbolised locations of `p` from the binaries its mappings name, marking
/// those mappings `has_functions`. Returns one warning per binary that is needed but cannot
/// be read or is not ELF.
pub fn symbolize(p: &mut Profile) -> Vec<String> {
    symbolize_with_debug_root(p, elf::DEBUG_ROOT)
}

/// [`symbolize`], looking for separate debug files under `root` instead of
/// [`elf::DEBUG_ROOT`].
fn symbolize_with_debug_root(p: &mut Profile, root: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    // The locations still to name, by mapping.
    let mut unnamed = vec![Vec::new(); p.mappings.len()];
    for (li, l) in p.locations.iter().enumerate() {
        if l.lines.is_empty() && l.address != 0 {
            if let Some(u) = l.mapping.and_then(|m| unnamed.get_mut(m as usize)) {
                u.push(li);
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
    for (index, locations) in unnamed.into_iter().enumerate() {
        let mapping = &p.mappings[index];
        // Catch-all mappings and the kernel's pseudo-files ([vdso], [stack]) name nothing.
        if locations.is_empty() || mapping.file.is_empty() || mapping.file.starts_with('[') {
            continue;
        }
        let addresses: Vec<u64> = locations
            .iter()
            .map(|&li| p.locations[li].address)
            .collect();
        let Some(names) = names_in(mapping, &addresses, root, &mut warnings) else {
            continue;
        };
        for (li, name) in locations.into_iter().zip(names) {
            let Some(name) = name else {
                continue;
            };
            let function = match functions.get(&name) {
                Some(&f) => f,
                None => {
                    let id = p.functions.len() as u64 + 1;
                    let f = p.push_function(id, &name, &name, "", 0);
                    functions.insert(name, f);
                    f
                }
            };
            p.set_lines(li, &[Line { function, line: 0 }]);
        }
        p.mappings[index].has_functions = true;
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

/// The raw names of the functions at the runtime `addresses` of `mapping`, one per address
/// (`None` where no symbol covers it), from the symbols of its binary or, where the binary
/// is stripped, of its debug file under `root`. `None`, with a warning, when the binary
/// cannot be read or is not ELF.
fn names_in(
    mapping: &Mapping,
    addresses: &[u64],
    root: &str,
    warnings: &mut Vec<String>,
) -> Option<Vec<Option<String>>> {
    let file = &mapping.file;
    let info = match elf::read_elf_file(file) {
        Ok(info) => info,
        Err(e) => {
            warnings.push(format!("cannot read binary {file}: {e}"));
            return None;
        }
    };
    let svmas: Vec<Option<u64>> = addresses
        .iter()
        .map(|&a| file_address(&info, a, mapping))
        .collect();
    let mut wanted: Vec<u64> = svmas.iter().flatten().copied().collect();
    wanted.sort_unstable();
    wanted.dedup();
    let table = symbols_of(file, &info, &wanted, root, warnings)?;
    let name = |svma: Option<u64>| Some(table.find(svma?)?.into_owned());
    Some(svmas.into_iter().map(name).collect())
}

/// The symbols of the binary `file` (`info` its headers) that cover one of `wanted` (file
/// addresses, sorted): its debug file's where it has no `.symtab` (stripped: its local
/// functions are named there only) and one is installed under `root`, else its own. `None`,
/// with a warning, when the binary's cannot be read; a debug file that cannot be read is
/// warned of and left for the binary's own.
fn symbols_of(
    file: &str,
    info: &ElfInfo,
    wanted: &[u64],
    root: &str,
    warnings: &mut Vec<String>,
) -> Option<SymbolTable> {
    let debug = match info.has_symtab {
        true => None,
        false => elf::debug_file(file, info, root),
    };
    if let Some(debug) = debug {
        match elf::read_symbols_covering(&debug, Some(wanted)) {
            Ok(table) if table.has_symbols() => return Some(table),
            Ok(_) => {}
            Err(e) => warnings.push(format!("cannot read the debug file {debug} of {file}: {e}")),
        }
    }
    match elf::read_symbols_covering(file, Some(wanted)) {
        Ok(table) => Some(table),
        Err(e) => {
            warnings.push(format!("cannot read binary {file}: {e}"));
            None
        }
    }
}

/// The ELF file address of `address`, a runtime address in `mapping`, whose binary's headers
/// are `info`: the file offset it was loaded from (by the mapping's start and offset), then
/// the segment holding it; a fixed-address executable's own addresses as they are, for
/// mappings without a usable offset.
fn file_address(info: &ElfInfo, address: u64, mapping: &Mapping) -> Option<u64> {
    let in_memory = |s: &elf::LoadSegment| address >= s.vaddr && address - s.vaddr < s.mem_size;
    if info.fixed && info.loads.iter().any(in_memory) {
        return Some(address);
    }
    let offset = address
        .checked_sub(mapping.start)?
        .checked_add(mapping.offset)?;
    elf::svma_in(&info.loads, offset)
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
        hot_share_with(p, binary, elf::DEBUG_ROOT)
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
            use object::Object;
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

    /// The file addresses of the dynamic symbols named `name` of `file`, as `object` reads
    /// them (the test's own reading, not the symboliser's).
    fn dynamic_symbol(file: &object::File<'_>, name: &str) -> Option<(u64, u64)> {
        use object::{Object, ObjectSymbol};
        file.dynamic_symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| (s.address(), s.size()))
    }

    /// Of the aliases of an address, the name perf gives: libc's `.dynsym` has both
    /// `pthread_mutex_lock` and `__pthread_mutex_lock` there (the first alphabetically was
    /// chosen before).
    #[test]
    fn aliases_are_named_as_perf_names_them() {
        let libc = libc_path();
        let data = std::fs::read(&libc).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let (lock, _) =
            dynamic_symbol(&file, "pthread_mutex_lock").expect("libc exports pthread_mutex_lock");
        let alias = dynamic_symbol(&file, "__pthread_mutex_lock").map(|s| s.0);
        assert_eq!(alias, Some(lock), "{libc}: the alias at the same address");
        let table = elf::read_symbols_covering(&libc, Some(&[lock + 1])).unwrap();
        assert_eq!(table.find(lock + 1).as_deref(), Some("pthread_mutex_lock"));
    }

    /// PLT stubs belong to no function: pprof leaves them as `[library]`; the nearest symbol
    /// below them (`_init`, sized 0, which names nothing) must not take them. Functions are
    /// still named, inside them.
    #[test]
    fn plt_stubs_are_left_unnamed_and_functions_still_named() {
        use object::{Object, ObjectSection, ObjectSymbol};
        let libc = libc_path();
        let data = std::fs::read(&libc).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let plt = file.section_by_name(".plt").expect("libc has a PLT");
        let stubs: Vec<u64> = (plt.address()..plt.address() + plt.size())
            .step_by(16)
            .map(|stub| stub + 4)
            .collect();
        let table = elf::read_symbols_covering(&libc, Some(&stubs)).unwrap();
        for stub in stubs {
            assert_eq!(table.find(stub), None, "{libc}: PLT at {stub:#x}");
        }
        // A sized function is named inside it, by one of the names of its address.
        let function = file
            .dynamic_symbols()
            .find(|s| s.kind() == object::SymbolKind::Text && s.size() > 16)
            .unwrap();
        let inside = function.address() + function.size() / 2;
        let table = elf::read_symbols_covering(&libc, Some(&[inside])).unwrap();
        let name = table.find(inside).expect("a function named");
        let (address, size) = dynamic_symbol(&file, &name).expect("a name of libc's");
        assert!(address <= inside && inside - address < size, "{name}");
    }

    /// A fixed-address executable's addresses are its file addresses, even in a mapping
    /// whose offset does not place them (the fallback for mappings without a usable
    /// offset); otherwise an address is placed through the mapping's offset and the
    /// segments, and one outside every segment's file bytes is nowhere.
    #[test]
    fn fixed_executables_are_named_at_their_own_addresses() {
        let segment = elf::LoadSegment {
            file_offset: 0x1000,
            file_size: 0x800,
            vaddr: 0x401000,
            mem_size: 0x2000,
            executable: true,
        };
        let mut info = ElfInfo {
            fixed: true,
            loads: vec![segment],
            ..ElfInfo::default()
        };
        let mapping = Mapping {
            start: 0x400000,
            limit: 0x500000,
            offset: 0x7000,
            ..Mapping::default()
        };
        assert_eq!(file_address(&info, 0x401234, &mapping), Some(0x401234));
        // In memory (`.bss`) but not in the file: still its own address.
        assert_eq!(file_address(&info, 0x402800, &mapping), Some(0x402800));
        assert_eq!(file_address(&info, 0x403000, &mapping), None);
        info.fixed = false;
        assert_eq!(file_address(&info, 0x401234, &mapping), None);
        let placed = Mapping {
            offset: 0,
            ..mapping
        };
        assert_eq!(file_address(&info, 0x401234, &placed), Some(0x401234));
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
        let path = lib.to_str().unwrap();
        let info = elf::read_elf_file(path).unwrap();
        assert!(!info.fixed);
        let data = std::fs::read(&lib).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let (address, _) =
            dynamic_symbol(&file, "ProfilerStart").expect("libprofiler exports ProfilerStart");
        // Loaded at 0x7f0000000000 with the executable segment mapped from its file offset.
        let segment = info
            .loads
            .iter()
            .find(|s| address >= s.vaddr && address - s.vaddr < s.mem_size)
            .unwrap();
        let base = 0x7f00_0000_0000;
        let offset = segment.file_offset;
        let mut p = Profile::default();
        p.mappings.push(Mapping {
            id: 1,
            start: base + offset,
            limit: base + offset + 0x10_0000,
            offset,
            file: path.to_string(),
            ..Mapping::default()
        });
        let runtime = address - segment.vaddr + offset + base;
        p.locations.push(crate::Location {
            id: 1,
            mapping: Some(0),
            address: runtime + 1,
            ..Default::default()
        });
        let warnings = symbolize(&mut p);
        assert_eq!(warnings, Vec::<String>::new());
        assert!(p.mappings[0].has_functions);
        let lines = p.lines(&p.locations[0]);
        assert_eq!(lines.len(), 1);
        assert_eq!(p.function_name(&lines[0]), "ProfilerStart");
    }
}
