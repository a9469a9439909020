//! `tickscope diff BASE NEW`: how a profile changed, as `go tool pprof -top -diff_base BASE
//! NEW` shows it: the top table of NEW minus BASE, sorted by the absolute delta, with
//! percentages of the base's total. `-o diff.svg` also draws a differential flame graph
//! (sized by NEW, red where it grew, blue where it shrank).

use std::path::{Path, PathBuf};

use anyhow::Result;
use tickscope_profile::views::{
    diff_flamegraph_svg, diff_json, diff_report, diff_text, Report, View,
};

use super::common::{load, load_all, name_width, prepare, print_json, Common};
use super::out;
use super::top::SortBy;

/// Options of `tickscope diff`.
#[derive(clap::Args)]
#[command(mut_arg("inputs", |a| a
    .value_name("NEW")
    .help("The new profile (compared with BASE; several are merged into one); the options apply to both")))]
pub struct Args {
    /// The base profile (what NEW is compared with).
    #[arg(value_name = "BASE")]
    base: PathBuf,
    /// NEW (the shared FILE argument, renamed) and the view options.
    #[command(flatten)]
    common: Common,
    /// Order rows by the absolute `flat` delta (default) or `cum` delta.
    #[arg(long, value_enum, default_value = "flat")]
    sort: SortBy,
    /// Also write a differential flame graph SVG here (`-` for stdout).
    #[arg(short, long, value_name = "OUT.svg")]
    output: Option<PathBuf>,
    /// Draw the flame graph as an icicle of callers (leaf functions at the top).
    #[arg(long)]
    reverse: bool,
}

pub fn run(args: Args) -> Result<()> {
    let (base_path, new_paths) = (&args.base, &args.common.inputs);
    let new_name = args.common.name();
    if let Some(output) = &args.output {
        let mut inputs: Vec<&Path> = vec![base_path];
        inputs.extend(new_paths.iter().map(PathBuf::as_path));
        out::refuse_inputs(output, &inputs)?;
    }
    let base = load(base_path, args.common.limits())?;
    let new = load_all(new_paths, args.common.limits())?;
    let options = args.common.options(args.sort.into());
    // The flame graph is drawn from each profile on its own.
    let flames = args.output.as_ref().map(|_| (base.clone(), new.clone()));
    let mut report = diff_report(base, new, &options).map_err(|e| {
        anyhow::anyhow!(
            "cannot compare {} with {new_name}: {e}",
            base_path.display(),
        )
    })?;
    for w in &report.warnings {
        say!("tickscope: warning: {w}");
    }
    if let (Some(output), Some((base, new))) = (&args.output, flames) {
        let flame = |p, name: &str| -> Result<Report> {
            let mut o = options.clone();
            o.sample_index = Some(report.index.to_string());
            prepare(p, name, View::Flame, &o)
        };
        let base_name = base_path.display().to_string();
        let (b, n) = (flame(base, &base_name)?, flame(new, &new_name)?);
        let svg = diff_flamegraph_svg(&b, &n, args.reverse)
            .map_err(|e| anyhow::anyhow!("{new_name}: {e}"))?;
        out::write_output(output, &svg)?;
        if !out::is_stdout(output) {
            say!(
                "tickscope: differential flame graph written to {}",
                output.display()
            );
        }
    }
    if args.common.json {
        let mut v = diff_json(&mut report);
        v["base"] = base_path.display().to_string().into();
        v["new"] = new_name.clone().into();
        return print_json(&v);
    }
    let text = diff_text(&mut report, name_width(58));
    super::print(text.as_bytes())
}
