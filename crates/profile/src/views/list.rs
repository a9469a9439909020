//! `list REGEX`: annotated source, as `go tool pprof -list` prints it (its
//! `report/source.go`, `printSource`). For every function whose name matches, and every
//! source file it has samples in, a `ROUTINE` header with the function's flat and cum totals,
//! then the source lines around the sampled ones, each with its flat and cum value (`.` for
//! zero), 10-wide columns.
//!
//! The lines shown are pprof's: from the function's first line (or 5 lines before the first
//! sampled line when the profile does not record where the function starts) to 5 lines after
//! the last sampled line, stopping at the end of the file.
//!
//! Sources are read from disk. A file's path, after `--trim-path`, is opened as it is when it
//! is absolute; otherwise, and when that fails, it is looked for under each `--source-path`
//! directory (`:`-separated; the current directory when none is given) with its whole
//! relative path, then with its trailing components (`a/b/c.rs`, then `b/c.rs`, then `c.rs`),
//! then, as pprof does, under the directory's parents. When a file cannot be found, the
//! sampled lines are listed with their figures but no text, below one message that names the
//! file and the directories searched and suggests `--source-path`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::{json, Value};

use super::graph::{Graph, NodeInfo};
use super::measure::percentage;
use super::report::Report;
use super::top::pct;

/// Lines shown before the first and after the last sampled line.
const MARGIN: i64 = 5;

/// One listed source line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    /// The line number (from 1).
    pub line: i64,
    /// Flat value of the line's samples.
    pub flat: i64,
    /// Cumulative value.
    pub cum: i64,
    /// The line's text; `None` when the source file was not found.
    pub text: Option<String>,
}

/// One function in one source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFunction {
    /// The function's name.
    pub name: String,
    /// Its source file, as the profile names it (after `--trim-path`); empty when the
    /// profile has no file for it.
    pub file: String,
    /// Flat value over the function's lines in this file.
    pub flat: i64,
    /// Cumulative value (the sum over its lines, as pprof sums it).
    pub cum: i64,
    /// The lines: pprof's window of context when the source was read, else only the lines
    /// with a value.
    pub lines: Vec<SourceLine>,
    /// Why the source could not be shown (`None` when it was read).
    pub error: Option<String>,
}

/// The functions matching `rx` (a function's name, not its printable name, as pprof
/// matches), sorted by name, then by file; their lines and sources. `Err` when nothing
/// matches.
pub fn list(rpt: &Report, rx: &Regex) -> Result<Vec<ListedFunction>, String> {
    let g = rpt.full_graph();
    // Nodes of each matching function, by name, then by file.
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for i in 0..g.nodes.len() {
        let info = rpt.info(&g, i);
        if !info.name.is_empty() && rx.is_match(info.name) {
            by_name.entry(info.name).or_default().push(i);
        }
    }
    if by_name.is_empty() {
        return Err(format!("no matches found for regexp: {}", rx.as_str()));
    }
    let mut names: Vec<&str> = by_name.keys().copied().collect();
    names.sort_unstable();
    let mut reader = SourceReader::new(&rpt.options.source_path, &rpt.options.trim_path);
    let mut out = Vec::new();
    for name in names {
        let mut by_file: HashMap<&str, Vec<usize>> = HashMap::new();
        for &i in &by_name[name] {
            let info = rpt.info(&g, i);
            if !info.file.is_empty() {
                by_file.entry(info.file).or_default().push(i);
            }
        }
        if by_file.is_empty() {
            let (flat, cum) = sum(&g, &by_name[name]);
            out.push(ListedFunction {
                name: name.to_string(),
                file: String::new(),
                flat,
                cum,
                lines: Vec::new(),
                error: Some(format!("No source information for {name}")),
            });
            continue;
        }
        // pprof's FileOrder: by file, then by the function's first line.
        let mut files: Vec<(&str, i64)> = by_file
            .iter()
            .map(|(&f, nodes)| {
                let start = nodes.iter().map(|&i| rpt.info(&g, i).start_line).min();
                (f, start.unwrap_or(0))
            })
            .collect();
        files.sort_unstable();
        for (file, _) in files {
            let nodes = &by_file[file];
            out.push(function_source(rpt, &g, name, file, nodes, &mut reader));
        }
    }
    Ok(out)
}

/// Flat and cum sums of some nodes.
fn sum(g: &Graph, nodes: &[usize]) -> (i64, i64) {
    nodes.iter().fold((0, 0), |(f, c), &i| {
        (f + g.nodes[i].flat, c + g.nodes[i].cum)
    })
}

/// One function in one file: pprof's `getSourceFromFile`.
fn function_source(
    rpt: &Report,
    g: &Graph,
    name: &str,
    file: &str,
    nodes: &[usize],
    reader: &mut SourceReader,
) -> ListedFunction {
    let (flat, cum) = sum(g, nodes);
    // Values per line, and the window: from the function's first line (or MARGIN before the
    // first sampled line) to MARGIN after the last one.
    let mut per_line: HashMap<i64, (i64, i64)> = HashMap::new();
    let (mut start, mut end) = (i64::MAX, i64::MIN);
    for &i in nodes {
        let info: NodeInfo = rpt.info(g, i);
        let node_start = if info.start_line != 0 {
            info.start_line
        } else {
            info.lineno - MARGIN
        };
        start = start.min(node_start);
        end = end.max(info.lineno + MARGIN);
        let e = per_line.entry(info.lineno).or_default();
        e.0 += g.nodes[i].flat;
        e.1 += g.nodes[i].cum;
    }
    let start = start.max(1);
    let value = |l: i64| per_line.get(&l).copied().unwrap_or((0, 0));
    let mut lines = Vec::new();
    let error = match reader.lines(file) {
        Ok(text) => {
            for l in start..=end {
                let Some(t) = usize::try_from(l - 1).ok().and_then(|k| text.get(k)) else {
                    break;
                };
                let (flat, cum) = value(l);
                lines.push(SourceLine {
                    line: l,
                    flat,
                    cum,
                    text: Some(t.clone()),
                });
            }
            None
        }
        Err(e) => {
            let mut sampled: Vec<i64> = per_line
                .iter()
                .filter(|(&l, &(f, c))| l >= 1 && (f != 0 || c != 0))
                .map(|(&l, _)| l)
                .collect();
            sampled.sort_unstable();
            for l in sampled {
                let (flat, cum) = value(l);
                lines.push(SourceLine {
                    line: l,
                    flat,
                    cum,
                    text: None,
                });
            }
            Some(e)
        }
    };
    ListedFunction {
        name: name.to_string(),
        file: file.to_string(),
        flat,
        cum,
        lines,
        error,
    }
}

/// A value, or `.` for zero (pprof's `valueOrDot`).
fn value_or_dot(rpt: &Report, v: i64) -> String {
    if v == 0 {
        ".".into()
    } else {
        rpt.format_value(v)
    }
}

/// `list REGEX` as pprof prints it: `Total: …`, then per function and file a `ROUTINE`
/// header, the totals, and the annotated lines. A source file that cannot be found gets one
/// message (naming it, with what was searched, and how to point at the sources) and its
/// sampled lines without text. `Err` when no function matches.
pub fn list_text(rpt: &Report, rx: &Regex) -> Result<String, String> {
    let functions = list(rpt, rx)?;
    let mut out = format!("Total: {}\n", rpt.format_value(rpt.total));
    for f in &functions {
        if f.file.is_empty() {
            out.push_str(&format!("No source information for {}\n", f.name));
            continue;
        }
        out.push_str(&format!(
            "ROUTINE ======================== {} in {}\n",
            f.name, f.file
        ));
        out.push_str(&format!(
            "{:>10} {:>10} (flat, cum) {} of Total\n",
            rpt.format_value(f.flat),
            rpt.format_value(f.cum),
            percentage(f.cum, rpt.total)
        ));
        if let Some(e) = &f.error {
            out.push_str(&format!(" Error: {e}\n"));
        }
        for l in &f.lines {
            out.push_str(&format!(
                "{:>10} {:>10} {:>6}:{}\n",
                value_or_dot(rpt, l.flat),
                value_or_dot(rpt, l.cum),
                l.line,
                l.text.as_deref().unwrap_or("")
            ));
        }
    }
    Ok(out)
}

/// `list REGEX` as JSON: per function and file, the totals, the lines (`text` null when the
/// source was not found) and the error, if any.
pub fn list_json(rpt: &Report, rx: &Regex) -> Result<Value, String> {
    let functions = list(rpt, rx)?;
    let functions: Vec<Value> = functions
        .iter()
        .map(|f| {
            let lines: Vec<Value> = f
                .lines
                .iter()
                .map(|l| json!({"line": l.line, "flat": l.flat, "cum": l.cum, "text": l.text}))
                .collect();
            json!({
                "name": f.name,
                "file": f.file,
                "flat": f.flat,
                "cum": f.cum,
                "cum_pct": pct(f.cum, rpt.total),
                "source_found": f.error.is_none(),
                "error": f.error,
                "lines": lines,
            })
        })
        .collect();
    Ok(json!({
        "view": "list",
        "sample_type": rpt.sample_type.ty,
        "unit": rpt.sample_type.unit,
        "total": rpt.total,
        "functions": functions,
    }))
}

/// Finds and reads source files, caching each file's lines (or why it could not be read).
/// The largest source file read (16 MiB): a profile may name any file, and a source file
/// is far smaller (the largest of rustc's own sources is under 1 MiB).
pub const MAX_SOURCE_BYTES: u64 = 16 << 20;

/// The bytes of the source file at `path`: a regular file of at most [`MAX_SOURCE_BYTES`].
/// Opened with `O_NONBLOCK`, so that a FIFO or a device put where the check saw a file does
/// not block the open, then checked again on the descriptor (fstat).
fn read_source(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot read it: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("not read: it is not a regular file".into());
    }
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(format!(
            "not read: {} bytes, over the {} MiB read for a source file",
            meta.len(),
            MAX_SOURCE_BYTES >> 20
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // At most the limit even if the file grows meanwhile.
    f.take(MAX_SOURCE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    Ok(bytes)
}

struct SourceReader {
    /// `--source-path` directories; the current directory when none was given.
    dirs: Vec<PathBuf>,
    /// Whether `--source-path` was given.
    explicit: bool,
    /// Whether `--trim-path` was given (pprof then skips its own prefix guessing).
    trim_given: bool,
    files: HashMap<String, Result<Vec<String>, String>>,
}

impl SourceReader {
    fn new(source_path: &str, trim_path: &str) -> SourceReader {
        let mut dirs: Vec<PathBuf> = source_path
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect();
        let explicit = !dirs.is_empty();
        if !explicit {
            dirs.push(std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")));
        }
        SourceReader {
            dirs,
            explicit,
            trim_given: !trim_path.is_empty(),
            files: HashMap::new(),
        }
    }

    /// The lines of `file` (the profile's path, already trimmed by `--trim-path`).
    fn lines(&mut self, file: &str) -> Result<&Vec<String>, String> {
        if !self.files.contains_key(file) {
            let read = self.read(file);
            self.files.insert(file.to_string(), read);
        }
        match &self.files[file] {
            Ok(lines) => Ok(lines),
            Err(e) => Err(e.clone()),
        }
    }

    fn read(&self, file: &str) -> Result<Vec<String>, String> {
        for candidate in self.candidates(file) {
            if !candidate.is_file() {
                continue;
            }
            return match read_source(&candidate) {
                // Go's line scanner: lines split at `\n`, a `\r` before it dropped.
                Ok(bytes) => Ok(String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(str::to_string)
                    .collect()),
                Err(e) => Err(format!("{}: {e}", candidate.display())),
            };
        }
        let searched: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        let looked = if self.explicit {
            format!("looked under --source-path {}", searched.join(":"))
        } else {
            format!("looked in the current directory {}", searched.join(""))
        };
        Err(format!(
            "source file {file} not found ({looked}); the sampled lines are listed without \
             their text. Point --source-path DIR[:DIR...] at a copy of the sources (matched \
             by their trailing path components), and --trim-path PREFIX at the build \
             machine's prefix"
        ))
    }

    /// Where `file` may be, in order: itself when absolute; under each directory with its
    /// relative path and then its trailing components; under each directory's parents with
    /// its relative path (pprof's search).
    fn candidates(&self, file: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if Path::new(file).is_absolute() {
            out.push(PathBuf::from(file));
        }
        let path = self.guess_trim(file);
        let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        // Trailing components are only tried in directories the user named: in the current
        // directory a bare file name would too easily match an unrelated file.
        let suffixes = if self.explicit { components.len() } else { 1 };
        let relative = Path::new(path).is_relative();
        for dir in &self.dirs {
            for skip in 0..suffixes {
                if skip == 0 && !relative && !self.explicit {
                    continue;
                }
                out.push(dir.join(components[skip..].join("/")));
            }
        }
        if relative {
            for dir in &self.dirs {
                for parent in dir.ancestors().skip(1) {
                    out.push(parent.join(path));
                }
            }
        }
        out
    }

    /// pprof's `trimPath` heuristics: without `--trim-path`, everything up to a directory
    /// named as a source directory's (or the current directory's) last component is dropped
    /// (`/build/my-project/src/a.rs` with `--source-path ~/my-project` reads
    /// `~/my-project/src/a.rs`); `/proc/self/cwd/` is always dropped.
    fn guess_trim<'a>(&self, file: &'a str) -> &'a str {
        if !self.trim_given {
            for dir in &self.dirs {
                let Some(base) = dir.file_name().and_then(|b| b.to_str()) else {
                    continue;
                };
                let want = format!("/{base}/");
                if let Some(found) = file.find(&want) {
                    return &file[found + want.len()..];
                }
            }
        }
        for prefix in ["/proc/self/cwd/./", "/proc/self/cwd/"] {
            if let Some(rest) = file.strip_prefix(prefix) {
                return rest;
            }
        }
        file
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::{Options, View};
    use crate::{Line, Profile, ValueType};

    /// A profile of `main` (lines 3 and 4 of `file`) calling `work` (lines 10 and 12), in
    /// nanoseconds: main:3 -> work:10 (leaf) 30ms; main:4 -> work:12 (leaf) 50ms; main:4
    /// (leaf) 20ms.
    fn profile(file: &str) -> Profile {
        let mut p = Profile {
            sample_types: vec![ValueType::new("cpu", "nanoseconds")],
            ..Profile::default()
        };
        p.push_function(1, "main", "", file, 0);
        p.push_function(2, "work", "", file, 8);
        for (id, function, line) in [(1, 0, 3), (2, 0, 4), (3, 1, 10), (4, 1, 12)] {
            p.push_location(id, None, 0, &[Line { function, line }], false);
        }
        for (stack, ms) in [(vec![2, 0], 30), (vec![3, 1], 50), (vec![1], 20)] {
            p.push_sample(stack, &[ms * 1_000_000], &[]);
        }
        p
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tickscope-list-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn report(p: Profile, source_path: &str) -> Report {
        let options = Options {
            source_path: source_path.into(),
            ..Options::default()
        };
        Report::new(p, View::List, &options).unwrap()
    }

    #[test]
    fn lists_each_line_with_its_flat_and_cum_values() {
        let dir = temp_dir("found");
        let src: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.join("prog.rs"), src).unwrap();
        let file = dir.join("prog.rs").display().to_string();
        let rpt = report(profile(&file), "");
        let text = list_text(&rpt, &Regex::new("^work$").unwrap()).unwrap();
        // work starts at line 8 (its start_line); 5 lines after the last sampled line 12.
        let expected = format!(
            "Total: 100ms\n\
             ROUTINE ======================== work in {file}\n\
             \x20     80ms       80ms (flat, cum) 80.00% of Total\n\
             \x20        .          .      8:line 8\n\
             \x20        .          .      9:line 9\n\
             \x20     30ms       30ms     10:line 10\n\
             \x20        .          .     11:line 11\n\
             \x20     50ms       50ms     12:line 12\n\
             \x20        .          .     13:line 13\n\
             \x20        .          .     14:line 14\n\
             \x20        .          .     15:line 15\n\
             \x20        .          .     16:line 16\n\
             \x20        .          .     17:line 17\n"
        );
        assert_eq!(text, expected);
        // main has no start line: from 5 lines before line 3 (clamped to 1) to 5 after line
        // 4, cut at the end of the file for a short one.
        let f = &list(&rpt, &Regex::new("main").unwrap()).unwrap()[0];
        let got: Vec<(i64, i64, i64)> = f.lines.iter().map(|l| (l.line, l.flat, l.cum)).collect();
        let ms = 1_000_000;
        let mut want: Vec<(i64, i64, i64)> = (1..=9).map(|l| (l, 0, 0)).collect();
        want[2] = (3, 0, 30 * ms);
        want[3] = (4, 20 * ms, 70 * ms);
        assert_eq!(got, want);
        assert_eq!((f.flat, f.cum), (20 * ms, 100 * ms));
        let json = list_json(&rpt, &Regex::new("work").unwrap()).unwrap();
        assert_eq!(json["functions"][0]["lines"][2]["text"], "line 10");
        assert_eq!(json["functions"][0]["lines"][2]["flat"], 30 * ms);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_source_over_the_limit_is_not_read_and_says_so() {
        let dir = temp_dir("big");
        let big = dir.join("big.rs");
        // Sparse: no disk used; read whole it would take 16 MiB and more.
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_SOURCE_BYTES + 1)
            .unwrap();
        let rpt = report(profile(&big.display().to_string()), "");
        let text = list_text(&rpt, &Regex::new("^work$").unwrap()).unwrap();
        let said: Vec<&str> = text.lines().filter(|l| l.contains("Error:")).collect();
        assert_eq!(said.len(), 1, "{text}");
        assert!(said[0].contains("over the 16 MiB"), "{text}");
        // The sampled lines are listed without their text.
        assert!(text.ends_with("      30ms       30ms     10:\n      50ms       50ms     12:\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_fifo_or_a_device_is_never_read_as_a_source() {
        let dir = temp_dir("fifo");
        let fifo = dir.join("src.rs");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            // Opening it to read would wait for a writer forever without O_NONBLOCK.
            let e = read_source(&fifo).unwrap_err();
            assert!(e.contains("not a regular file"), "{e}");
        }
        let e = read_source(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_sources_are_named_and_the_figures_still_listed() {
        let rpt = report(profile("/nonexistent/build/src/prog.rs"), "");
        let text = list_text(&rpt, &Regex::new("work").unwrap()).unwrap();
        assert!(
            text.contains(" Error: source file /nonexistent/build/src/prog.rs not found"),
            "{text}"
        );
        assert!(text.contains("--source-path"), "{text}");
        assert!(text.ends_with("      30ms       30ms     10:\n      50ms       50ms     12:\n"));
        let json = list_json(&rpt, &Regex::new("work").unwrap()).unwrap();
        assert_eq!(json["functions"][0]["source_found"], false);
        assert_eq!(json["functions"][0]["lines"][0]["text"], Value::Null);
    }

    #[test]
    fn source_path_matches_trailing_components() {
        let dir = temp_dir("search");
        std::fs::create_dir_all(dir.join("src")).unwrap();
        let src: String = (1..=12).map(|i| format!("l{i}\n")).collect();
        std::fs::write(dir.join("src/prog.rs"), src).unwrap();
        let rpt = report(
            profile("/build/machine/checkout/src/prog.rs"),
            &dir.display().to_string(),
        );
        let f = &list(&rpt, &Regex::new("work").unwrap()).unwrap()[0];
        assert_eq!(f.error, None);
        assert_eq!(f.lines[2].text.as_deref(), Some("l10"));
        // With the last line 12 of 12, the window stops at the end of the file.
        assert_eq!(f.lines.last().unwrap().line, 12);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_match_is_an_error() {
        let rpt = report(profile("/x.rs"), "");
        let e = list_text(&rpt, &Regex::new("nothing").unwrap()).unwrap_err();
        assert_eq!(e, "no matches found for regexp: nothing");
    }
}
