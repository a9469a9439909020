//! `tickscope view FILE...`: the local web viewer (the `tickscope-view` crate). Checks every
//! file first (one line and exit 2 for a bad one), prints the page's URL with its token as
//! the first line of stdout, opens the browser unless `--no-open`, and serves until Ctrl-C.
//!
//! The browser is opened through a file only the user can read that redirects to the URL
//! (`tickscope_view::browser`): the opener's and the browser's command lines, which every
//! local user can read, never hold the token. The file goes once the page is served, after
//! two minutes, or at Ctrl-C (SIGINT, SIGTERM, SIGHUP), whichever comes first.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use tickscope_view::browser::Redirect;

/// Options of `tickscope view`.
#[derive(clap::Args)]
pub struct Args {
    /// Captures (`.tscap`) and profiles (pprof, gperftools, folded), found by content; or
    /// `tcp://ADDR` to receive live captures there (`TICKSCOPE_CAPTURE=tcp://ADDR ./prog`).
    #[arg(value_name = "FILE")]
    inputs: Vec<String>,
    /// Compare two profiles: a differential flame graph and the table `tickscope diff`
    /// prints.
    #[arg(long, num_args = 2, value_names = ["BASE", "NEW"])]
    diff: Option<Vec<PathBuf>>,
    /// Where to serve the page (default: a free port on 127.0.0.1).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    addr: String,
    /// Accept a non-loopback `--addr` or `tcp://` address: anyone who can reach it can read
    /// these files (with the token) or send captures.
    #[arg(long)]
    allow_remote: bool,
    /// Print the URL without opening a browser.
    #[arg(long)]
    no_open: bool,
    /// Directories to look for sources in (`:`-separated), for the source view.
    #[arg(long, value_name = "DIRS", default_value = "")]
    source_path: String,
}

pub fn run(args: Args) -> Result<()> {
    let config = tickscope_view::Config {
        inputs: args.inputs,
        diff: args.diff.map(|d| (d[0].clone(), d[1].clone())),
        addr: args.addr,
        allow_remote: args.allow_remote,
        source_path: args.source_path,
        max_connections: 64,
        fed: false,
        limits: tickscope_view::Limits::default(),
    };
    let started = tickscope_view::start(&config)?;
    for a in &started.live {
        say!("tickscope view: receiving live captures on {a} (TICKSCOPE_CAPTURE=tcp://{a})");
    }
    announce(&started.url, !args.no_open, &started.viewer)?;
    started.serve()?;
    Ok(())
}

/// Prints the URL as the first line of stdout, and opens it when asked: through a redirect
/// file, removed once `viewer` serves the page, or by Ctrl-C (SIGINT, SIGTERM, SIGHUP).
pub fn announce(url: &str, open: bool, viewer: &tickscope_view::Viewer) -> Result<()> {
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{url}")?;
        out.flush()?;
    }
    say!("tickscope view: serving {url} until Ctrl-C");
    if let Some(redirect) = open.then(|| open_browser(url)).flatten() {
        viewer.remove_on_page(redirect.clone());
        super::out::at_signal(move || redirect.remove());
    }
    Ok(())
}

/// Opens `url` with the desktop's opener, if there is one, through a redirect file; says
/// so when there is none.
fn open_browser(url: &str) -> Option<Arc<Redirect>> {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    match tickscope_view::browser::open(url, opener) {
        Ok(r) => Some(r),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            say!("tickscope view: no `{opener}` here to open a browser: open the URL above");
            None
        }
        Err(e) => {
            say!("tickscope view: cannot open a browser ({e}): open the URL above");
            None
        }
    }
}
