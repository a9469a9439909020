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

    fn report(&self, view: View) -> Result<Report, String> {
        Report::new(self.profile.clone(), view, &self.options)
    }

    /// `tickscope top --json`.
    pub fn top(&self) -> Result<Value, String> {
        let mut r = self.report(View::Top)?;
        Ok(views::top_json(&mut r))
    }

    /// The flame graph's tree (`reverse`: the icicle of callers, leaf first).
    pub fn flame(&self, reverse: bool) -> Result<Value, String> {
        let r = self.report(View::Flame)?;
        Ok(tree_json(&views::flame_tree(&r, reverse), &r, false))
    }

    /// `tickscope peek` of the function named exactly `name`.
    pub fn peek(&self, name: &str) -> Result<Value, String> {
        let mut r = self.report(View::Peek)?;
        let rx = exact(name)?;
        views::peek_json(&mut r, &rx)
    }

    /// `tickscope list` of the function named exactly `name`.
    pub fn list(&self, name: &str) -> Result<Value, String> {
        let r = self.report(View::List)?;
        views::list_json(&r, &exact(name)?)
    }

    /// The profile's description: its sample types and comments.
    pub fn info(&self) -> Value {
        json!({
            "name": self.name,
            "sample_types": self.profile.sample_types.iter().map(|t| format!("{}/{}", t.ty, t.unit)).collect::<Vec<_>>(),
            "samples": self.profile.samples.len(),
            "comments": self.profile.comments,
            "notes": self.notes,
        })
    }
}

/// The differential flame graph of `base` and `new`, with `diff`'s table.
pub fn diff(base: &ProfileDoc, new: &ProfileDoc) -> Result<Value, String> {
    let b = base.report(View::Flame)?;
    let mut opts = new.options.clone();
    // The same sample type on both sides.
    opts.sample_index = Some(b.index.to_string());
    let n = Report::new(new.profile.clone(), View::Flame, &opts)?;
    let mut tree = tree_json(&views::diff_flame_tree(&b, &n, false), &n, true);
    let mut table = views::diff_report(base.profile.clone(), new.profile.clone(), &new.options)?;
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
