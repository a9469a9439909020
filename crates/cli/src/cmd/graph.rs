//! `tickscope graph FILE`: the call graph in Graphviz's DOT language, as `go tool pprof -dot`
//! writes it; `-o x.svg`, `x.png` or `x.pdf` renders it with Graphviz's `dot`, `-o x.dot`
//! (or no `-o`) writes the DOT text; `--json` prints the nodes and edges.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use tickscope_profile::views::{dot_text, graph_json, Sort, View};

use super::common::{print_json, Common};
use super::out::{self, Output};

/// Options of `tickscope graph`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Where to write the graph: `.dot`/`.gv` for DOT text, `.svg`, `.png` or `.pdf` to render
    /// it with Graphviz's `dot` (`-`, or no `-o`: DOT on stdout).
    #[arg(short, long, value_name = "OUT.svg|OUT.dot|OUT.png")]
    output: Option<PathBuf>,
}

/// What to write, from the output file's extension.
#[derive(Debug, PartialEq, Eq)]
enum Format {
    Dot,
    /// Rendered by `dot -T<format>`.
    Rendered(&'static str),
}

fn format_of(path: &Path) -> Result<Format> {
    if path.as_os_str() == "-" {
        return Ok(Format::Dot);
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    Ok(match ext.as_str() {
        "dot" | "gv" => Format::Dot,
        "svg" => Format::Rendered("svg"),
        "png" => Format::Rendered("png"),
        "pdf" => Format::Rendered("pdf"),
        _ => bail!(
            "{}: unknown output format: name the file .svg, .png or .pdf (rendered with \
             Graphviz) or .dot (DOT text)",
            path.display()
        ),
    })
}

pub fn run(args: Args) -> Result<()> {
    // Refuse a bad output name before the (possibly slow) load.
    let format = match &args.output {
        Some(path) => format_of(path)?,
        None => Format::Dot,
    };
    if let Some(path) = args.output.as_ref().filter(|_| !args.common.json) {
        out::refuse_inputs(path, &args.common.input_paths())?;
    }
    let mut report = args.common.report(View::Graph, Sort::Flat)?;
    if args.common.json {
        return print_json(&graph_json(&mut report));
    }
    let dot = dot_text(&mut report);
    let Some(path) = args.output else {
        return super::print(dot.as_bytes());
    };
    match format {
        Format::Dot => out::write_output(&path, dot.as_bytes())?,
        Format::Rendered(kind) => {
            // Graphviz's output goes to a temporary file, renamed over the output once it
            // succeeded (or into a device or FIFO named as the output).
            let mut output = Output::create(&path)?;
            let rendered = render(&dot, kind)?;
            output
                .file()
                .write_all(&rendered)
                .with_context(|| format!("cannot write {}", path.display()))?;
            output.commit()?;
        }
    }
    if !out::is_stdout(&path) {
        say!("tickscope: call graph written to {}", path.display());
    }
    Ok(())
}

/// Runs `dot -T<kind>` on the DOT text: what it rendered.
fn render(dot: &str, kind: &str) -> Result<Vec<u8>> {
    let spawned = Command::new("dot")
        .arg(format!("-T{kind}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "Graphviz `dot` is not installed: install it with `sudo apt install graphviz` \
             (Debian/Ubuntu) or `brew install graphviz`; or write DOT with -o x.dot"
        ),
        Err(e) => bail!("cannot run Graphviz `dot`: {e}"),
    };
    // Written from a thread of its own: `dot` may fill its output pipe before it has read
    // all of its input.
    let feed = child.stdin.take().map(|mut stdin| {
        let dot = dot.to_owned();
        std::thread::spawn(move || stdin.write_all(dot.as_bytes()))
    });
    let out = child
        .wait_with_output()
        .context("cannot run Graphviz `dot`")?;
    if !out.status.success() {
        bail!(
            "Graphviz `dot -T{kind}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    if let Some(feed) = feed {
        feed.join()
            .map_err(|_| anyhow::anyhow!("the thread feeding Graphviz `dot` panicked"))?
            .context("cannot write to Graphviz `dot`")?;
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_follow_the_extension() {
        assert_eq!(
            format_of(Path::new("a.SVG")).unwrap(),
            Format::Rendered("svg")
        );
        assert_eq!(format_of(Path::new("a.dot")).unwrap(), Format::Dot);
        assert_eq!(format_of(Path::new("-")).unwrap(), Format::Dot);
        assert!(format_of(Path::new("a.txt")).is_err());
    }
}
