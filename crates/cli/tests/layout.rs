//! The workspace's module graph: no import circle in any crate, except the one documented
//! edge a crate may keep (docs/ARCHITECTURE.md). Read from the sources, so a new circle fails
//! here, not in a review.
//!
//! The graph: a file is a module (`a/b.rs` and `a/b/mod.rs` are `a::b`); each path it names
//! (`crate::a::b::f`, `super::x`, `self::y`, and the names inside `use crate::{...}`) is an
//! edge to the deepest module that path names. A parent and its own children may use each
//! other (`mod child; pub use child::T` and `use super::*`); the rule is about siblings:
//! within every module, its child modules, each standing for its whole subtree, must form a
//! graph without a circle. A file's tests (`#[cfg(test)] mod tests`) are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The one edge a crate may keep against the layering, with the reason it is there.
const DOCUMENTED: &[(&str, &str, &str, &str)] = &[
    (
        "core",
        "scope",
        "runtime",
        "a program's first scope applies the settings (scope::first_use → runtime::ensure_init): \
         no setup call",
    ),
    (
        "preload",
        "profile",
        "ffi",
        "the profile's life (start, stop, write) answers the interposed functions' pending \
         start, stop request and fork child (ffi/deferred.rs, ffi/hooks)",
    ),
];

type Module = Vec<String>;

/// Every crate's `src`: its name (the directory under crates/) and path.
fn crates() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                p.join("src"),
            )
        })
        .collect();
    v.sort();
    assert!(
        v.len() >= 8,
        "expected the workspace's crates under {}",
        root.display()
    );
    v
}

/// The `.rs` files under `dir`, with their module paths.
fn files(src: &Path, dir: &Path, out: &mut BTreeMap<Module, PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(src, &p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut m: Module = rel
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                m.pop();
            }
            out.insert(m, p);
        }
    }
}

/// The text of a file without its tests and its comments.
fn code(text: &str) -> String {
    // `#[cfg(test)]` or `#[cfg(all(test, ...))]`, other attributes, then `mod tests`.
    let tests = regex::Regex::new(
        r"(?m)^#\[cfg\((?:all\()?test\b[^\n]*\n(?:#\[[^\n]*\n)*(?:pub(?:\(crate\))? )?mod tests\b",
    )
    .unwrap();
    let cut = tests.find(text).map_or(text.len(), |m| m.start());
    let comment = regex::Regex::new(r"//[^\n]*").unwrap();
    comment.replace_all(&text[..cut], "").into_owned()
}

/// Edges from each module to the modules it names.
fn edges(mods: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    let path = regex::Regex::new(r"\b(crate|super|self)((?:::\w+)+)").unwrap();
    let group = regex::Regex::new(r"(?s)use crate::\{([^;]*)\};").unwrap();
    let mut out: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, file) in mods {
        if m.last().is_some_and(|l| l == "tests") {
            continue;
        }
        let text = code(&std::fs::read_to_string(file).unwrap());
        let mut named: Vec<Module> = Vec::new();
        for c in path.captures_iter(&text) {
            let mut parts: Vec<String> = c[2].split("::").skip(1).map(str::to_owned).collect();
            let mut at: Module = match &c[1] {
                "crate" => vec![],
                "self" => m.clone(),
                _ => {
                    let mut up = m.clone();
                    up.pop();
                    while parts.first().is_some_and(|p| p == "super") {
                        up.pop();
                        parts.remove(0);
                    }
                    up
                }
            };
            at.extend(parts);
            named.push(at);
        }
        for c in group.captures_iter(&text) {
            for item in c[1].split(',') {
                let item: Module = item
                    .split("::")
                    .map(|s| {
                        s.trim_matches(|ch: char| ch == '{' || ch == '}' || ch.is_whitespace())
                    })
                    .map(str::to_owned)
                    .collect();
                if item.first().is_some_and(|f| !f.is_empty() && f != "self") {
                    named.push(item);
                }
            }
        }
        for n in named {
            if let Some(k) = (1..=n.len()).rev().find(|&k| mods.contains_key(&n[..k])) {
                out.entry(m.clone()).or_default().insert(n[..k].to_vec());
            }
        }
    }
    out
}

/// The circles among siblings: for each module with children, the strongly connected sets
/// (of two or more) of its children, each child standing for its subtree; `allowed` edges
/// (between siblings, by the siblings' paths) left out.
fn circles(
    mods: &BTreeMap<Module, PathBuf>,
    edges: &BTreeMap<Module, BTreeSet<Module>>,
    allowed: &[(Module, Module)],
) -> Vec<Vec<Module>> {
    let parents: BTreeSet<Module> = mods
        .keys()
        .filter(|m| !m.is_empty())
        .map(|m| m[..m.len() - 1].to_vec())
        .collect();
    let mut found = Vec::new();
    for p in parents {
        let n = p.len();
        let child = |m: &Module| (m.len() > n && m[..n] == p[..]).then(|| m[..=n].to_vec());
        let mut g: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (a, ts) in edges {
            let Some(ka) = child(a) else { continue };
            for t in ts {
                if let Some(kt) = child(t) {
                    if kt != ka && !allowed.contains(&(ka.clone(), kt.clone())) {
                        g.entry(ka.clone()).or_default().insert(kt);
                    }
                }
            }
        }
        found.extend(strongly_connected(&g).into_iter().filter(|c| c.len() > 1));
    }
    found
}

/// Tarjan's strongly connected components of `g`.
fn strongly_connected(g: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        g: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        let g = s.g;
        for w in g.get(v).into_iter().flatten() {
            let w = g.get_key_value(w).map_or(w, |(k, _)| k);
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn module(path: &str) -> Module {
    path.split("::").map(str::to_owned).collect()
}

#[test]
fn no_crate_has_an_import_circle_but_its_one_documented_edge() {
    let mut problems = Vec::new();
    for (name, src) in crates() {
        let mut mods = BTreeMap::new();
        files(&src, &src, &mut mods);
        let allowed: Vec<(Module, Module)> = DOCUMENTED
            .iter()
            .filter(|(c, ..)| *c == name)
            .map(|(_, a, b, _)| (module(a), module(b)))
            .collect();
        assert!(allowed.len() <= 1, "{name}: more than one documented edge");
        let e = edges(&mods);
        for (a, b) in &allowed {
            assert!(
                e.iter()
                    .any(|(from, to)| from.starts_with(a) && to.iter().any(|t| t.starts_with(b))),
                "{name}: the documented edge {a:?} → {b:?} is gone: take it out of DOCUMENTED"
            );
        }
        for c in circles(&mods, &e, &allowed) {
            let c: Vec<String> = c.iter().map(|m| m.join("::")).collect();
            problems.push(format!("{name}: {}", c.join(" ↔ ")));
        }
    }
    assert!(
        problems.is_empty(),
        "import circles:\n{}",
        problems.join("\n")
    );
}

/// Where `unsafe` may be, outside tests, with the reason (docs/decisions/0032): the
/// platform crate; the sampler's signal handler and what it reads and writes; the heap
/// profiler's global allocator (`GlobalAlloc` is an unsafe trait: its methods pass their
/// contract on, decision 35); the preload library's interposed C functions; and the two
/// lock-free structures of core's hot path, whose soundness rests on what their owning
/// thread does, not on a platform call.
const UNSAFE_LIVES: &[(&str, &str)] = &[
    ("sys", ""),
    ("sampler", "handler"),
    ("sampler", "unwind"),
    ("sampler", "table"),
    ("sampler", "heap::global"),
    ("preload", "ffi"),
    ("core", "scope::hist"),
    ("core", "capture::ring"),
];

/// The modules of the crate at `src` whose code, outside tests and comments, says `unsafe`.
fn unsafe_modules(src: &Path) -> Vec<(String, PathBuf)> {
    let word = regex::Regex::new(r"\bunsafe\b").unwrap();
    let mut mods = BTreeMap::new();
    files(src, src, &mut mods);
    mods.into_iter()
        .filter(|(m, _)| m.last().is_none_or(|l| l != "tests"))
        .filter(|(_, f)| word.is_match(&code(&std::fs::read_to_string(f).unwrap())))
        .map(|(m, f)| (m.join("::"), f))
        .collect()
}

#[test]
fn unsafe_lives_only_where_the_architecture_says() {
    let mut found = Vec::new();
    let mut used = BTreeSet::new();
    for (name, src) in crates() {
        for (path, file) in unsafe_modules(&src) {
            let allowed = UNSAFE_LIVES.iter().find(|(c, prefix)| {
                *c == name
                    && (prefix.is_empty()
                        || path == *prefix
                        || path.starts_with(&format!("{prefix}::")))
            });
            match allowed {
                Some(a) => {
                    used.insert(*a);
                }
                None => found.push(format!("{name}: {path} ({})", file.display())),
            }
        }
    }
    assert!(
        found.is_empty(),
        "`unsafe` outside the places it may live (see UNSAFE_LIVES):\n{}",
        found.join("\n")
    );
    let stale: Vec<_> = UNSAFE_LIVES.iter().filter(|a| !used.contains(*a)).collect();
    assert!(
        stale.is_empty(),
        "no `unsafe` left in {stale:?}: take it out of UNSAFE_LIVES"
    );
}

/// The scan finds `unsafe` in code, and not in a comment or in tests, however their
/// `cfg` is spelled.
#[test]
fn the_unsafe_scan_finds_a_planted_block() {
    let dir = tempfile_dir("unsafe");
    let w = |p: &str, s: &str| {
        let p = dir.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    w("lib.rs", "mod a; mod b; mod c; // unsafe in a comment\n");
    w(
        "a.rs",
        "pub fn f() -> u64 { unsafe { core::arch::x86_64::_rdtsc() } }\n",
    );
    w(
        "b.rs",
        "pub fn g() {}\n#[cfg(all(test, target_arch = \"x86_64\"))]\n#[allow(unsafe_code)]\nmod tests { fn t() { unsafe {} } }\n",
    );
    w("c/mod.rs", "mod tests;\n");
    w("c/tests.rs", "fn t() { unsafe {} }\n");
    let found: Vec<String> = unsafe_modules(&dir).into_iter().map(|(m, _)| m).collect();
    assert_eq!(found, vec!["a".to_string()]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The check finds a circle where there is one, through a subtree and `super::`, and
/// ignores a parent using its child.
#[test]
fn the_circle_check_finds_a_planted_circle() {
    let dir = tempfile_dir("circle");
    let w = |p: &str, s: &str| {
        let p = dir.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    w("lib.rs", "mod a; mod b; mod c; use crate::a::f;");
    w("a/mod.rs", "mod inner; pub fn f() { inner::g() }");
    w("a/inner.rs", "pub fn g() { super::super::b::h() }");
    w(
        "b.rs",
        "pub fn h() { crate::a::f() } fn k() { super::c::z() }",
    );
    w(
        "c.rs",
        "pub fn z() {} // crate::b::h() in a comment is not an edge",
    );
    let mut mods = BTreeMap::new();
    files(&dir, &dir, &mut mods);
    let e = edges(&mods);
    let found = circles(&mods, &e, &[]);
    assert_eq!(found.len(), 1, "{found:?}");
    let mut c = found[0].clone();
    c.sort();
    assert_eq!(c, vec![module("a"), module("b")]);
    assert!(circles(&mods, &e, &[(module("b"), module("a"))]).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A directory of this test's own, in the build's scratch space (not a shared /tmp).
fn tempfile_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("layout-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
