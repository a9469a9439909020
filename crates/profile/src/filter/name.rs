//! Filters by name: focus, ignore, hide, show, and show_from.

use super::pattern::{Matcher, Names, Pattern};
use crate::model::Profile;
use crate::store::{retain_span, Stack};

/// Which of focus, ignore, hide and show matched something (pprof's `fm, im, hm, hnm`).
pub(super) struct NameMatches {
    pub(super) focus: bool,
    pub(super) ignore: bool,
    pub(super) hide: bool,
    pub(super) show: bool,
}

/// pprof's `FilterSamplesByName`.
pub(super) fn filter_by_name(
    p: &mut Profile,
    focus: Option<&Pattern>,
    ignore: Option<&Pattern>,
    hide: Option<&Pattern>,
    show: Option<&Pattern>,
) -> NameMatches {
    let Profile {
        samples,
        locations,
        functions,
        mappings,
        strings,
        lines,
        stacks,
        ..
    } = p;
    let names = Names { functions, strings };
    let (nf, nm) = (functions.len(), mappings.len());
    let mut focus = focus.map(|rx| Matcher::new(rx, nf, nm));
    let mut ignore = ignore.map(|rx| Matcher::new(rx, nf, nm));
    let mut hide = hide.map(|rx| Matcher::new(rx, nf, nm));
    let mut show = show.map(|rx| Matcher::new(rx, nf, nm));
    let mut m = NameMatches {
        focus: false,
        ignore: false,
        hide: false,
        show: false,
    };
    // Per location: Some(true) focused, Some(false) ignored, None neither.
    let mut focused = vec![None; locations.len()];
    let mut hidden = vec![false; locations.len()];
    let mut any_hidden = false;

    for (i, loc) in locations.iter_mut().enumerate() {
        if ignore
            .as_mut()
            .is_some_and(|ig| ig.location(names, lines, mappings, loc))
        {
            m.ignore = true;
            focused[i] = Some(false);
        } else if focus
            .as_mut()
            .map_or(true, |f| f.location(names, lines, mappings, loc))
        {
            m.focus = true;
            focused[i] = Some(true);
        }

        if let Some(h) = hide.as_mut() {
            if h.location(names, lines, mappings, loc) {
                m.hide = true;
                // pprof's unmatchedLines: a matching mapping hides every line.
                if h.mapping(mappings, loc) {
                    loc.lines.len = 0;
                } else {
                    retain_span(lines, &mut loc.lines, |l| !h.function(names, l.function));
                }
                if loc.lines.is_empty() {
                    hidden[i] = true;
                    any_hidden = true;
                }
            }
        }
        if let Some(s) = show.as_mut() {
            // pprof's matchedLines: a matching mapping shows every line.
            if !s.mapping(mappings, loc) {
                retain_span(lines, &mut loc.lines, |l| s.function(names, l.function));
            }
            if loc.lines.is_empty() {
                hidden[i] = true;
                any_hidden = true;
            } else {
                m.show = true;
            }
        }
    }

    samples.retain_mut(|s| {
        if !focused_and_not_ignored(stacks.get(s.stack), &focused) {
            return false;
        }
        if any_hidden {
            stacks.retain(&mut s.stack, |l| !hidden[l as usize]);
        }
        !s.stack.is_empty()
    });
    m
}

/// pprof's `focusedAndNotIgnored`: at least one focused location and no ignored one.
pub(super) fn focused_and_not_ignored(locs: Stack<'_>, focused: &[Option<bool>]) -> bool {
    let mut f = false;
    for l in locs {
        match focused[l as usize] {
            Some(true) => f = true,
            Some(false) => return false,
            None => {}
        }
    }
    f
}

/// pprof's `ShowFrom`: drops every frame above the outermost matching one; returns whether
/// some location matched.
pub(super) fn apply_show_from(p: &mut Profile, rx: &Pattern) -> bool {
    let Profile {
        samples,
        locations,
        functions,
        mappings,
        strings,
        lines,
        stacks,
        ..
    } = p;
    let names = Names { functions, strings };
    let mut m = Matcher::new(rx, functions.len(), mappings.len());
    let mut show_from = vec![false; locations.len()];
    let mut matched = false;
    for (i, loc) in locations.iter_mut().enumerate() {
        // pprof's filterShowFromLocation: a matching mapping keeps all lines; else the lines
        // above (outer to) the outermost matching line go.
        let hit = if m.mapping(mappings, loc) {
            true
        } else if let Some(j) = lines[loc.lines.range()]
            .iter()
            .rposition(|l| m.function(names, l.function))
        {
            loc.lines.keep(0, j + 1);
            true
        } else {
            false
        };
        show_from[i] = hit;
        matched |= hit;
    }
    samples.retain_mut(
        |s| match stacks.get(s.stack).rposition(|l| show_from[l as usize]) {
            Some(i) => {
                s.stack.keep(0, i + 1);
                true
            }
            None => false,
        },
    );
    matched
}
