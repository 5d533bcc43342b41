//! `trellis trace diff A B`: where two GaP runs of one workflow first parted.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Compare two GaP trace directories: agreement per node, and the first divergence (node,
    /// visit, and the first differing status, input or output). Exit 0 when the runs agree,
    /// 1 when they diverge, 2 when no node is in both.
    Diff(DiffArgs),
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The first trace directory (or its dag_trace.json).
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The second trace directory (or its dag_trace.json).
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Print one JSON object instead of a report.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: &TraceCommand) -> anyhow::Result<u8> {
    match command {
        TraceCommand::Diff(args) => {
            let diff =
                trellis_runtime::gap::diff_traces(&args.a, &args.b).map_err(|e| anyhow!("{e}"))?;
            if args.json {
                outln!("{}", serde_json::to_string(&diff)?);
            } else {
                out!("{}", diff.render());
            }
            Ok(diff.exit_code())
        }
    }
}
