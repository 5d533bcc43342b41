//! `trellis serve`: the team server — the run API over HTTP(S) with bearer tokens, for other
//! hosts and people, under timeouts and a connection cap — and `trellis serve token create`,
//! which makes a token and keeps only its digest.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use trellis_runtime::{DispatchMode, Runtime, ServerConnections, StartMode};
use trellis_server::bearer::append_new_token;
use trellis_server::listen::{self, BodyLimits, Limits, TlsConfig};
use trellis_server::signin::sessions::{DEFAULT_SESSION_IDLE, DEFAULT_SESSION_LIFETIME};
use trellis_server::signin::{BrowserSignIn, PublicOrigin, SessionTimes};
use trellis_server::team::{self, TeamState};
use trellis_server::{BearerTokens, DEFAULT_MAX_STREAMS, MAX_BODY_BYTES};

use crate::context::{IsolationArg, open_runtime};

/// The address `trellis serve` listens on when not told.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8420";

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    #[command(subcommand)]
    pub command: Option<ServeCommand>,
    /// Address and port to listen on (port 0 picks a free one; the chosen address is printed).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// A token file (lines `sha256:HEX NAME`, made by `trellis serve token create`).
    #[arg(long, value_name = "FILE")]
    pub tokens: Vec<PathBuf>,
    /// An environment variable holding an accepted token (repeatable).
    #[arg(long = "token-env", value_name = "VAR")]
    pub token_env: Vec<String>,
    /// Directory holding the workspaces of submitted runs (default: serve-workspaces in
    /// $TRELLIS_HOME).
    #[arg(long, value_name = "DIR")]
    pub workspaces: Option<PathBuf>,
    /// Where runs' command and agent executions run: `local` (children of each run's
    /// controller on this host) or `queue` (queued in the ledger for `trellis worker` hosts;
    /// needs a PostgreSQL ledger). Not given: `$TRELLIS_DISPATCH` (`queue`), else `local`.
    #[arg(long, value_name = "MODE", value_enum)]
    pub dispatch: Option<DispatchArg>,
    /// Where runs' steps run: `sandbox` (the default: every agent and command in a bubblewrap
    /// sandbox; the server refuses to start without a working `bwrap`) or `none` (as this
    /// server's user, with its whole machine in reach).
    #[arg(long, value_name = "MODE", value_enum, default_value = "sandbox")]
    pub isolation: IsolationArg,
    /// Open event streams allowed at once.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_STREAMS)]
    pub max_streams: usize,
    /// Serve HTTPS with this certificate chain (PEM, leaf first); needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Allow plain HTTP on a non-loopback address (bearer tokens then cross the network in
    /// clear text): only behind a TLS-terminating proxy or on a network you trust.
    #[arg(long)]
    pub insecure: bool,
    /// Which connection variables this server's own environment may supply to a run whose
    /// caller did not send them: `all` (the default), `none` (every run brings its caller's
    /// credentials), or a comma-separated list of names. A caller's value always wins.
    #[arg(long, value_name = "all|none|NAMES", default_value = "all",
          value_parser = parse_server_connections)]
    pub server_connections: ServerConnections,
    /// An environment file (docs/environment.md) for every run whose submission names none
    /// and does not ask for none (`trellis run --target … --no-environment`).
    #[arg(long, value_name = "FILE")]
    pub environment: Option<PathBuf>,
    #[command(flatten)]
    pub browser: BrowserArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// How people use the server from a browser (see docs/team-server.md, "People in a browser").
#[derive(Debug, Args)]
pub struct BrowserArgs {
    /// The origin people's browsers open (`https://trellis.example.com`): browser requests must
    /// carry exactly its host and origin. Default: derived from --listen (https with TLS); on
    /// an address like 0.0.0.0 there is none, and the browser sign-in is off until given.
    #[arg(long, value_name = "URL", value_parser = parse_origin)]
    pub public_origin: Option<PublicOrigin>,
    /// Serve no web UI and no browser sign-in: bearer-token clients only.
    #[arg(long, conflicts_with = "public_origin")]
    pub no_browser: bool,
    /// Seconds a browser session lasts at most after signing in.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_SESSION_LIFETIME.as_secs(),
          value_parser = clap::value_parser!(u64).range(60..))]
    pub session_lifetime: u64,
    /// Seconds a browser session lasts without a request.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_SESSION_IDLE.as_secs(),
          value_parser = clap::value_parser!(u64).range(60..))]
    pub session_idle: u64,
    /// An origin whose pages may embed the run view (`/embed.html`) in a frame (repeatable;
    /// it must be same-site with the public origin for the session cookie to reach the frame).
    #[arg(long = "embed-origin", value_name = "URL", value_parser = parse_origin)]
    pub embed_origins: Vec<PublicOrigin>,
}

pub(crate) fn parse_origin(text: &str) -> Result<PublicOrigin, String> {
    PublicOrigin::parse(text).map_err(|error| error.to_string())
}

impl BrowserArgs {
    /// The browser sign-in of a server bound to `address`, if it has one (says why not).
    fn sign_in(&self, address: SocketAddr, tls: bool) -> Option<BrowserSignIn> {
        if self.no_browser {
            return None;
        }
        let origin = match &self.public_origin {
            Some(origin) => origin.clone(),
            None => match PublicOrigin::of_address(address, tls) {
                Ok(origin) => origin,
                Err(error) => {
                    eprintln!("trellis: no browser sign-in: {error}");
                    return None;
                }
            },
        };
        let times = SessionTimes {
            lifetime: Duration::from_secs(self.session_lifetime),
            idle: Duration::from_secs(self.session_idle),
        };
        Some(BrowserSignIn::new(origin, times).with_embed_origins(self.embed_origins.clone()))
    }
}

fn parse_server_connections(text: &str) -> Result<ServerConnections, String> {
    ServerConnections::parse(text).map_err(|error| error.to_string())
}

/// The limits a server on a network needs (see docs/team-server.md).
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Seconds a new connection may take to complete its TLS handshake and send the head of
    /// its first request; then it is closed.
    #[arg(long, value_name = "SECS", default_value_t = listen::DEFAULT_HEADER_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout: u64,
    /// Seconds a request body may take to arrive (408 after that).
    #[arg(long, value_name = "SECS", default_value_t = listen::DEFAULT_BODY_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout: u64,
    /// Seconds a kept-alive connection may wait for (the head of) its next request.
    #[arg(long, value_name = "SECS", default_value_t = listen::DEFAULT_IDLE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: u64,
    /// Largest request body in bytes (413 above it; at most the default).
    #[arg(long, value_name = "BYTES", default_value_t = MAX_BODY_BYTES)]
    pub max_body: usize,
    /// Connections open at once (lowered to what the open-file limit allows). At the cap, the
    /// oldest connection that has not yet sent an accepted request is closed to make room.
    #[arg(long, value_name = "N", default_value_t = listen::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,
}

impl LimitArgs {
    /// The limits, the connection cap fitted under the open-file limit (raised to its hard
    /// limit first); says so when it had to lower the cap.
    pub fn limits(&self) -> Limits {
        let mut max_connections = self.max_connections;
        if let Some(fits) = listen::connections_within_descriptor_limit()
            && fits < max_connections
        {
            eprintln!(
                "trellis: --max-connections {max_connections} lowered to {fits}: the open-file limit (ulimit -n) allows no more"
            );
            max_connections = fits;
        }
        Limits {
            header_timeout: Duration::from_secs(self.header_timeout),
            idle_timeout: Duration::from_secs(self.idle_timeout),
            body: BodyLimits {
                timeout: Duration::from_secs(self.body_timeout),
                max_bytes: self.max_body.min(MAX_BODY_BYTES),
            },
            max_connections,
        }
    }
}

/// Refuses to send bearer tokens in clear text beyond this host: plain HTTP on a non-loopback
/// address needs `--insecure`.
fn check_transport(args: &ServeArgs) -> anyhow::Result<()> {
    if args.tls_cert.is_none() && !args.listen.ip().is_loopback() && !args.insecure {
        bail!(
            "refusing to serve bearer tokens over plain http on {} (not a loopback address): \
             give --tls-cert FILE --tls-key FILE to serve https, listen on 127.0.0.1 (behind a \
             TLS-terminating proxy), or add --insecure if the network is trusted",
            args.listen
        );
    }
    Ok(())
}

/// `--dispatch`: where executions run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DispatchArg {
    Local,
    Queue,
}

#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// Manage the server's bearer tokens.
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a token: its digest is appended to FILE, the token is printed once.
    Create {
        /// The token file to append to (created readable by its owner only).
        #[arg(long, value_name = "FILE")]
        tokens: PathBuf,
        /// A name for the token (who or what uses it).
        #[arg(long)]
        name: String,
    },
}

pub fn run(args: &ServeArgs, ledger: Option<&str>) -> anyhow::Result<u8> {
    match &args.command {
        Some(ServeCommand::Token(TokenCommand::Create { tokens, name })) => {
            let secret = append_new_token(tokens, name)?;
            outln!("{secret}");
            eprintln!(
                "trellis: token {name:?} added to {}; it is shown only this once",
                tokens.display()
            );
            Ok(0)
        }
        None => serve(args, ledger),
    }
}

fn serve(args: &ServeArgs, ledger: Option<&str>) -> anyhow::Result<u8> {
    check_transport(args)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(certificate), Some(key)) => Some(TlsConfig::from_pem_files(certificate, key)?),
        _ => None,
    };
    let mut tokens = BearerTokens::new();
    for file in &args.tokens {
        tokens.add_file(file)?;
    }
    for variable in &args.token_env {
        tokens.add_variable(variable)?;
    }
    if tokens.is_empty() {
        bail!(
            "no bearer tokens: give --tokens FILE (see `trellis serve token create`) or --token-env VAR"
        );
    }
    let default_environment = args
        .environment
        .as_deref()
        .map(crate::cmd::run_args::read_environment)
        .transpose()?;
    let mut runtime = open_runtime(ledger)?;
    if let Some(dispatch) = args.dispatch {
        runtime = runtime.with_dispatch(match dispatch {
            DispatchArg::Local => DispatchMode::Local,
            DispatchArg::Queue => DispatchMode::Queue,
        })?;
    }
    let runtime = Arc::new(runtime.with_isolation(args.isolation.into())?);
    let runtime_for_takeover = runtime.is_shared_ledger().then(|| runtime.clone());
    let workspaces = args
        .workspaces
        .clone()
        .unwrap_or_else(|| runtime.home().join("serve-workspaces"));
    let state = TeamState::new(
        runtime,
        workspaces,
        StartMode::Detached,
        args.max_streams.max(1),
    )?
    .with_server_connections(args.server_connections.clone())
    .with_default_environment(default_environment);
    let limits = args.limits.limits();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    tokio.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let address = listener.local_addr()?;
        let browser = args.browser.sign_in(address, tls.is_some());
        let public_origin = browser.as_ref().map(|browser| browser.origin().to_string());
        let app = match browser {
            Some(browser) => team::app_with_browser(state, tokens.clone(), browser),
            None => team::app(state, tokens.clone()),
        };
        // The first stdout line says where we listen (port 0 picks one); token names only.
        outln!(
            "{}",
            serde_json::json!({
                "listening": address.to_string(),
                "tls": tls.is_some(),
                "tokens": tokens.names().collect::<Vec<_>>(),
                "publicOrigin": public_origin,
            })
        );
        eprintln!(
            "trellis: serving the team API on {scheme}://{address}/api/v1 (OpenAPI: /openapi.json)"
        );
        if let Some(origin) = &public_origin {
            eprintln!("trellis: people sign in at {origin}/signin");
        }
        let takeover = runtime_for_takeover.map(|runtime| tokio::spawn(take_over_orphans(runtime)));
        let stopping = async {
            shutdown_signal().await;
            eprintln!("trellis: stopping");
        };
        let outcome = listen::serve_with(listener, app, limits, tls, stopping)
            .await
            .context("the server stopped");
        if let Some(takeover) = takeover {
            takeover.abort();
        }
        outcome
    })?;
    Ok(0)
}

/// How often a server on a shared ledger looks for runs whose controller is gone.
const TAKEOVER_EVERY: Duration = Duration::from_secs(1);
/// How long a run may go without a controller lease after its creation before it counts as
/// orphaned (its first controller is still starting).
const TAKEOVER_GRACE: Duration = Duration::from_secs(30);

/// On a PostgreSQL ledger: continues, on this host, every run whose controller lease expired
/// (its host crashed), for as long as the server runs.
async fn take_over_orphans(runtime: Arc<Runtime>) {
    loop {
        tokio::time::sleep(TAKEOVER_EVERY).await;
        let runtime = runtime.clone();
        let taken =
            tokio::task::spawn_blocking(move || runtime.take_over_orphans(TAKEOVER_GRACE)).await;
        match taken {
            Ok(Ok(runs)) => {
                for run in runs {
                    eprintln!("trellis: taking over run {run}: its controller is gone");
                }
            }
            Ok(Err(error)) => eprintln!("trellis: cannot take over runs: {error}"),
            Err(_) => eprintln!("trellis: the takeover thread failed"),
        }
    }
}

/// SIGINT or SIGTERM (also how `trellis worker` stops). Open event streams are not waited for:
/// runs go on in their controllers.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}
