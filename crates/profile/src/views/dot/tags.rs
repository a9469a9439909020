//! The nodelets pprof draws under a node: its samples' labels and `bytes` sizes, grouped as
//! pprof's `internal/graph` groups them.

use std::collections::HashMap;

use crate::filter::num_label_units;
use crate::model::Label;
use crate::views::diff::BASE_LABEL;
use crate::views::graph::Graph;
use crate::views::measure::{label, scale, scaled_label};
use crate::views::report::Report;

/// The most nodelets drawn per node and per label (pprof's `maxNodelets`).
pub(super) const MAX_NODELETS: usize = 4;

/// A node's tag (pprof's `graph.Tag`): a sample's string labels, or one value of its
/// `bytes` numeric label.
#[derive(Debug, Clone, Default)]
pub(super) struct Tag {
    pub(super) name: String,
    pub(super) unit: String,
    pub(super) value: i64,
    pub(super) flat: i64,
    pub(super) cum: i64,
}

/// The tags of one node: by the sample's joined string labels, and numeric tags per joined
/// string labels ("" for samples without any).
#[derive(Debug, Clone, Default)]
pub(super) struct NodeTags {
    pub(super) labels: HashMap<String, Tag>,
    pub(super) numeric: HashMap<String, HashMap<String, Tag>>,
}

impl NodeTags {
    /// pprof's `countTags`: tags with a flat value.
    pub(super) fn count(&self) -> usize {
        let numeric: usize = self
            .numeric
            .values()
            .map(|m| m.values().filter(|t| t.flat != 0).count())
            .sum();
        self.labels.values().filter(|t| t.flat != 0).count() + numeric
    }

    pub(super) fn add(&mut self, s: &SampleTags, w: i64, flat: bool) {
        let bump = |t: &mut Tag| {
            if flat {
                t.flat += w;
            } else {
                t.cum += w;
            }
        };
        if !s.labels.is_empty() {
            bump(self.labels.entry(s.labels.clone()).or_insert_with(|| Tag {
                name: s.labels.clone(),
                ..Tag::default()
            }));
        }
        if s.bytes.is_empty() {
            return;
        }
        let numeric = self.numeric.entry(s.labels.clone()).or_default();
        for (name, value) in &s.bytes {
            bump(numeric.entry(name.clone()).or_insert_with(|| Tag {
                name: name.clone(),
                unit: s.unit.clone(),
                value: *value,
                ..Tag::default()
            }));
        }
    }

    /// pprof's `trimLowFreqTags`.
    pub(super) fn trim(&mut self, cutoff: i64) {
        let keep = |t: &Tag| t.flat.abs() >= cutoff || t.cum.abs() >= cutoff;
        self.labels.retain(|_, t| keep(t));
        for m in self.numeric.values_mut() {
            m.retain(|_, t| keep(t));
        }
    }
}

/// What one sample contributes to the tags of its nodes.
pub(super) struct SampleTags {
    /// `key:value` of its string labels (but `pprof::base`), sorted, joined by `\n`.
    pub(super) labels: String,
    /// Its `bytes` values, each with its tag name (the value in the tag unit).
    pub(super) bytes: Vec<(String, i64)>,
    pub(super) unit: String,
}

/// Each sample's tags; `None` when no sample has any (pprof then draws no nodelets).
pub(super) fn sample_tags(rpt: &Report) -> Option<Vec<SampleTags>> {
    let p = &rpt.profile;
    let has_tags = p.samples.iter().any(|s| {
        p.labels(s).iter().any(|l| match l {
            Label::Str { key, .. } => key != BASE_LABEL,
            Label::Num { key, .. } => key == "bytes",
        })
    });
    if !has_tags {
        return None;
    }
    let units = num_label_units(p).units;
    let unit = units
        .get("bytes")
        .cloned()
        .unwrap_or_else(|| "bytes".into());
    // Tag names are formatted in the unit asked for, before the graph picks one.
    let name_unit = &rpt.options.unit;
    let tags = p
        .samples
        .iter()
        .map(|s| {
            let mut labels: Vec<String> = Vec::new();
            let mut bytes = Vec::new();
            for l in p.labels(s) {
                match l {
                    Label::Str { key, value } if key != BASE_LABEL => {
                        labels.push(format!("{key}:{value}"));
                    }
                    Label::Num { key, value, .. } if key == "bytes" => {
                        bytes.push((scaled_label(*value, &unit, name_unit), *value));
                    }
                    _ => {}
                }
            }
            labels.sort();
            SampleTags {
                labels: labels.join("\\n"),
                bytes,
                unit: unit.clone(),
            }
        })
        .collect();
    Some(tags)
}

/// The tags of each node of `g` (pprof's `addSample`): a sample's tags go to the cum tags of
/// every node of `g` on its stack, and to the flat tags of its leaf when the leaf is in `g`;
/// then tags below `cutoff` are dropped.
pub(super) fn node_tags(
    rpt: &Report,
    g: &Graph,
    samples: &[SampleTags],
    cutoff: i64,
) -> Vec<NodeTags> {
    let mut position = vec![usize::MAX; rpt.table.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        position[n.id as usize] = i;
    }
    let mut tags = vec![NodeTags::default(); g.nodes.len()];
    let mut stamp = vec![usize::MAX; g.nodes.len()];
    for (si, (s, st)) in rpt.profile.samples.iter().zip(samples).enumerate() {
        let w = rpt.profile.value(s, rpt.index);
        if w == 0 || (st.labels.is_empty() && st.bytes.is_empty()) {
            continue;
        }
        let (mut leaf, mut residual) = (None, false);
        for l in rpt.profile.stack(s).rev() {
            for &id in rpt.table.loc_nodes(l).iter().rev() {
                let p = position[id as usize];
                if p == usize::MAX {
                    residual = true;
                    continue;
                }
                if stamp[p] != si {
                    stamp[p] = si;
                    tags[p].add(st, w, false);
                }
                leaf = Some(p);
                residual = false;
            }
        }
        if let (Some(p), false) = (leaf, residual) {
            tags[p].add(st, w, true);
        }
    }
    for t in &mut tags {
        t.trim(cutoff);
    }
    tags
}

/// pprof's `SortTags`: by cum (unless `flat`), then flat, heaviest first, then by name.
pub(super) fn sort_tags(tags: &mut [Tag], flat: bool) {
    tags.sort_by(|a, b| {
        if !flat && a.cum != b.cum {
            return b.cum.abs().cmp(&a.cum.abs());
        }
        if a.flat != b.flat {
            return b.flat.abs().cmp(&a.flat.abs());
        }
        a.name.cmp(&b.name)
    });
}

/// The nodelets of node `id` (pprof's `addNodelets`): its top 4 label sets, each with its
/// numeric tags below it, and the numeric tags of its unlabelled samples. Internal nodes
/// show flat values, leaves cum values.
pub(super) fn nodelets(rpt: &Report, tags: &NodeTags, id: usize, has_outs: bool) -> String {
    let flat_tags = has_outs;
    let mut out = String::new();
    let mut ts: Vec<Tag> = tags.labels.values().cloned().collect();
    sort_tags(&mut ts, flat_tags);
    ts.truncate(MAX_NODELETS);
    for (i, t) in ts.iter().enumerate() {
        let w = if flat_tags { t.flat } else { t.cum };
        if w == 0 {
            continue;
        }
        let weight = rpt.format_value(w);
        out.push_str(&format!(
            "N{id}_{i} [label = \"{}\" id=\"N{id}_{i}\" fontsize=8 shape=box3d tooltip=\"{weight}\"]\n",
            t.name.replace('"', "\\\"")
        ));
        out.push_str(&format!(
            "N{id} -> N{id}_{i} [label=\" {weight}\" weight=100 tooltip=\"{weight}\" \
             labeltooltip=\"{weight}\"]\n"
        ));
        if let Some(nts) = tags.numeric.get(&t.name) {
            out.push_str(&numeric_nodelets(
                rpt,
                nts,
                flat_tags,
                &format!("N{id}_{i}"),
            ));
        }
    }
    if let Some(nts) = tags.numeric.get("") {
        out.push_str(&numeric_nodelets(rpt, nts, flat_tags, &format!("N{id}")));
    }
    out
}

/// pprof's `numericNodelets`: numeric tags collapsed into at most 4 ranges.
pub(super) fn numeric_nodelets(
    rpt: &Report,
    tags: &HashMap<String, Tag>,
    flat_tags: bool,
    source: &str,
) -> String {
    let mut out = String::new();
    let ts: Vec<Tag> = tags.values().cloned().collect();
    for (j, t) in collapsed_tags(ts, MAX_NODELETS, flat_tags)
        .iter()
        .enumerate()
    {
        let (w, attr) = if flat_tags || t.flat == t.cum {
            (t.flat, "")
        } else {
            (t.cum, " style=\"dotted\"")
        };
        if w == 0 {
            continue;
        }
        let weight = rpt.format_value(w);
        out.push_str(&format!(
            "N{source}_{j} [label = \"{}\" id=\"N{source}_{j}\" fontsize=8 shape=box3d \
             tooltip=\"{weight}\"]\n",
            t.name
        ));
        out.push_str(&format!(
            "{source} -> N{source}_{j} [label=\" {weight}\" weight=100 tooltip=\"{weight}\" \
             labeltooltip=\"{weight}\"{attr}]\n"
        ));
    }
    out
}

/// pprof's `collapsedTags`: the tags sorted; beyond `count`, each joins the group of the
/// nearest of the first `count` values, and groups are labelled `min..max`.
pub(super) fn collapsed_tags(mut ts: Vec<Tag>, count: usize, flat: bool) -> Vec<Tag> {
    sort_tags(&mut ts, flat);
    if ts.len() <= count {
        return ts;
    }
    let rest = ts.split_off(count);
    let mut groups: Vec<Vec<Tag>> = ts.into_iter().map(|t| vec![t]).collect();
    for t in rest {
        let mut best = (0, tag_distance(&t, &groups[0][0]));
        for (i, g) in groups.iter().enumerate().skip(1) {
            let d = tag_distance(&t, &g[0]);
            if d < best.1 {
                best = (i, d);
            }
        }
        groups[best.0].push(t);
    }
    let mut out: Vec<Tag> = groups
        .iter()
        .map(|g| {
            let (name, flat, cum) = tag_group_label(g);
            Tag {
                name,
                flat,
                cum,
                ..Tag::default()
            }
        })
        .collect();
    sort_tags(&mut out, flat);
    out
}

pub(super) fn tag_distance(t: &Tag, u: &Tag) -> f64 {
    let (v, _) = scale(u.value, &u.unit, &t.unit);
    (v - t.value as f64).abs()
}

pub(super) fn tag_group_label(g: &[Tag]) -> (String, i64, i64) {
    if let [t] = g {
        return (label(t.value, &t.unit), t.flat, t.cum);
    }
    let (mut min, mut max) = (&g[0], &g[0]);
    let (mut f, mut c) = (g[0].flat, g[0].cum);
    for t in &g[1..] {
        if (scale(t.value, &t.unit, &min.unit).0 as i64) < min.value {
            min = t;
        }
        if (scale(t.value, &t.unit, &max.unit).0 as i64) > max.value {
            max = t;
        }
        f += t.flat;
        c += t.cum;
    }
    (
        format!(
            "{}..{}",
            label(min.value, &min.unit),
            label(max.value, &max.unit)
        ),
        f,
        c,
    )
}
