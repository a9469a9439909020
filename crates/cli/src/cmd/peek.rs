//! `tickscope peek REGEX FILE`: each function matching REGEX with its callers (above) and
//! callees (below) and the weight of each call, as `go tool pprof -peek` prints it.

use anyhow::Result;
use tickscope_profile::views::{peek_json, peek_text, Sort, View};

use super::common::{print_json, regex, Common, NotFound};

/// Options of `tickscope peek`.
#[derive(clap::Args)]
pub struct Args {
    /// Which nodes to show (a regular expression matched against node names).
    #[arg(value_name = "REGEX")]
    regex: String,
    #[command(flatten)]
    common: Common,
}

pub fn run(args: Args) -> Result<()> {
    let rx = regex("peek", &args.regex)?;
    let mut report = args.common.report(View::Peek, Sort::Flat)?;
    if args.common.json {
        let v = peek_json(&mut report, &rx).map_err(NotFound)?;
        return print_json(&v);
    }
    let text = peek_text(&mut report, &rx).map_err(NotFound)?;
    super::print(text.as_bytes())
}
