//! Function symbols of ELF files, read for only the addresses wanted: symbol and string
//! tables a 64 KiB piece at a time, a name made a string only when it names an address.
//!
//! The rules (the sampler's, which perf's naming follows; decision 27): code symbols are
//! `STT_FUNC`, `STT_GNU_IFUNC`, and `STT_NOTYPE` with a size (hand-written assembly); a
//! symbol names the addresses from its start to its end only, so one of size 0 (`_init`)
//! names nothing, not even its start; symbols may nest, and the innermost (the last to start)
//! names an address; of aliases (same start and size) the one perf gives ([`alias_rank`]).

use std::borrow::Cow;
use std::fs::File;

use object::elf::{self as abi, FileHeader32, FileHeader64};
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::{Endianness, FileKind, ReadCache};

use super::alias::alias_rank_of_bytes;
#[cfg(doc)]
use super::alias_rank;
use super::{not_elf, Error};

/// A function symbol: `size` bytes of code at file address `start`.
#[derive(Debug)]
pub struct Symbol {
    /// Its first byte's file address.
    pub start: u64,
    /// How many bytes it covers (never 0: a symbol without a size is not kept).
    pub size: u64,
    /// Its raw (mangled) name: `SymbolTable::names[name.0..name.1]`.
    name: (u32, u32),
}

/// The function symbols of a file ([`read_symbols_covering`]), which name addresses that
/// DWARF does not, or that a profile left bare. A name is made a string only when it names
/// an address: a profile written at exit looks up a few addresses in tables of tens of
/// thousands of symbols (cc1 exports 29,000).
#[derive(Debug, Default)]
pub struct SymbolTable {
    /// Sorted by start, then by size, largest first; one symbol per (start, size).
    symbols: Vec<Symbol>,
    /// `max_end[i]`: the largest end among `symbols[..=i]`. Symbols may overlap or nest, so
    /// the one containing an address need not be the last to start before it; this bounds
    /// the search backwards.
    max_end: Vec<u64>,
    /// The names, one after another (the file's string table, or the names given).
    names: Vec<u8>,
    /// The file has code symbols, whether or not this table kept any.
    has_symbols: bool,
}

impl SymbolTable {
    /// A table of `(start, size, name)`, aliases (same start and size) in order of
    /// preference: the first is kept. A symbol of size 0 is kept but names nothing, not even
    /// its start.
    #[cfg(test)]
    fn new<'a>(symbols: impl IntoIterator<Item = (u64, u64, &'a str)>) -> SymbolTable {
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

    /// The symbols kept, sorted by start, then by size, largest first; one per (start,
    /// size), the alias that names it.
    pub fn symbols(&self) -> &[Symbol] {
        &self.symbols
    }

    /// Returns true if and only if the file has code symbols, whether or not this table kept
    /// any: an address none of them covers is then named by none (a file without, such as a
    /// debug file that keeps only DWARF, leaves its naming to another table).
    pub fn has_symbols(&self) -> bool {
        self.has_symbols
    }

    /// The raw (mangled) name of `symbol`, one of this table's; bytes that are not UTF-8
    /// replaced.
    pub fn name(&self, symbol: &Symbol) -> Cow<'_, str> {
        let bytes = self
            .names
            .get(symbol.name.0 as usize..symbol.name.1 as usize)
            .unwrap_or_default();
        String::from_utf8_lossy(bytes)
    }

    /// The raw name of the symbol with `start <= svma < start + size`, the innermost (the
    /// last to start) when several are; `None` when no symbol covers `svma`.
    pub fn find(&self, svma: u64) -> Option<Cow<'_, str>> {
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
/// stripped library keeps): the whole table. [`Error::Io`] if the file cannot be opened or
/// read, [`Error::NotElf`] if it is not ELF or its section headers do not parse.
pub fn read_symbols(path: &str) -> Result<SymbolTable, Error> {
    read_symbols_covering(path, None)
}

/// [`read_symbols`], keeping, when `wanted` (file addresses, sorted) is given, only the
/// symbols that cover one of them: the table then names those addresses exactly as the
/// whole table would (every symbol that could name one is in it, aliases too), and no
/// other. A profile written at exit names a few addresses in each file: the names of the
/// others are never read.
pub fn read_symbols_covering(path: &str, wanted: Option<&[u64]>) -> Result<SymbolTable, Error> {
    let file = File::open(path).map_err(Error::Io)?;
    // The headers through the cache; the tables read below, a piece at a time.
    let data = ReadCache::new(&file);
    match FileKind::parse(&data) {
        Ok(FileKind::Elf32) => read_elf_symbols::<FileHeader32<Endianness>>(&file, &data, wanted),
        Ok(FileKind::Elf64) => read_elf_symbols::<FileHeader64<Endianness>>(&file, &data, wanted),
        Ok(_) => Err(not_elf(&file, "Unsupported file format")),
        Err(e) => Err(not_elf(&file, e)),
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
) -> Result<SymbolTable, Error> {
    let header = Elf::parse(data).map_err(|e| not_elf(file, e))?;
    let endian = header.endian().map_err(|e| not_elf(file, e))?;
    let sections = header
        .sections(endian, data)
        .map_err(|e| not_elf(file, e))?;
    for sh_type in [abi::SHT_SYMTAB, abi::SHT_DYNSYM] {
        let Some(section) = sections.iter().find(|s| s.sh_type(endian) == sh_type) else {
            continue;
        };
        let strings = sections
            .section(object::SectionIndex(section.sh_link(endian) as usize))
            .ok()
            .and_then(|s| s.file_range(endian));
        let (Some(table), Some((strings_at, strings_len))) = (section.file_range(endian), strings)
        else {
            continue;
        };
        let (candidates, any) = read_candidates::<Elf>(file, endian, table, wanted)?;
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
                // `__GI___getpid` ([`alias_rank`]); the table's order among equals.
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
            return Ok(table);
        }
    }
    Ok(SymbolTable::default())
}

/// The code symbols of the symbol table at `table` (file offset, size) of `file`, read a
/// piece at a time: those that cover one of `wanted` (all when `None`), and whether the
/// table has others (then an address none covers is named by none).
fn read_candidates<Elf: FileHeader>(
    file: &File,
    endian: Elf::Endian,
    (table_at, table_len): (u64, u64),
    wanted: Option<&[u64]>,
) -> Result<(Vec<Candidate>, bool), Error> {
    use std::os::unix::fs::FileExt;
    let mut any = false;
    let mut candidates = Vec::new();
    let entry = std::mem::size_of::<Elf::Sym>();
    let count = usize::try_from(table_len).unwrap_or(usize::MAX) / entry;
    let mut piece = vec![0u8; (PIECE / entry).max(1) * entry];
    let mut first = 0;
    while first < count {
        let n = (piece.len() / entry).min(count - first);
        let bytes = &mut piece[..n * entry];
        file.read_exact_at(bytes, table_at + (first * entry) as u64)
            .map_err(Error::Io)?;
        let symbols: &[Elf::Sym] =
            object::pod::slice_from_all_bytes(bytes).map_err(|()| not_elf(file, "symbols"))?;
        for sym in symbols {
            // Code, and assembly symbols that have a size but no type.
            let code = matches!(
                sym.st_type(),
                abi::STT_FUNC | abi::STT_GNU_IFUNC | abi::STT_NOTYPE
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
                weak: bind == abi::STB_WEAK,
                global: bind == abi::STB_GLOBAL,
            });
        }
        first += n;
    }
    Ok((candidates, any))
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

    /// Read for some addresses (every 997th byte of the test binary's code), the table keeps
    /// fewer symbols and names each of them as the whole table does.
    #[test]
    fn a_table_read_for_some_addresses_names_them_as_the_whole_table() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_str().unwrap();
        let whole = read_symbols(exe).unwrap();
        assert!(whole.has_symbols() && whole.symbols().len() > 100);
        let code = super::super::read_elf_file(exe).unwrap().loads;
        let code = code.iter().find(|l| l.executable).unwrap();
        let wanted: Vec<u64> = (code.vaddr..code.vaddr + code.file_size)
            .step_by(997)
            .collect();
        let some = read_symbols_covering(exe, Some(&wanted)).unwrap();
        assert!(some.has_symbols());
        assert!(some.symbols().len() < whole.symbols().len());
        let mut named = 0;
        for &a in &wanted {
            assert_eq!(some.find(a), whole.find(a), "at {a:#x}");
            named += usize::from(some.find(a).is_some());
        }
        assert!(named > wanted.len() / 2, "{named} of {}", wanted.len());
        assert!(matches!(
            read_symbols("/nonexistent/tickscope/prog"),
            Err(Error::Io(_))
        ));
    }
}
