//! What every profile-reader target checks on a profile that parsed: it is consistent, and
//! every view renders it without panicking, looping or unbounded memory.

use tickscope_profile::Profile;
use tickscope_profile::views::{
    flame_folded, peek_text, top_text, tree_text, Options, Report, View,
};

pub fn exercise(p: &Profile) {
    p.check().expect("a parsed profile is consistent");
    for view in [View::Top, View::Peek, View::Flame] {
        let Ok(mut r) = Report::new(p.clone(), view, &Options::default()) else {
            continue;
        };
        match view {
            View::Top => {
                let text = top_text(&mut r, None);
                assert!(text.contains("flat%"));
            }
            View::Peek => {
                let _ = peek_text(&mut r, &regex_all());
                let _ = tree_text(&mut r);
            }
            _ => {
                let _ = flame_folded(&r, false);
            }
        }
    }
}

fn regex_all() -> regex::Regex {
    regex::Regex::new(".").unwrap()
}
