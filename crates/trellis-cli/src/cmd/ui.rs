//! `trellis ui`: serve the web UI (runs, live run graphs, timeline, logs, inspector, control,
//! validation) on a loopback address until interrupted, to its own user only: the page and the
//! run API are served only to the browser that opened the one-time launch link printed here
//! (`--open` hands it to the browser through a file only this user can read, never on a
//! command line other accounts can see).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use crate::context::open_runtime;

#[derive(Debug, Args)]
pub struct UiArgs {
    /// The loopback address to listen on (port 0 picks a free port).
    #[arg(long, value_name = "ADDRESS", default_value = "127.0.0.1:4173")]
    pub listen: SocketAddr,
    /// Open the page in the default browser once the server listens (through a launch file
    /// readable by you only, so the one-time link never appears in a process list).
    #[arg(long)]
    pub open: bool,
}

pub fn run(args: &UiArgs, ledger: Option<&str>) -> anyhow::Result<u8> {
    let runtime = Arc::new(open_runtime(ledger)?);
    let home = runtime.home().to_path_buf();
    // Two workers serve a page's few requests; reads run on the blocking pool.
    let executor = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the server's threads")?;
    executor.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let address = listener.local_addr()?;
        let (app, launch_path) = trellis_server::local_ui(runtime, address)?;
        let url = format!("http://{address}/");
        let launch = format!("http://{address}{launch_path}");
        outln!("trellis ui: serving {url} (Ctrl-C stops)");
        outln!("trellis ui: open {launch} (works once, in one browser; it signs that browser in)");
        std::io::Write::flush(&mut std::io::stdout())?;
        // Kept until the server stops: the browser may read it late.
        let _launcher = if args.open {
            open_browser(&home, &launch)
        } else {
            None
        };
        trellis_server::serve(listener, app, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("the server stopped")?;
        Ok(0)
    })
}

/// Asks the desktop to open the launch link `url` through a page in a file readable by this
/// user only (created in `home`, else the temporary directory), which moves on to the link;
/// says so when it cannot (the link is printed anyway).
fn open_browser(home: &Path, url: &str) -> Option<tempfile::NamedTempFile> {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\" />\
         <meta http-equiv=\"refresh\" content=\"0; url={url}\" /><title>Trellis</title></head>\
         <body><p>Opening Trellis…</p></body></html>"
    );
    let launcher = tempfile::Builder::new()
        .prefix("trellis-ui-launch-")
        .suffix(".html")
        .tempfile_in(home)
        .or_else(|_| {
            tempfile::Builder::new()
                .prefix("trellis-ui-launch-")
                .suffix(".html")
                .tempfile()
        })
        .and_then(|mut file| {
            std::io::Write::write_all(&mut file, page.as_bytes())?;
            Ok(file)
        });
    let launcher = match launcher {
        Ok(file) => file,
        Err(error) => {
            eprintln!(
                "trellis ui: cannot write the launch page ({error}); open the link above yourself"
            );
            return None;
        }
    };
    let started = Command::new(opener)
        .arg(launcher.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match started {
        // Reaped on a thread of its own so it does not linger as a zombie.
        Ok(mut child) => drop(std::thread::spawn(move || child.wait())),
        Err(_) => eprintln!("trellis ui: could not start {opener}; open the link above yourself"),
    }
    Some(launcher)
}
