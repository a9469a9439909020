//! Which of several symbols at one address names it. The sampler's symboliser (crate
//! `tickscope-sampler`) and the CLI's (crate `tickscope-profile`) choose alike, through
//! [`read_symbols_covering`](super::read_symbols_covering), and as `perf` does
//! (`choose_best_symbol` in its `util/symbol.c`), so that a function has the same name in
//! tickscope's reports and in perf's: glibc's mutex lock is `pthread_mutex_lock@@GLIBC_2.2.5`
//! in both, not `__pthread_mutex_lock@GLIBC_2.2.5` in one of them.

use std::cmp::Reverse;

/// A symbol's place among the aliases of its address ([`alias_rank`]): the least is the name.
pub type AliasRank = (bool, bool, usize, Reverse<usize>);

/// A strong symbol before a weak one, then a global one before a local one, then the fewer
/// leading underscores, then the longer name (ties: the caller's order, or alphabetical).
pub fn alias_rank(name: &str, weak: bool, global: bool) -> AliasRank {
    alias_rank_of_bytes(name.as_bytes(), weak, global)
}

/// [`alias_rank`] of a name as a file's string table holds it, UTF-8 or not: a symbol
/// table is ranked without making a string of each name.
pub fn alias_rank_of_bytes(name: &[u8], weak: bool, global: bool) -> AliasRank {
    let underscores = name.iter().take_while(|&&b| b == b'_').count();
    (weak, !global, underscores, Reverse(name.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Aliases as glibc's symbol table (libc6-dbg) has them, each chosen as perf chooses.
    #[test]
    fn aliases_are_chosen_as_perf_chooses_them() {
        let best = |aliases: &[(&'static str, bool, bool)]| {
            aliases
                .iter()
                .min_by_key(|(name, weak, global)| alias_rank(name, *weak, *global))
                .unwrap()
                .0
        };
        // (name, weak, global)
        let lock = [
            ("___pthread_mutex_lock", false, false),
            ("__pthread_mutex_lock@GLIBC_2.2.5", false, true),
            ("pthread_mutex_lock@@GLIBC_2.2.5", false, true),
            ("__pthread_mutex_lock", false, true),
        ];
        assert_eq!(best(&lock), "pthread_mutex_lock@@GLIBC_2.2.5");
        // A strong global before a weak one, however plain the weak one's name.
        let getpid = [
            ("__GI___getpid", false, false),
            ("getpid", true, false),
            ("__getpid", false, true),
        ];
        assert_eq!(best(&getpid), "__getpid");
        // Among locals, the longer of two names with as many underscores.
        let unlock = [
            ("__pthread_mutex_unlock_usercnt", false, false),
            ("__GI___pthread_mutex_unlock_usercnt", false, false),
        ];
        assert_eq!(best(&unlock), "__GI___pthread_mutex_unlock_usercnt");
        // A local before a weak one.
        assert_eq!(best(&[("w", true, false), ("_l", false, false)]), "_l");
    }
}
