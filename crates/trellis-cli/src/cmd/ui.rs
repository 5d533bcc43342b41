//! `trellis ui`: serve the web UI (runs, live run graphs, timeline, logs, inspector, control,
//! validation) on a loopback address until interrupted, to its own user only: the page and the
//! run API are served only to the browser that opened the one-time launch link printed here
//! (`--open` hands it to the browser through a file only this user can read, never on a
//! command line other accounts can see). With `--target NAME` naming a team server it opens
//! that server's runs and profiles instead: it asks the server, with the target's token, for a
//! one-time sign-in link and hands the browser only that link (never the token).

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
    /// An origin whose pages may embed the run view (`/embed.html`) in a frame (repeatable;
    /// use `http://localhost:PORT` and open this server as `localhost` too, so the two are
    /// same-site and the session cookie reaches the frame).
    #[arg(long = "embed-origin", value_name = "URL",
          value_parser = crate::cmd::serve::parse_origin)]
    pub embed_origins: Vec<trellis_server::signin::PublicOrigin>,
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
        let (app, launch_path) =
            trellis_server::local_ui(runtime, address, args.embed_origins.clone())?;
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

/// `trellis --target NAME ui`: a one-time sign-in link to the team server, made with the
/// target's token (which stays here), printed and, with `--open`, opened in the browser.
pub fn open_remote(remote: &crate::cmd::remote::Remote, args: &UiArgs) -> anyhow::Result<u8> {
    let answer = remote.call_outside_api(reqwest::Method::POST, "/signin/link")?;
    let link = answer["url"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("the server answered no sign-in link"))?;
    let seconds = answer["expiresInSeconds"].as_u64().unwrap_or(0);
    outln!(
        "trellis ui: open {link} (works once, within {seconds} s; it signs one browser in as this target's token)"
    );
    std::io::Write::flush(&mut std::io::stdout())?;
    if args.open {
        let home = std::env::temp_dir();
        if let Some(launcher) = open_browser(&home, link) {
            // The browser reads the page soon after it starts; the link itself expires anyway.
            std::thread::sleep(std::time::Duration::from_secs(10));
            drop(launcher);
        }
    }
    Ok(0)
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
