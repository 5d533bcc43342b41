//! `trellis worker --ledger URL`: a worker host. It claims node executions that controllers on
//! any host queued in the PostgreSQL ledger, runs them with its own harnesses and environment,
//! and reports their outcomes; SIGINT or SIGTERM stops it. It runs each execution in the
//! run's workspace path (a filesystem shared with the serving hosts), or, with `--server`, in
//! a private copy fetched from a serving host's run API, returning the result there.

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tokio_util::sync::CancellationToken;
use trellis_runtime::{Isolation, WorkerOptions, WorkspaceServer};

use crate::context::{IsolationArg, open_runtime};

/// The harness names a worker may take executions for.
const HARNESSES: [&str; 6] = ["command", "claude", "codex", "copilot", "pi", "agent"];

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Executions run at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub slots: usize,
    /// Which executions to take, comma-separated: command, claude, codex, copilot, pi.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "command"
    )]
    pub harness: Vec<String>,
    /// How long a claim lives without a heartbeat, in milliseconds (renewed every third).
    #[arg(long, value_name = "MS", default_value_t = 15_000)]
    pub lease_ms: u64,
    /// Longest wait between looks at an empty queue, in milliseconds. A new dispatch wakes the
    /// worker at once (PostgreSQL `LISTEN/NOTIFY`); this is the safety net if a note is lost.
    #[arg(long, value_name = "MS", default_value_t = 1_000)]
    pub poll_ms: u64,
    /// A serving host (`trellis serve`) to fetch each execution's workspace from and return
    /// its result to, for a host that does not share the serving hosts' filesystem. Without
    /// it the worker runs in the workspace path the run names.
    #[arg(long, value_name = "URL", requires = "token_env")]
    pub server: Option<String>,
    /// The variable holding a bearer token of that server (`trellis serve token create`).
    #[arg(long, value_name = "VAR", requires = "server")]
    pub token_env: Option<String>,
    /// Allow `--server` over plain http to a host other than loopback (the token travels
    /// unprotected; only for a trusted network or a TLS-terminating proxy on this host).
    #[arg(long)]
    pub insecure: bool,
    /// Where the steps run: `none` (as this worker's user, the default) or `sandbox` (each in
    /// a bubblewrap sandbox; refused at start without a working `bwrap`). A run's plan may ask
    /// for `sandbox`, which this worker then honours or refuses the step.
    #[arg(long, value_name = "MODE", value_enum, default_value = "none")]
    pub isolation: IsolationArg,
}

/// The serving host the worker fetches workspaces from, with its token read from the named
/// variable (never printed).
fn workspace_server(args: &WorkerArgs) -> anyhow::Result<Option<WorkspaceServer>> {
    let (Some(base), Some(variable)) = (&args.server, &args.token_env) else {
        return Ok(None);
    };
    if reqwest::Url::parse(base).is_err() {
        bail!("--server {base:?} is not a URL");
    }
    if !args.insecure && !super::remote::protected(base) {
        bail!(
            "--server over plain http beyond loopback would send the token unprotected: use https, or add --insecure if the network is trusted"
        );
    }
    let token = match std::env::var(variable) {
        Ok(token) if !token.trim().is_empty() => token.trim().to_owned(),
        _ => bail!("--token-env {variable}: the variable is not set"),
    };
    Ok(Some(WorkspaceServer {
        base: base.trim_end_matches('/').to_owned(),
        token,
    }))
}

pub fn run(args: &WorkerArgs, ledger: Option<&str>) -> anyhow::Result<u8> {
    if let Some(unknown) = args
        .harness
        .iter()
        .find(|h| !HARNESSES.contains(&h.as_str()))
    {
        bail!("unknown harness {unknown:?}: use command, claude, codex, copilot or pi");
    }
    if args.lease_ms < 300 {
        bail!("--lease-ms must be at least 300");
    }
    let server = workspace_server(args)?;
    let runtime = open_runtime(ledger)?;
    let isolation = Isolation::from(args.isolation);
    if isolation == Isolation::Sandbox {
        let path = std::env::var_os("PATH").unwrap_or_default();
        trellis_runtime::Sandbox::detect(&path, true)?;
    }
    let options = WorkerOptions {
        isolation,
        trellis_home: runtime.home().to_path_buf(),
        slots: args.slots.max(1),
        harnesses: args.harness.clone(),
        lease: Duration::from_millis(args.lease_ms),
        poll: Duration::from_millis(args.poll_ms.max(10)),
        scratch: runtime
            .home()
            .join("worker-scratch")
            .join(std::process::id().to_string()),
        server,
    };
    let scratch = options.scratch.clone();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = tokio.block_on(async {
        let stop = CancellationToken::new();
        let signal_stop = stop.clone();
        tokio::spawn(async move {
            super::serve::shutdown_signal().await;
            signal_stop.cancel();
        });
        outln!(
            "{}",
            serde_json::json!({"worker": "started", "slots": options.slots, "harnesses": options.harnesses, "workspaces": options.server.as_ref().map_or("shared", |_| "fetched")})
        );
        Ok::<_, anyhow::Error>(runtime.work(options, stop).await?)
    })?;
    let _ = std::fs::remove_dir_all(scratch);
    outln!(
        "{}",
        serde_json::json!({"worker": "stopped", "completed": report.completed, "refused": report.fenced})
    );
    Ok(0)
}
