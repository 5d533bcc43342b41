//! The `trellis` binary: validate, run, observe and control typed workflow graphs. Argument
//! parsing and rendering only: every operation goes through the run API of `trellis-runtime`.

/// `println!` that reports a closed standard output as an error instead of panicking, so a
/// reader going away (`trellis list | head`) ends the command quietly.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)?;
    }};
}

/// `print!` with the same behaviour as `outln!`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout(), $($arg)*)?;
    }};
}

mod cmd;
mod context;
mod live;
mod private_file;
mod render;

use std::process::ExitCode;

/// mimalloc instead of the system allocator: parsing and verifying a graph allocates many
/// small, short-lived objects, and glibc malloc made that about a third of the work (see
/// docs/benchmarks-verify.md). The verifier benchmark uses the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

/// Trellis runs typed, statically verified workflow graphs whose steps are coding agents,
/// commands, tools and scripts. Every graph is proven well-typed and bounded before it runs;
/// every run is recorded in a local ledger and can be watched, stopped and resumed.
#[derive(Debug, Parser)]
#[command(
    name = "trellis",
    version,
    after_help = "Start with `trellis template list`, `trellis validate GRAPH.json`, or\n\
                  `trellis run --template software-change --task \"…\"` inside a git repository.\n\
                  State lives in $TRELLIS_HOME (default ~/.local/state/trellis)."
)]
struct Cli {
    /// The ledger: a SQLite file or a postgres:// URL (default: $TRELLIS_LEDGER, else
    /// ledger.sqlite3 in $TRELLIS_HOME).
    #[arg(long, global = true, value_name = "LOCATION")]
    ledger: Option<String>,
    /// A named target (`trellis target add`): a team server the command is sent to, or a
    /// ledger used as --ledger.
    #[arg(long, global = true, value_name = "NAME", conflicts_with = "ledger")]
    target: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a graph (GraphSpec or GaP) and report every problem, or its identity and bounds.
    Validate(cmd::validate::ValidateArgs),
    /// Start a run of a graph or template and follow it (Ctrl-C only detaches).
    Run(Box<cmd::run_args::RunArgs>),
    /// Show one run: phase, active executions, result, token usage, lineage.
    Status(cmd::observe::StatusArgs),
    /// List runs, newest first.
    List(cmd::observe::ListArgs),
    /// Follow a run until it ends: a live view on a terminal, NDJSON status events otherwise.
    Watch(cmd::observe::WatchArgs),
    /// Stream a run's log lines as NDJSON: replays, then follows until it ends (`--execution`
    /// for one execution's, `--node`, `--level`).
    Logs(cmd::logs::LogsArgs),
    /// Follow one execution's live output (by id, `ex-…` reference or node): replays, then
    /// follows until it settles; Ctrl-C detaches.
    Attach(cmd::logs::AttachArgs),
    /// Stop a run now: its workers are killed and it ends `force_stopped`.
    ForceStop(cmd::control::ForceStopArgs),
    /// Continue a failed run in a successor that reuses every settled outcome.
    Resume(cmd::control::ResumeArgs),
    /// List a run's checkpoints of its workspace (taken before each writing step).
    Checkpoints(cmd::control::CheckpointsArgs),
    /// Remove the worktree a finished `--workspace worktree` run kept.
    DiscardWorkspace(cmd::control::DiscardWorkspaceArgs),
    /// Remove checkpoints, saved workspace states, worktrees and verifier copies no run will use again.
    Prune(cmd::prune::PruneArgs),
    /// Save run definitions by name (graph or template, plan, default input) and list,
    /// show, export or delete them; run one with `trellis run --profile NAME`.
    #[command(subcommand)]
    Profile(cmd::profile::ProfileCommand),
    /// List or show the built-in graph templates.
    #[command(subcommand)]
    Template(cmd::template::TemplateCommand),
    /// Serve the web UI on loopback, to you only (open the one-time link it prints, or use
    /// --open): watch, inspect and steer runs, check graphs visually.
    Ui(cmd::ui::UiArgs),
    /// Print a JSON Schema of a document Trellis reads (for editors).
    Schema(cmd::schema::SchemaArgs),
    /// Work with GaP trace directories.
    #[command(subcommand)]
    Trace(cmd::trace::TraceCommand),
    /// Name team servers and ledgers for `--target NAME`.
    #[command(subcommand)]
    Target(cmd::target::TargetCommand),
    /// Serve the run API over HTTP to other hosts and people (bearer tokens; `serve token
    /// create` makes one).
    Serve(cmd::serve::ServeArgs),
    /// Check this machine: the state directory and ledger, each agent CLI (installed, signed
    /// in), git, and Python for GaP workflows; prints the fix for what is missing.
    Doctor(cmd::doctor::DoctorArgs),
    /// Run node executions queued in a PostgreSQL ledger by controllers of other hosts.
    Worker(cmd::worker::WorkerArgs),
    /// Install the Trellis skill (how to write and run graphs) for Claude Code, Codex and Copilot.
    #[command(subcommand)]
    Skill(cmd::skill::SkillCommand),
    /// Replace this binary with a named or the latest release, checked against its SHA256SUMS.
    Update(cmd::update::UpdateArgs),
    /// The detached controller of one run (started by `trellis run`).
    #[command(name = trellis_runtime::CONTROLLER_COMMAND, hide = true)]
    Controller { run: String },
}

fn with_runtime(
    ledger: Option<&str>,
    command: impl FnOnce(&trellis_runtime::Runtime) -> anyhow::Result<u8>,
) -> anyhow::Result<u8> {
    command(&context::open_runtime(ledger)?)
}

fn main() -> ExitCode {
    // The watchdog of a worker host's (or a resume's) children: before any parsing.
    let mut args = std::env::args_os().skip(1);
    if args
        .next()
        .is_some_and(|first| first == trellis_runtime::GUARD_COMMAND)
    {
        let rest: Vec<std::ffi::OsString> = args.collect();
        let code = trellis_runtime::run_guard(&rest);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let cli = Cli::parse();
    let outcome = match resolve_target(&cli) {
        Ok((ledger, Some(remote))) => remote_command(&cli.command, &remote, ledger.as_deref()),
        Ok((ledger, None)) => local_command(&cli.command, ledger.as_deref()),
        Err(error) => Err(error),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        // Whoever read our output went away (`trellis logs RUN | head`): nothing to report.
        Err(error) if reader_went_away(&error) => ExitCode::SUCCESS,
        Err(error) => {
            report_error(&error);
            ExitCode::from(1)
        }
    }
}

/// The environment variable that asks for errors as one JSON line on stderr
/// (`{"code", "message"}`, the team server's problem shape), for programs driving the CLI
/// such as the Python client.
const ERROR_FORMAT_ENV: &str = "TRELLIS_ERROR_FORMAT";

/// Prints a failed command's error: `trellis: error: …`, or one JSON line when
/// `TRELLIS_ERROR_FORMAT=json` (code `cli.error` when no run API code applies).
fn report_error(error: &anyhow::Error) {
    if std::env::var(ERROR_FORMAT_ENV).is_ok_and(|format| format == "json") {
        let code = error_code(error).unwrap_or("cli.error");
        eprintln!(
            "{}",
            serde_json::json!({"code": code, "message": format!("{error:#}")})
        );
    } else {
        eprintln!("trellis: error: {error:#}");
    }
}

/// The run API's stable code of the first error in the chain that has one.
fn error_code(error: &anyhow::Error) -> Option<&'static str> {
    error.chain().find_map(|cause| {
        if let Some(runtime) = cause.downcast_ref::<trellis_runtime::RuntimeError>() {
            Some(runtime.code())
        } else if let Some(admission) = cause.downcast_ref::<trellis_runtime::AdmissionError>() {
            Some(admission.code())
        } else {
            cause
                .downcast_ref::<trellis_runtime::SourceError>()
                .map(trellis_runtime::SourceError::code)
        }
    })
}

/// The ledger to open, or the team server to talk to, from `--ledger` / `--target`.
fn resolve_target(cli: &Cli) -> anyhow::Result<(Option<String>, Option<cmd::remote::Remote>)> {
    let Some(name) = &cli.target else {
        return Ok((cli.ledger.clone(), None));
    };
    let target = cmd::target::resolve(name)?;
    if let Some(ledger) = target.ledger_location(name)? {
        return Ok((Some(ledger), None));
    }
    // Commands that never touch runs ignore a server target.
    if matches!(
        cli.command,
        Command::Validate(_)
            | Command::Template(_)
            | Command::Schema(_)
            | Command::Trace(_)
            | Command::Target(_)
            | Command::Doctor(_)
            | Command::Update(_)
            | Command::Skill(_)
    ) {
        return Ok((None, None));
    }
    Ok((None, Some(cmd::remote::Remote::new(name, &target)?)))
}

fn local_command(command: &Command, ledger: Option<&str>) -> anyhow::Result<u8> {
    match command {
        Command::Validate(args) => cmd::validate::run(args),
        Command::Run(args) => cmd::run::run(args, ledger),
        Command::Status(args) => with_runtime(ledger, |rt| cmd::observe::status(rt, args)),
        Command::List(args) => with_runtime(ledger, |rt| cmd::observe::list(rt, args)),
        Command::Watch(args) => with_runtime(ledger, |rt| cmd::observe::watch(rt, args)),
        Command::Logs(args) => with_runtime(ledger, |rt| cmd::logs::logs(rt, args)),
        Command::Attach(args) => with_runtime(ledger, |rt| cmd::logs::attach(rt, args)),
        Command::ForceStop(args) => with_runtime(ledger, |rt| cmd::control::force_stop(rt, args)),
        Command::Resume(args) => with_runtime(ledger, |rt| cmd::control::resume(rt, args)),
        Command::Checkpoints(args) => {
            with_runtime(ledger, |rt| cmd::control::checkpoints(rt, args))
        }
        Command::DiscardWorkspace(args) => {
            with_runtime(ledger, |rt| cmd::control::discard_workspace(rt, args))
        }
        Command::Prune(args) => with_runtime(ledger, |rt| cmd::prune::prune(rt, args)),
        Command::Profile(command) => with_runtime(ledger, |rt| cmd::profile::run(rt, command)),
        Command::Template(command) => cmd::template::run(command),
        Command::Schema(args) => cmd::schema::run(args),
        Command::Trace(command) => cmd::trace::run(command),
        Command::Ui(args) => cmd::ui::run(args, ledger),
        Command::Target(command) => cmd::target::run(command),
        Command::Serve(args) => cmd::serve::run(args, ledger),
        Command::Doctor(args) => cmd::doctor::run(args, ledger),
        Command::Worker(args) => cmd::worker::run(args, ledger),
        Command::Update(args) => cmd::update::run(args),
        Command::Skill(command) => cmd::skill::run(command),
        Command::Controller { run } => with_runtime(ledger, |rt| cmd::control::controller(rt, run)),
    }
}

fn remote_command(
    command: &Command,
    remote: &cmd::remote::Remote,
    ledger: Option<&str>,
) -> anyhow::Result<u8> {
    match command {
        Command::Run(args) => cmd::remote::run(remote, args),
        Command::Status(args) => cmd::remote::status(remote, args),
        Command::List(args) => cmd::remote::list(remote, args),
        Command::Watch(args) => cmd::remote::watch(remote, args),
        Command::Logs(args) => cmd::logs::remote_logs(remote, args),
        Command::Attach(args) => cmd::logs::remote_attach(remote, args),
        Command::ForceStop(args) => cmd::remote::force_stop(remote, &args.run),
        Command::Resume(args) => cmd::remote::resume(remote, args),
        Command::Checkpoints(args) => cmd::remote::checkpoints(remote, args),
        Command::DiscardWorkspace(args) => cmd::remote::discard_workspace(remote, &args.run),
        Command::Prune(args) => cmd::remote::prune(remote, args),
        Command::Profile(command) => cmd::profile_remote::run(remote, command),
        Command::Ui(args) => cmd::ui::open_remote(remote, args),
        Command::Serve(_) | Command::Worker(_) | Command::Controller { .. } => {
            anyhow::bail!("`--target` names a team server; this command runs only locally")
        }
        other => local_command(other, ledger),
    }
}

/// Whether the command failed only because its standard output was closed by the reader.
fn reader_went_away(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
