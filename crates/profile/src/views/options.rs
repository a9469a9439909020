//! What a view is asked for: the [`View`], which decides pprof's per-command defaults, and
//! the [`Options`] every view shares (the CLI's flags), with the node [`Granularity`] and the
//! [`Sort`] order.

use crate::filter::FilterSpec;

/// What a node stands for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Granularity {
    /// One node per function (the default).
    #[default]
    Functions,
    /// One node per function and file.
    FileFunctions,
    /// One node per source file.
    Files,
    /// One node per source line.
    Lines,
    /// One node per instruction address.
    Addresses,
}

/// Which value orders `top`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sort {
    /// Flat value, then name (pprof's default).
    #[default]
    Flat,
    /// Cumulative value, then name.
    Cum,
}

/// The view being prepared: decides pprof's per-command defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// `top`: no node limit unless asked, pruning by node and edge fraction.
    Top,
    /// `peek` / `tree`: nothing pruned.
    Peek,
    /// `list`: nothing pruned, lines granularity, object files kept.
    List,
    /// `graph`: 80 nodes, pruned, entropy order.
    Graph,
    /// Flame graphs: nothing pruned.
    Flame,
}

/// Options common to every view (the CLI's flags).
#[derive(Debug, Clone)]
pub struct Options {
    /// `--sample-index`: a number or a sample type name (default: the profile's default).
    pub sample_index: Option<String>,
    /// Node granularity.
    pub granularity: Granularity,
    /// Keep inlined frames as nodes of their own (pprof's default; `--noinlines` clears it).
    pub inlines: bool,
    /// `--nodecount` (None: the view's default).
    pub node_count: Option<usize>,
    /// `--nodefraction` (None: 0.005).
    pub node_fraction: Option<f64>,
    /// `--edgefraction` (None: 0.001).
    pub edge_fraction: Option<f64>,
    /// `--sort`.
    pub sort: Sort,
    /// `--unit`: an output unit (`ms`, `MB`, ...) or `minimum` (the default) / `auto`.
    pub unit: String,
    /// Filters.
    pub filters: FilterSpec,
    /// `--trim-path`: prefixes removed from source paths (`:`-separated).
    pub trim_path: String,
    /// `--source-path`: directories to look for sources in (`:`-separated).
    pub source_path: String,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            sample_index: None,
            granularity: Granularity::Functions,
            inlines: true,
            node_count: None,
            node_fraction: None,
            edge_fraction: None,
            sort: Sort::Flat,
            unit: "minimum".into(),
            filters: FilterSpec::default(),
            trim_path: String::new(),
            source_path: String::new(),
        }
    }
}
