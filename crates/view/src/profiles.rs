//! A CPU (or any pprof-shaped) profile being viewed: loaded once as `tickscope top` loads it
//! (named from the binaries on this machine where it holds addresses only), and each view
//! prepared from it with the same options as the command of the same name, so the numbers
//! on the page are the command's: the top table (`top --json`), the flame graph and icicle,
//! a function's callers and callees (`peek`), its source (`list`), and the differential
//! flame graph of two profiles (`diff`).

use std::path::Path;

use serde_json::{json, Value};
use tickscope_profile::views::{self, FlameTree, Options, Report, View};
use tickscope_profile::Profile;

use crate::Error;

/// A profile and the options its views use.
pub struct ProfileDoc {
    /// The file's path.
    pub name: String,
    profile: Profile,
    options: Options,
    /// What loading said (symbolisation notes).
    pub notes: Vec<String>,
}

impl ProfileDoc {
    /// Loads the profile at `path`; `source_path`: directories to look for sources in
    /// (`:`-separated, as `--source-path`).
    pub fn open(path: &Path, source_path: &str) -> Result<ProfileDoc, Error> {
        let mut profile = tickscope_profile::load(path).map_err(|e| Error::new(e.to_string()))?;
        let mut notes = Vec::new();
        if profile
            .locations
            .iter()
            .any(|l| profile.lines(l).is_empty())
        {
            notes = tickscope_profile::symbolize::symbolize(&mut profile);
        }
        Ok(ProfileDoc::of(
            path.display().to_string(),
            profile,
            source_path,
            notes,
        ))
    }

    /// A profile already loaded (the samples of a capture's range, say).
    pub fn of(name: String, profile: Profile, source_path: &str, notes: Vec<String>) -> ProfileDoc {
        ProfileDoc {
            name,
            profile,
            options: Options {
                source_path: source_path.to_owned(),
                ..Options::default()
            },
            notes,
        }
    }

    /// The options of a view of sample type `si` (`--sample-index`: a number or a type's
    /// name; `None`: the profile's default).
    fn options(&self, si: Option<&str>) -> Options {
        let mut o = self.options.clone();
        if let Some(si) = si {
            o.sample_index = Some(si.to_owned());
        }
        o
    }

    fn report(&self, view: View, si: Option<&str>) -> Result<Report, String> {
        Report::new(self.profile.clone(), view, &self.options(si))
    }

    /// `tickscope top --json [--sample-index SI]`.
    pub fn top(&self, si: Option<&str>) -> Result<Value, String> {
        let mut r = self.report(View::Top, si)?;
        Ok(views::top_json(&mut r))
    }

    /// The flame graph's tree (`reverse`: the icicle of callers, leaf first) of sample type
    /// `si`.
    pub fn flame(&self, reverse: bool, si: Option<&str>) -> Result<Value, String> {
        let r = self.report(View::Flame, si)?;
        Ok(tree_json(&views::flame_tree(&r, reverse), &r, false))
    }

    /// `tickscope peek` of the function named exactly `name`.
    pub fn peek(&self, name: &str, si: Option<&str>) -> Result<Value, String> {
        let mut r = self.report(View::Peek, si)?;
        let rx = exact(name)?;
        views::peek_json(&mut r, &rx)
    }

    /// `tickscope list` of the function named exactly `name`.
    pub fn list(&self, name: &str, si: Option<&str>) -> Result<Value, String> {
        let r = self.report(View::List, si)?;
        views::list_json(&r, &exact(name)?)
    }

    /// Per sample type, the sum of every sample's value (saturating).
    fn totals(&self) -> Vec<i64> {
        let p = &self.profile;
        let mut totals = vec![0i64; p.sample_types.len()];
        for s in &p.samples {
            for (t, &v) in totals.iter_mut().zip(p.values(s)) {
                *t = t.saturating_add(v);
            }
        }
        totals
    }

    /// The profile's description: its sample types and comments.
    pub fn info(&self) -> Value {
        json!({
            "name": self.name,
            "sample_types": self.profile.sample_types.iter().map(|t| format!("{}/{}", t.ty, t.unit)).collect::<Vec<_>>(),
            // The sample type the views show when none is asked for (as `top` without
            // `--sample-index`): a heap profile's `inuse_space`, say.
            "default_index": self.profile.default_sample_index(),
            "samples": self.profile.samples.len(),
            // Per sample type, the sum of the samples' values: what `top` calls the total
            // (a CPU profile's samples, not its records; a heap profile's bytes).
            "totals": self.totals(),
            "comments": self.profile.comments,
            "notes": self.notes,
        })
    }
}

/// The differential flame graph of `base` and `new`, with `diff`'s table, of sample type
/// `si` (the base's default when `None`; the same type, by name, on both sides).
pub fn diff(base: &ProfileDoc, new: &ProfileDoc, si: Option<&str>) -> Result<Value, String> {
    let b = base.report(View::Flame, si)?;
    // The same sample type on both sides: by its name, so that two profiles whose types are
    // in different orders are still compared type for type.
    let ty = b.sample_type.ty.clone();
    let n = new.report(View::Flame, Some(&ty))?;
    let mut tree = tree_json(&views::diff_flame_tree(&b, &n, false), &n, true);
    let mut table = views::diff_report(
        base.profile.clone(),
        new.profile.clone(),
        &new.options(Some(&ty)),
    )?;
    tree["table"] = views::diff_json(&mut table);
    tree["base"] = json!(base.name);
    tree["new"] = json!(new.name);
    Ok(tree)
}

/// A regex matching `name` alone.
fn exact(name: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&format!("^{}$", regex::escape(name))).map_err(|e| e.to_string())
}

/// A flame tree as compact JSON: parallel arrays, parents before children.
fn tree_json(t: &FlameTree, r: &Report, diff: bool) -> Value {
    let mut v = json!({
        "sample_type": r.sample_type.ty,
        "unit": r.sample_type.unit,
        "total": r.total,
        "names": t.names,
        "parent": t.nodes.iter().map(|n| n.parent).collect::<Vec<_>>(),
        "name": t.nodes.iter().map(|n| if n.name == u32::MAX { -1 } else { n.name as i64 }).collect::<Vec<_>>(),
        "cum": t.nodes.iter().map(|n| n.cum).collect::<Vec<_>>(),
        "flat": t.nodes.iter().map(|n| n.flat).collect::<Vec<_>>(),
    });
    if diff {
        v["base_cum"] = json!(t.nodes.iter().map(|n| n.base_cum).collect::<Vec<_>>());
        v["base_flat"] = json!(t.nodes.iter().map(|n| n.base_flat).collect::<Vec<_>>());
    }
    v
}
