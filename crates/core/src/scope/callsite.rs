//! Call sites: one `static Callsite` per `scope!` / `#[profile]`, its id assigned on first use.
//!
//! The id is the index of the scope's slot in every thread's table. Reading it is one relaxed
//! load; registration is `#[cold]` and takes the table's lock once per call site. A group
//! (`scope!(group = "alloc")`) maps every call site naming it to one id, so the whole API is one
//! row; any other call site gets an id of its own, so equal names in different files (or lines)
//! never merge.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// Ids are `1..MAX_CALLSITES`; 0 means "not registered yet".
pub(crate) const MAX_CALLSITES: u32 =
    super::thread::DIR_LEN as u32 * super::thread::PAGE_LEN as u32;
/// Call sites past the table's capacity all share this id, reported as one honest row.
pub(crate) const OVERFLOW_ID: u32 = MAX_CALLSITES - 1;
// A captured scope's guard keeps its call site's id below its flags.
const _: () = assert!(MAX_CALLSITES <= super::thread::SITE_MASK);

/// How a call site names its row.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum Name {
    /// A name given at the call site.
    Static(&'static str),
    /// The enclosing function, from `type_name` of an item nested in it; resolved at
    /// registration (it is not `const`).
    Function(fn() -> &'static str),
}

/// Whether a call site is its own row or one of a group's.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A row per call site.
    Scope,
    /// One row per group name, across call sites and files.
    Group,
}

/// The static state of one `scope!` call site. Created by the macros; not a stable API.
#[doc(hidden)]
pub struct Callsite {
    name: Name,
    kind: Kind,
    file: &'static str,
    line: u32,
    module: &'static str,
    id: AtomicU32,
}

impl Callsite {
    /// A call site; `file`, `line` and `module` come from `file!()`, `line!()`, `module_path!()`.
    pub const fn new(
        name: Name,
        kind: Kind,
        file: &'static str,
        line: u32,
        module: &'static str,
    ) -> Callsite {
        Callsite {
            name,
            kind,
            file,
            line,
            module,
            id: AtomicU32::new(0),
        }
    }

    /// This call site's id (its row), registering it on first use.
    #[inline(always)]
    pub fn id(&'static self) -> u32 {
        let id = self.id.load(Relaxed);
        if id != 0 {
            id
        } else {
            self.register()
        }
    }

    #[cold]
    #[inline(never)]
    fn register(&'static self) -> u32 {
        crate::own::own(|| self.register_unowned())
    }

    #[inline(never)]
    fn register_unowned(&'static self) -> u32 {
        super::first_use();
        let mut table = table();
        // Another thread may have registered this call site while we waited for the lock.
        let id = self.id.load(Relaxed);
        if id != 0 {
            return id;
        }
        let name = match self.name {
            Name::Static(s) => s,
            Name::Function(f) => function_name(f()),
        };
        let id = match self.kind {
            Kind::Group => match table.groups.get(name) {
                Some(&id) => {
                    table.infos[id as usize].sites += 1;
                    id
                }
                None => {
                    let id = table.push(self, name);
                    table.groups.insert(name, id);
                    id
                }
            },
            Kind::Scope => table.push(self, name),
        };
        self.id.store(id, Relaxed);
        id
    }
}

/// What reports know of a row.
#[derive(Clone, Debug)]
pub(crate) struct CallsiteInfo {
    pub name: &'static str,
    pub kind: Kind,
    pub file: &'static str,
    pub line: u32,
    pub module: &'static str,
    /// Call sites sharing the row (groups; the overflow row).
    pub sites: u32,
}

pub(crate) struct Table {
    /// Indexed by id; entry 0 is a placeholder.
    infos: Vec<CallsiteInfo>,
    groups: HashMap<&'static str, u32>,
}

impl Table {
    fn push(&mut self, cs: &Callsite, name: &'static str) -> u32 {
        let id = self.infos.len() as u32;
        if id >= OVERFLOW_ID {
            if id == OVERFLOW_ID {
                self.infos.push(CallsiteInfo {
                    name: "<other call sites: table full>",
                    kind: Kind::Group,
                    file: "",
                    line: 0,
                    module: "",
                    sites: 0,
                });
            }
            self.infos[OVERFLOW_ID as usize].sites += 1;
            return OVERFLOW_ID;
        }
        self.infos.push(CallsiteInfo {
            name,
            kind: cs.kind,
            file: cs.file,
            line: cs.line,
            module: cs.module,
            sites: 1,
        });
        id
    }

    /// One more than the largest id handed out.
    #[cfg(feature = "capture")]
    pub(crate) fn len(&self) -> u32 {
        self.infos.len() as u32
    }

    /// The row's description; `None` for an id never handed out.
    pub(crate) fn get(&self, id: u32) -> Option<&CallsiteInfo> {
        self.infos.get(id as usize).filter(|_| id != 0)
    }
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// Locks the table (see [`super::lock_within`]); the table is append-only, so a taken-over
/// lock is always consistent.
pub(crate) fn table() -> TableGuard {
    TableGuard::new(super::lock_within(&TABLE, None).expect("no deadline: always locks"))
}

/// Like [`table`], but gives up after `wait` instead of blocking (for the exit path).
pub(crate) fn try_table(wait: std::time::Duration) -> Option<TableGuard> {
    super::lock_within(&TABLE, Some(wait)).map(TableGuard::new)
}

fn placeholder() -> CallsiteInfo {
    CallsiteInfo {
        name: "",
        kind: Kind::Scope,
        file: "",
        line: 0,
        module: "",
        sites: 0,
    }
}

/// The locked call-site table.
pub(crate) struct TableGuard(MutexGuard<'static, Option<Table>>);

impl TableGuard {
    /// Wraps a lock of the table, creating the table on first use.
    fn new(mut g: MutexGuard<'static, Option<Table>>) -> TableGuard {
        g.get_or_insert_with(|| Table {
            infos: vec![placeholder()],
            groups: HashMap::new(),
        });
        TableGuard(g)
    }
}

impl std::ops::Deref for TableGuard {
    type Target = Table;
    fn deref(&self) -> &Table {
        self.0.as_ref().expect("initialised by table()")
    }
}

impl std::ops::DerefMut for TableGuard {
    fn deref_mut(&mut self) -> &mut Table {
        self.0.as_mut().expect("initialised by table()")
    }
}

/// `type_name` of a value's type; with a fn item nested in a function, that function's path.
#[doc(hidden)]
pub fn type_name_of<T>(_: T) -> &'static str {
    std::any::type_name::<T>()
}

/// Turns the path of the helper fn that `scope!()` nests in a function into a readable name:
/// `app::pool::Pool::alloc::__tickscope_name::f` becomes `Pool::alloc`, `app::parse::{{closure}}
/// ::__tickscope_name::f` becomes `parse`. The type is kept when the function is a method
/// (the segment before it starts with an upper-case letter or is an `impl` block).
pub(crate) fn function_name(path: &'static str) -> &'static str {
    let path = path.strip_suffix("::__tickscope_name::f").unwrap_or(path);
    // The helper sits inside the call site's static, which sits in the function.
    let path = path.strip_suffix("::__TICKSCOPE_CALLSITE").unwrap_or(path);
    let segments = split_path(path);
    let useful: Vec<&'static str> = segments
        .into_iter()
        .filter(|s| !s.starts_with("{{"))
        .collect();
    match useful.as_slice() {
        [] => path,
        [only] => only,
        [.., ty, f] if ty.starts_with(|c: char| c.is_uppercase() || c == '<') => {
            // `ty` and `f` are adjacent in `path`: slice from the start of `ty` to the end of `f`.
            let start = ty.as_ptr() as usize - path.as_ptr() as usize;
            let end = f.as_ptr() as usize - path.as_ptr() as usize + f.len();
            &path[start..end]
        }
        [.., f] => f,
    }
}

/// Splits a type path on `::` outside of `<...>`.
fn split_path(path: &'static str) -> Vec<&'static str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => {
                out.push(&path[start..i]);
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(&path[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_names_drop_module_path_and_closures_but_keep_the_type() {
        let cases = [
            ("app::parse::__tickscope_name::f", "parse"),
            (
                "app::parse::__TICKSCOPE_CALLSITE::__tickscope_name::f",
                "parse",
            ),
            ("app::net::Pool::alloc::__tickscope_name::f", "Pool::alloc"),
            ("app::run::{{closure}}::__tickscope_name::f", "run"),
            (
                "app::<impl app::Trait for app::X>::go::__tickscope_name::f",
                "<impl app::Trait for app::X>::go",
            ),
            ("main::__tickscope_name::f", "main"),
        ];
        for (path, want) in cases {
            assert_eq!(function_name(path), want, "{path}");
        }
    }

    #[test]
    fn group_call_sites_share_one_id_and_scopes_with_equal_names_do_not() {
        static A: Callsite =
            Callsite::new(Name::Static("callsite-test-g"), Kind::Group, "a.rs", 1, "m");
        static B: Callsite =
            Callsite::new(Name::Static("callsite-test-g"), Kind::Group, "b.rs", 9, "m");
        static C: Callsite =
            Callsite::new(Name::Static("callsite-test-s"), Kind::Scope, "a.rs", 2, "m");
        static D: Callsite =
            Callsite::new(Name::Static("callsite-test-s"), Kind::Scope, "b.rs", 2, "m");
        assert_eq!(A.id(), B.id());
        assert_ne!(C.id(), D.id());
        assert_ne!(A.id(), C.id());
        let t = table();
        assert_eq!(t.get(A.id()).unwrap().sites, 2);
        assert_eq!(t.get(D.id()).unwrap().file, "b.rs");
    }
}
