//! What most commands need: the opened runtime, run ids, and whether stdout is a terminal.

use trellis_runtime::{Isolation, LedgerLocation, RunId, Runtime, RuntimeOptions, parse_run_id};

/// Opens `$TRELLIS_HOME` (created on first use) and the ledger: `ledger` when given (`--ledger`),
/// else the runtime's default.
pub fn open_runtime(ledger: Option<&str>) -> anyhow::Result<Runtime> {
    let ledger = ledger.map(LedgerLocation::parse).transpose()?;
    Ok(Runtime::open(RuntimeOptions {
        ledger,
        ..RuntimeOptions::default()
    })?)
}

/// Parses a run id argument.
pub fn run_id(text: &str) -> anyhow::Result<RunId> {
    Ok(parse_run_id(text)?)
}

/// True when standard output is a terminal (live views instead of NDJSON).
pub fn stdout_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
}

/// Machine output when asked for, or when stdout is not a terminal.
pub fn machine_output(json_flag: bool) -> bool {
    json_flag || !stdout_is_terminal()
}

/// `--isolation`: where a run's steps run. `sandbox` runs every agent and command in a
/// bubblewrap sandbox (the workspace its only writable tree); `none` as the invoking user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IsolationArg {
    None,
    Sandbox,
}

impl From<IsolationArg> for Isolation {
    fn from(arg: IsolationArg) -> Self {
        match arg {
            IsolationArg::None => Isolation::None,
            IsolationArg::Sandbox => Isolation::Sandbox,
        }
    }
}
