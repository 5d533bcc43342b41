//! `trellis doctor`: one line per check of this machine (home, ledger, agent CLIs, git,
//! Python), with the fix for whatever is missing; exit 1 when a check failed.

use clap::Args;
use trellis_runtime::{CheckState, DoctorReport, LedgerLocation};

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print `{"checks":[…]}` instead of lines.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &DoctorArgs, ledger: Option<&str>) -> anyhow::Result<u8> {
    let ledger = ledger.map(LedgerLocation::parse).transpose()?;
    let report = trellis_runtime::doctor(None, ledger);
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        out!("{}", render(&report));
    }
    Ok(if report.healthy() { 0 } else { 1 })
}

/// `✓ home     /path (writable)` lines, with `→ fix` under each that is not fine.
pub fn render(report: &DoctorReport) -> String {
    let mut out = String::new();
    for check in &report.checks {
        let mark = match check.state {
            CheckState::Ok => "✓",
            CheckState::Warning => "!",
            CheckState::Failed => "✗",
        };
        out.push_str(&format!("{mark} {:<8} {}\n", check.subject, check.detail));
        if let Some(fix) = &check.fix {
            out.push_str(&format!("  {:<8} → {fix}\n", ""));
        }
    }
    out
}
