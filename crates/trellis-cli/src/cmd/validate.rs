//! `trellis validate`: proves a graph well-typed and bounded (GraphSpec) or structurally sound
//! (GaP), or says precisely what is wrong.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};
use clap::Args;
use serde_json::{Value, json};
use trellis_gap::{
    PythonConfig, PythonIntrospector, SkillRegistry, ValidateOptions, ValidationReport,
};
use trellis_graph::{GraphNode, GraphSpec, JsonPath, StaticRegistry};
use trellis_verify::{Verification, VerifiedGraph};

use crate::context::{read_json_file, read_text_file};
use crate::document::{Document, classify};
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
    match classify(path)? {
        Document::Unparseable { path, error } => {
            emit_unparseable(args.json, &path, &error)?;
            Ok(1)
        }
        Document::Gap { path } => validate_gap(args, &path),
        Document::GraphSpec { path, value } => validate_graph(args, &path, &value),
    }
}

fn emit_unparseable(as_json: bool, path: &Path, error: &str) -> anyhow::Result<()> {
    if as_json {
        outln!("{}", json!({"status": "unparseable", "error": error}));
    } else {
        outln!("✗ {} does not parse\n  {error}", path.display());
    }
    Ok(())
}

fn validate_gap(args: &ValidateArgs, path: &Path) -> anyhow::Result<u8> {
    if args.input.is_some() || args.registry.is_some() {
        bail!(
            "--input and --registry apply to GraphSpec graphs; GaP workflows take `trellis run --inputs`"
        );
    }
    if args.strict && args.skills.is_empty() {
        bail!("--strict reconciles exits against skill bundles; name them with --skills DIR");
    }
    let skills = load_skill_dirs(&args.skills)?;
    let introspector = PythonIntrospector::new(PythonConfig::from_env());
    let options = ValidateOptions {
        script_introspector: Some(&introspector),
        skill_registry: (!args.skills.is_empty()).then_some(&skills),
        reconcile_exits: args.strict,
        ..ValidateOptions::default()
    };
    let report = ValidationReport::for_path(path, &options);
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        match &report {
            ValidationReport::Verified { .. } => {
                outln!("✓ GaP workflow {} is valid", path.display())
            }
            ValidationReport::Rejected { .. } => {
                outln!("✗ GaP workflow {} is rejected", path.display())
            }
            ValidationReport::Unparseable { .. } => {
                outln!("✗ GaP workflow {} does not load", path.display())
            }
        }
        out!("{}", report.render());
    }
    Ok(u8::try_from(report.exit_code()).unwrap_or(1))
}

/// Loads every `--skills DIR` into one registry (bundle names must be unique across them).
pub fn load_skill_dirs(dirs: &[PathBuf]) -> anyhow::Result<SkillRegistry> {
    let mut registry = SkillRegistry::new();
    for dir in dirs {
        registry
            .load_dir(dir)
            .map_err(|e| anyhow!("skill registry {}: {e}", dir.display()))?;
    }
    Ok(registry)
}

/// Verifies a GraphSpec with the built-in registry or `--registry FILE`.
pub fn verify_spec(spec: &GraphSpec, registry: Option<&Path>) -> anyhow::Result<Verification> {
    Ok(match registry {
        None => trellis_verify::verify_builtin(spec),
        Some(file) => {
            let text = read_text_file(file, "registry")?;
            let registry = StaticRegistry::from_json_str(&text)
                .map_err(|e| anyhow!("registry {}: {e}", file.display()))?;
            trellis_verify::verify(spec, &registry)
        }
    })
}

fn validate_graph(args: &ValidateArgs, path: &Path, value: &Value) -> anyhow::Result<u8> {
    if !args.skills.is_empty() || args.strict {
        bail!("--skills and --strict apply to GaP workflows");
    }
    let spec = match GraphSpec::parse(value, &JsonPath::root()) {
        Ok(spec) => spec,
        Err(error) => {
            emit_unparseable(args.json, path, &error.to_string())?;
            return Ok(1);
        }
    };
    match verify_spec(&spec, args.registry.as_deref())? {
        Verification::Internal(message) => bail!("internal verifier error: {message}"),
        Verification::Rejected(diagnostics) => {
            if args.json {
                outln!(
                    "{}",
                    json!({"status": "rejected", "diagnostics": diagnostics})
                );
            } else {
                outln!(
                    "✗ {} rejected: {} diagnostic(s)\n",
                    path.display(),
                    diagnostics.len()
                );
                for d in &diagnostics {
                    outln!("{}", diagnostic_block(d));
                }
            }
            Ok(1)
        }
        Verification::Verified(verified) => {
            let input_error = match &args.input {
                None => None,
                Some(file) => {
                    let input = read_json_file(file, "input")?;
                    spec.initial_input
                        .check_value(&input)
                        .err()
                        .map(|e| e.to_string())
                }
            };
            report_verified(args, path, &spec, &verified, input_error.as_deref())?;
            Ok(if input_error.is_some() { 1 } else { 0 })
        }
    }
}

fn report_verified(
    args: &ValidateArgs,
    path: &Path,
    spec: &GraphSpec,
    verified: &VerifiedGraph,
    input_error: Option<&str>,
) -> anyhow::Result<()> {
    let identity = verified.identity.to_string();
    if args.json {
        let mut out = json!({
            "status": if input_error.is_some() { "rejected" } else { "verified" },
            "identity": identity,
            "compiledIr": verified.ir.to_value(),
            "diagnostics": [],
        });
        if let Some(error) = input_error {
            out["inputError"] = json!(format!(
                "initial input does not match initialInput: {error}"
            ));
        }
        outln!("{out}");
        return Ok(());
    }
    let (mut nodes, mut executables) = (0, 0);
    spec.root.walk(&mut |n: &GraphNode| {
        nodes += 1;
        executables += usize::from(n.executable().is_some());
    });
    let bounds = &verified.ir.bounds;
    outln!("✓ {} verified", path.display());
    outln!("  identity     {identity}");
    outln!("  nodes        {nodes} ({executables} executable)");
    outln!(
        "  bounds       at most {} executions, peak concurrency {}",
        bounds.max_node_executions.get(),
        bounds.peak_concurrency.get()
    );
    let termination = match &bounds.termination {
        trellis_graph::TerminationWitness::Acyclic { .. } => "acyclic".to_owned(),
        trellis_graph::TerminationWitness::Bounded {
            ranking,
            max_iterations,
        } => {
            let loops: Vec<String> = ranking.iter().map(|p| p.dotted()).collect();
            format!(
                "bounded loops ({}), at most {} loop entries",
                loops.join(", "),
                max_iterations.get()
            )
        }
    };
    outln!("  termination  {termination}");
    if let Some(error) = input_error {
        outln!("✗ input does not match initialInput: {error}");
    }
    Ok(())
}
