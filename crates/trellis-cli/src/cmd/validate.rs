//! `trellis validate`: proves a graph well-typed and bounded (GraphSpec) or structurally sound
//! (GaP), or says precisely what is wrong.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::Args;
use trellis_runtime::{
    GraphSource, InputSource, Termination, ValidateRequest, ValidationReport, VerifiedReport,
};

use crate::render::diagnostic_block;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The graph: a GraphSpec JSON file, or a GaP workflow (directory or workflow.json).
    #[arg(value_name = "FILE", conflicts_with = "graph")]
    pub path: Option<PathBuf>,
    /// The graph, as a flag (same as the positional FILE).
    #[arg(long, value_name = "FILE")]
    pub graph: Option<PathBuf>,
    /// Check this JSON input against the graph's initialInput too.
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Resolve workers from this registry file instead of the built-in registry.
    #[arg(long, value_name = "FILE")]
    pub registry: Option<PathBuf>,
    /// Print exactly one JSON object instead of a report.
    #[arg(long)]
    pub json: bool,
    /// GaP: check subgraphs against the skill bundles under DIR (S4, SK1–SK4); repeatable.
    #[arg(long, value_name = "DIR")]
    pub skills: Vec<PathBuf>,
    /// GaP: also reconcile each skill subgraph's `success_values ∪ {on_error}` with the
    /// bundle's declared exit conditions, as generated graphs must (needs --skills).
    #[arg(long)]
    pub strict: bool,
}

impl ValidateArgs {
    fn graph_path(&self) -> anyhow::Result<&Path> {
        self.path
            .as_deref()
            .or(self.graph.as_deref())
            .ok_or_else(|| anyhow!("name the graph to validate: `trellis validate FILE`"))
    }
}

pub fn run(args: &ValidateArgs) -> anyhow::Result<u8> {
    let path = args.graph_path()?;
    let validated = trellis_runtime::validate(ValidateRequest {
        document: GraphSource::File(path.to_path_buf()),
        registry: args.registry.clone(),
        input: args.input.clone().map(InputSource::File),
        skills: args.skills.clone(),
        strict: args.strict,
    });
    let report = match validated {
        Ok(report) => report,
        // A JSON reader gets one object whatever happened (a directory, a missing or an
        // unreadable file), and the error still goes to stderr.
        Err(error) if args.json => {
            outln!(
                "{}",
                serde_json::json!({"status": "error", "code": error.code(), "error": error.to_string()})
            );
            return Err(error.into());
        }
        Err(error) => return Err(error.into()),
    };
    if args.json {
        outln!("{}", report.to_json());
        return Ok(report.exit_code());
    }
    match &report {
        ValidationReport::Unparseable { shown, error } => {
            outln!("✗ {shown} does not parse\n  {error}");
        }
        ValidationReport::Rejected { shown, diagnostics } => {
            outln!("✗ {shown} rejected: {} diagnostic(s)\n", diagnostics.len());
            for d in diagnostics {
                outln!("{}", diagnostic_block(d));
            }
        }
        ValidationReport::Verified(verified) => print_verified(verified)?,
        ValidationReport::Gap { path, report } => print_gap(path, report)?,
    }
    Ok(report.exit_code())
}

fn print_gap(
    path: &Path,
    report: &trellis_runtime::gap::GapValidationReport,
) -> anyhow::Result<()> {
    use trellis_runtime::gap::GapValidationReport as Gap;
    match report {
        Gap::Verified { .. } => outln!("✓ GaP workflow {} is valid", path.display()),
        Gap::Rejected { .. } => outln!("✗ GaP workflow {} is rejected", path.display()),
        Gap::Unparseable { .. } => outln!("✗ GaP workflow {} does not load", path.display()),
    }
    out!("{}", report.render());
    Ok(())
}

fn print_verified(report: &VerifiedReport) -> anyhow::Result<()> {
    let bounds = &report.bounds;
    outln!("✓ {} verified", report.shown);
    outln!("  identity     {}", report.identity);
    outln!(
        "  nodes        {} ({} executable)",
        report.nodes,
        report.executables
    );
    outln!(
        "  bounds       at most {} executions, peak concurrency {}",
        bounds.max_executions,
        bounds.peak_concurrency
    );
    let termination = match &bounds.termination {
        Termination::Acyclic => "acyclic".to_owned(),
        Termination::BoundedLoops {
            loops,
            max_iterations,
        } => format!(
            "bounded loops ({}), at most {max_iterations} loop entries",
            loops.join(", ")
        ),
    };
    outln!("  termination  {termination}");
    if let Some(error) = &report.input_error {
        outln!("✗ input does not match initialInput: {error}");
    }
    Ok(())
}
