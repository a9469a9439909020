//! `tickscope top FILE`: the flat table of a profile — flat, flat%, sum%, cum, cum%, name —
//! with the numbers and header `go tool pprof -top` prints.

use anyhow::Result;
use tickscope_profile::views::{top_json, top_text, Sort, View};

use super::common::{name_width, print_json, Common};

/// Options of `tickscope top`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Order rows by `flat` (default) or `cum`.
    #[arg(long, value_enum, default_value = "flat")]
    sort: SortBy,
}

/// `--sort`.
#[derive(clap::ValueEnum, Clone, Copy)]
pub enum SortBy {
    /// Flat value, then name.
    Flat,
    /// Cumulative value, then name.
    Cum,
}

impl From<SortBy> for Sort {
    fn from(s: SortBy) -> Sort {
        match s {
            SortBy::Flat => Sort::Flat,
            SortBy::Cum => Sort::Cum,
        }
    }
}

impl Args {
    /// The report these options ask for, of a profile already loaded (`name`: its files).
    pub fn report_of(
        &self,
        profile: tickscope_profile::Profile,
        name: &str,
    ) -> Result<tickscope_profile::views::Report> {
        super::common::prepare(
            profile,
            name,
            View::Top,
            &self.common.options(self.sort.into()),
        )
    }
}

pub fn run(args: Args) -> Result<()> {
    let mut report = args.common.report(View::Top, args.sort.into())?;
    if args.common.json {
        return print_json(&top_json(&mut report));
    }
    let text = top_text(&mut report, name_width(58));
    super::print(text.as_bytes())
}
