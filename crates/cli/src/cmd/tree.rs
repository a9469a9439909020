//! `tickscope tree FILE`: the call tree from the entry points down, indented, with cum, cum%
//! and flat per call path; paths below `--nodefraction` of the total are summarised.

use anyhow::Result;
use tickscope_profile::views::{tree_json, tree_text, Sort, View};

use super::common::{print_json, Common};

/// Options of `tickscope tree`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
}

pub fn run(args: Args) -> Result<()> {
    let mut report = args.common.report(View::Peek, Sort::Cum)?;
    if args.common.json {
        return print_json(&tree_json(&mut report));
    }
    super::print(tree_text(&mut report).as_bytes())
}
