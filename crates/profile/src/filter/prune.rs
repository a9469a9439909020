//! Frame pruning with pprof's semantics (its `profile/prune.go`): the profile's own
//! `drop_frames` / `keep_frames` ([`remove_uninteresting`], done once after loading) and
//! `--prune_from` ([`prune_from`]). Both match a function's name after pprof's
//! simplification (a leading `.` and the argument list removed), never its file or mapping.

use super::pattern::{regex_error, Pattern};
use crate::model::{Function, Profile};
use crate::store::Strings;

/// pprof's `simplifyFunc`: drops one leading `.` (PPC ELF v1) and everything from the first
/// `(` that does not begin `(anonymous namespace)` or end `operator()`.
fn simplify_func(name: &str) -> &str {
    const RESERVED: [&str; 2] = ["(anonymous namespace)", "operator()"];
    let name = name.strip_prefix('.').unwrap_or(name);
    let bytes = name.as_bytes();
    let mut i = 0;
    // The leftmost-first scan pprof's `(anonymous namespace)|operator\(\)|\(` does.
    while i < bytes.len() {
        // Compared as bytes: `i` may sit inside a multi-byte character.
        if let Some(r) = RESERVED
            .iter()
            .find(|r| bytes[i..].starts_with(r.as_bytes()))
        {
            i += r.len();
        } else if bytes[i] == b'(' {
            return &name[..i];
        } else {
            i += 1;
        }
    }
    name
}

#[cfg(test)]
#[test]
fn simplify_func_survives_multibyte_names() {
    assert_eq!(simplify_func("ä€(x)"), "ä€");
    assert_eq!(
        simplify_func(".f(anonymous namespace)::g(int)"),
        "f(anonymous namespace)::g"
    );
}

/// Whether a function's simplified name matches, cached per function.
struct NameCache<'a> {
    functions: &'a [Function],
    strings: &'a Strings,
    cache: Vec<Option<bool>>,
}

impl<'a> NameCache<'a> {
    fn new(functions: &'a [Function], strings: &'a Strings) -> NameCache<'a> {
        NameCache {
            functions,
            strings,
            cache: vec![None; functions.len()],
        }
    }

    /// `test` on the simplified name of function `f` (false for an unnamed one).
    fn get(&mut self, f: u32, test: impl FnOnce(&str) -> bool) -> bool {
        let name = self.strings.get(self.functions[f as usize].name);
        *self.cache[f as usize].get_or_insert_with(|| !name.is_empty() && test(simplify_func(name)))
    }
}

/// Prunes with the profile's `drop_frames` and `keep_frames` (pprof's `RemoveUninteresting`):
/// each must match a whole simplified function name. Nothing happens without `drop_frames`.
///
/// pprof ignores the error (a bad expression then prunes nothing); it is returned here, as
/// `failed to compile regexp X: why`, with the profile unchanged.
pub fn remove_uninteresting(p: &mut Profile) -> Result<(), String> {
    if p.drop_frames.is_empty() {
        return Ok(());
    }
    let compile = |rx: &str| {
        Pattern::new(&format!("^({rx})$"))
            .map_err(|why| format!("failed to compile regexp {rx}: {why}"))
    };
    let drop = compile(&p.drop_frames)?;
    let keep = if p.keep_frames.is_empty() {
        None
    } else {
        Some(compile(&p.keep_frames)?)
    };
    prune(p, &drop, keep.as_ref());
    Ok(())
}

/// How a location is pruned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Not at all.
    No,
    /// Its outermost line matched: the whole location goes, with everything it calls.
    Whole,
    /// An inner line matched: the location keeps its lines outer to it; what it calls goes.
    Beneath,
}

/// pprof's `Prune`: removes every frame beneath (called by) a frame matching `drop` and not
/// `keep`, and the matching frame itself. Frames from the root up to the first one that does
/// not match are never pruned, so that a sample keeps some stack.
fn prune(p: &mut Profile, drop: &Pattern, keep: Option<&Pattern>) {
    let Profile {
        samples,
        locations,
        functions,
        strings,
        lines,
        stacks,
        ..
    } = p;
    let mut names = NameCache::new(functions, strings);
    let dropped = |s: &str| drop.is_match(s) && !keep.is_some_and(|k| k.is_match(s));
    let cuts: Vec<Cut> = locations
        .iter_mut()
        .map(|loc| {
            // The outermost matching line (lines are innermost first).
            let Some(i) = lines[loc.lines.range()]
                .iter()
                .rposition(|l| names.get(l.function, dropped))
            else {
                return Cut::No;
            };
            if i == loc.lines.len() - 1 {
                Cut::Whole
            } else {
                loc.lines.keep(i + 1, loc.lines.len());
                Cut::Beneath
            }
        })
        .collect();

    for s in samples {
        // From the root to the leaf; nothing is pruned before the first frame kept whole.
        let mut found_user = false;
        let mut from = 0;
        for (i, l) in stacks.get(s.stack).enumerate().rev() {
            match cuts[l as usize] {
                Cut::No => found_user = true,
                _ if !found_user => {}
                Cut::Whole => {
                    from = i + 1;
                    break;
                }
                Cut::Beneath => {
                    from = i;
                    break;
                }
            }
        }
        s.stack.keep(from, s.stack.len());
    }
}

/// pprof's `PruneFrom` (`-prune_from`): removes every frame beneath (called by) the innermost
/// frame whose simplified function name matches `pattern`, keeping that frame; `pprof` runs
/// it after [`apply`](super::apply)'s filters. The error, for a bad expression, is a
/// sentence naming it.
pub fn prune_from(p: &mut Profile, pattern: &str) -> Result<(), String> {
    let rx = Pattern::new(pattern).map_err(|why| regex_error("prune_from", pattern, &why))?;
    let Profile {
        samples,
        locations,
        functions,
        strings,
        lines,
        stacks,
        ..
    } = p;
    let mut names = NameCache::new(functions, strings);
    let beneath: Vec<bool> = locations
        .iter_mut()
        .map(|loc| {
            let hit = lines[loc.lines.range()]
                .iter()
                .position(|l| names.get(l.function, |s| rx.is_match(s)));
            if let Some(i) = hit {
                loc.lines.keep(i, loc.lines.len());
            }
            hit.is_some()
        })
        .collect();
    for s in samples {
        if let Some(i) = stacks.get(s.stack).position(|l| beneath[l as usize]) {
            s.stack.keep(i, s.stack.len());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{build, stacks};

    fn owned(v: &[(&str, i64)]) -> Vec<(String, i64)> {
        v.iter().map(|&(s, n)| (s.to_string(), n)).collect()
    }

    #[test]
    fn simplifies_like_pprof() {
        assert_eq!(simplify_func("foo(int, char)"), "foo");
        assert_eq!(simplify_func(".foo"), "foo");
        assert_eq!(simplify_func("..foo"), ".foo");
        assert_eq!(
            simplify_func("(anonymous namespace)::f(int)"),
            "(anonymous namespace)::f"
        );
        assert_eq!(simplify_func("A::operator()(int) const"), "A::operator()");
        assert_eq!(simplify_func("runtime.(*bmap).overflow"), "runtime.");
        assert_eq!(simplify_func("main.main"), "main.main");
    }

    #[test]
    fn drop_frames_prunes_the_match_and_what_it_calls() {
        let input = &[
            ("main;malloc;mmap;brk", 5),
            ("main;work|malloc|inner;mmap", 3),
            ("malloc;mmap", 2),
            ("main;work", 1),
        ];
        let mut p = build(input);
        p.drop_frames = "malloc|mmap".into();
        remove_uninteresting(&mut p).unwrap();
        assert_eq!(
            stacks(&p),
            owned(&[
                // The outermost match goes, with everything beneath it.
                ("main", 5),
                // An inlined match: the location keeps its outer lines.
                ("main;work", 3),
                // Matching from the root: nothing pruned.
                ("malloc;mmap", 2),
                ("main;work", 1),
            ])
        );
    }

    #[test]
    fn keep_frames_and_whole_names() {
        let mut p = build(&[("main;malloc;mmap;brk", 5), ("main;mallocx;brk", 1)]);
        p.drop_frames = "malloc|mmap".into();
        p.keep_frames = "malloc".into();
        remove_uninteresting(&mut p).unwrap();
        // `malloc` is kept, `mmap` dropped; `mallocx` does not match the whole name.
        assert_eq!(
            stacks(&p),
            owned(&[("main;malloc", 5), ("main;mallocx;brk", 1)])
        );
        // Names are simplified first.
        let mut p = build(&[("main;operator new(unsigned long);x", 1)]);
        p.drop_frames = "operator new".into();
        remove_uninteresting(&mut p).unwrap();
        assert_eq!(stacks(&p), owned(&[("main", 1)]));
    }

    #[test]
    fn bad_drop_frames_is_an_error_and_changes_nothing() {
        let mut p = build(&[("main;a", 1)]);
        p.drop_frames = "a(".into();
        let before = p.clone();
        let err = remove_uninteresting(&mut p).unwrap_err();
        assert!(err.contains("a("), "{err}");
        assert_eq!(p, before);
        // No drop_frames: keep_frames alone does nothing.
        let mut p = build(&[("main;a", 1)]);
        p.keep_frames = "(".into();
        remove_uninteresting(&mut p).unwrap();
        assert_eq!(stacks(&p), owned(&[("main;a", 1)]));
    }

    #[test]
    fn prune_from_keeps_the_innermost_match() {
        let mut p = build(&[("a;b;c;b;d", 1), ("x|b|y;z", 2), ("a;d", 4)]);
        prune_from(&mut p, "^b$").unwrap();
        assert_eq!(stacks(&p), owned(&[("a;b;c;b", 1), ("x|b", 2), ("a;d", 4)]));
        assert!(prune_from(&mut p, "b(").unwrap_err().contains("b("));
    }
}
