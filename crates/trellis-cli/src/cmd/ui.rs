//! `trellis ui`: serve the web UI (runs, live run graphs, timeline, logs, inspector, control,
//! validation) on a loopback address until interrupted.

use std::net::SocketAddr;
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
    /// Open the page in the default browser once the server listens.
    #[arg(long)]
    pub open: bool,
}

pub fn run(args: &UiArgs, ledger: Option<&str>) -> anyhow::Result<u8> {
    let runtime = Arc::new(open_runtime(ledger)?);
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
        let app = trellis_server::local_ui(runtime, address)?;
        let url = format!("http://{address}/");
        outln!("trellis ui: serving {url} (Ctrl-C stops)");
        std::io::Write::flush(&mut std::io::stdout())?;
        if args.open {
            open_browser(&url);
        }
        trellis_server::serve(listener, app, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("the server stopped")?;
        Ok(0)
    })
}

/// Asks the desktop to open `url`; says so when it cannot (the URL is printed anyway).
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let started = Command::new(opener)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match started {
        // Reaped on a thread of its own so it does not linger as a zombie.
        Ok(mut child) => drop(std::thread::spawn(move || child.wait())),
        Err(_) => eprintln!("trellis ui: could not start {opener}; open {url} yourself"),
    }
}
