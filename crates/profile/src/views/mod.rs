//! pprof's views over a [`Profile`](crate::Profile): `top`, `peek`, `tree`, `list`, `graph`,
//! flame graphs and `diff`, with the numbers `go tool pprof` prints for the same file.
//!
//! A [`Report`] is a profile prepared for one view as pprof's driver prepares it: frames named
//! by the profile's `drop_frames` removed, the total taken (before any focus filter, so
//! percentages stay relative to the whole profile), the filters applied, and the nodes chosen
//! by granularity. [`Report::trimmed_graph`] then builds the call graph and prunes it as pprof
//! does (nodes below `node_fraction` of the total, then the top `node_count`, then edges below
//! `edge_fraction`). Each view renders that graph as text or JSON.

mod diff;
mod dot;
mod flame;
pub mod graph;
mod list;
pub mod measure;
mod options;
mod report;
mod top;
mod tree;

pub use diff::{
    check_compatible, diff_json, diff_report, diff_report_for, diff_text, merge, merge_for_diff,
    BASE_LABEL,
};
pub use dot::{dot_text, graph_json, shorten_function_name};
pub use flame::{
    diff_flame_tree, diff_flamegraph_svg, flame_folded, flame_tree, flamegraph_svg, FlameNode,
    FlameOptions, FlameTree,
};
pub use graph::{Graph, NodeInfo};
pub use list::{list, list_json, list_text, ListedFunction, SourceLine};
pub use options::{Granularity, Options, Sort, View};
pub use report::{Report, Trimmed};
pub use top::{top_json, top_text, Row};
pub use tree::{peek_json, peek_text, tree_json, tree_text};
