//! `tickscope list REGEX FILE`: annotated source of the functions matching REGEX, as
//! `go tool pprof -list` prints it — each source line with its flat and cum value, around the
//! sampled lines. Sources are read from disk (`--source-path`, `--trim-path`); when one is
//! missing, the sampled lines are listed without text under a message saying how to find it.

use anyhow::Result;
use tickscope_profile::views::{list_json, list_text, Sort, View};

use super::common::{print_json, regex, Common, NotFound};

/// Options of `tickscope list`.
#[derive(clap::Args)]
pub struct Args {
    /// Which functions to list (a regular expression matched against function names).
    #[arg(value_name = "REGEX")]
    regex: String,
    #[command(flatten)]
    common: Common,
}

pub fn run(args: Args) -> Result<()> {
    let rx = regex("list", &args.regex)?;
    let report = args.common.report(View::List, Sort::Flat)?;
    if args.common.json {
        let v = list_json(&report, &rx).map_err(NotFound)?;
        return print_json(&v);
    }
    let text = list_text(&report, &rx).map_err(NotFound)?;
    super::print(text.as_bytes())
}
