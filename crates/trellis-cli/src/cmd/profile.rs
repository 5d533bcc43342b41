//! `trellis profile save|list|show|export|delete`: saved run definitions, kept by name and
//! revision in the state directory (or, with `--target NAME`, on a team server, see
//! `profile_remote.rs`) and run with `trellis run --profile NAME`.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::{ArgGroup, Args, Subcommand};
use serde_json::{Value, json};
use trellis_runtime::diagnostics::GraphDiagnostic;
use trellis_runtime::{
    AdmissionError, DeliveryMode, ExpectedRevision, Profile, ProfileDefinition, ProfilePlan,
    ProfileTemplate, Runtime, RuntimeError, SaveProfile, SavedProfile,
};

use crate::render::diagnostic_block;

/// Shown under `trellis profile --help`.
const EXAMPLES: &str = "\
Examples:
  # A template with its default task and an offline command plan:
  trellis profile save tidy --template software-change --task-default \"Tidy the README\" \\
      --uniform-runtime-config plan.json --description \"README upkeep\"
  # A graph with its default input:
  trellis profile save double --graph graph.json --input input.json --runtime-config plan.json
  trellis profile list
  trellis run --profile tidy                      # the default task
  trellis run --profile tidy --task \"Fix typos\"   # another task
  trellis run --profile double --input other.json
  # Edit: read the revision, save over it (a stale revision is refused):
  trellis profile show tidy
  trellis profile save tidy --template software-change --task-default \"…\" --revision 1
  trellis profile export tidy --output tidy.json  # self-contained; import it with
  trellis profile save tidy2 --from tidy.json
  trellis profile delete tidy --revision 2
  # The same on a team server (stored in the server's home, resolved there by `run`):
  trellis --target team profile save tidy --from tidy.json
  trellis --target team run --profile tidy

A save is admitted exactly as `trellis run --validate-only` admits a run (a template profile
without a task default is checked with a placeholder task): a profile that cannot run is never
saved. Profiles live in $TRELLIS_HOME/profiles/NAME.json.
";

#[derive(Debug, Subcommand)]
#[command(after_long_help = EXAMPLES)]
pub enum ProfileCommand {
    /// Check a run definition as `run --validate-only` does and save it under NAME.
    Save(SaveArgs),
    /// List the saved profiles.
    List {
        /// Print the listing as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print one profile: its revision, graph, task or input, plan and description.
    Show {
        name: String,
        /// Print the whole profile document (the form `export` writes).
        #[arg(long)]
        json: bool,
    },
    /// Write a profile as a self-contained document `profile save NAME --from FILE` reads.
    Export {
        name: String,
        /// Write here instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Delete a profile: name its current revision (or --force).
    Delete {
        name: String,
        /// The revision you read (`profile show`); a profile changed since is kept.
        #[arg(long, value_name = "N", required_unless_present = "force")]
        revision: Option<u64>,
        /// Delete whatever revision it is at.
        #[arg(long, conflicts_with = "revision")]
        force: bool,
        #[arg(long)]
        json: bool,
    },
}

/// Shown under `trellis profile save --help`.
const SAVE_EXAMPLES: &str = "\
Examples:
  trellis profile save tidy --template software-change --task-default \"Tidy the README\" \\
      --uniform-runtime-config plan.json
  trellis profile save double --graph graph.json --input input.json --runtime-config plan.json
  trellis profile save tidy --template software-change --task-default \"…\" --revision 1
  trellis profile save copy --from exported.json

The documents are stored, not the paths. The save is refused, and nothing is written, when
`trellis run --validate-only` would refuse the run, or when NAME exists and --revision does
not name its current revision (`trellis profile show NAME`) and --force is not given.";

#[derive(Debug, Args)]
#[command(
    group(ArgGroup::new("what").required(true).args(["template", "graph", "from"])),
    after_long_help = SAVE_EXAMPLES
)]
pub struct SaveArgs {
    /// The profile's name: lowercase letters, digits, '-', '_' and '.' (at most 64).
    pub name: String,
    /// A built-in template (`trellis template list`).
    #[arg(long, value_name = "NAME")]
    pub template: Option<String>,
    /// The task a run gets when it gives none (templates only).
    #[arg(
        long,
        value_name = "TEXT",
        requires = "template",
        conflicts_with = "input"
    )]
    pub task_default: Option<String>,
    /// The template's delivery: none, push, pull_request, merge or comment.
    #[arg(long, value_name = "MODE", requires = "template", value_parser = parse_delivery)]
    pub delivery: Option<DeliveryMode>,
    /// With pull_request or merge: leave review feedback to people.
    #[arg(long, requires = "template")]
    pub no_pr_feedback: bool,
    /// A GraphSpec file (its document is stored, not the path).
    #[arg(long, value_name = "FILE")]
    pub graph: Option<PathBuf>,
    /// An exported profile document (`profile export`) to save under NAME.
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "runtime_config", "uniform_runtime_config", "input", "description"
    ])]
    pub from: Option<PathBuf>,
    /// An exact runtime plan (one binding per step and verifier).
    #[arg(long, value_name = "FILE", conflicts_with = "uniform_runtime_config")]
    pub runtime_config: Option<PathBuf>,
    /// One binding for every executable (an agent lane or a command).
    #[arg(long, value_name = "FILE")]
    pub uniform_runtime_config: Option<PathBuf>,
    /// The default initial input (a JSON file).
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// What the profile is for, for people.
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
    /// The revision being replaced (`profile show` says it); a stale one is refused.
    #[arg(long, value_name = "N")]
    pub revision: Option<u64>,
    /// Replace the profile whatever its revision.
    #[arg(long, conflicts_with = "revision")]
    pub force: bool,
    /// Machine output: the saved revision and the admission report, or the refusal in the
    /// shape of `trellis validate --json`.
    #[arg(long)]
    pub json: bool,
}

fn parse_delivery(text: &str) -> Result<DeliveryMode, String> {
    DeliveryMode::parse(text).ok_or_else(|| {
        format!("{text:?} is not a delivery; use none, push, pull_request, merge or comment")
    })
}

/// The revision a save or delete expects.
pub(crate) fn expected(revision: Option<u64>, force: bool) -> ExpectedRevision {
    match (revision, force) {
        (_, true) => ExpectedRevision::Any,
        (Some(revision), false) => ExpectedRevision::At(revision),
        (None, false) => ExpectedRevision::New,
    }
}

pub(crate) fn read_json(path: &Path, what: &str) -> anyhow::Result<Value> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read {what} {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{what} {} is not JSON", path.display()))
}

/// The definition the flags give: documents read from the files named, never the paths.
pub(crate) fn definition(args: &SaveArgs) -> anyhow::Result<ProfileDefinition> {
    if let Some(file) = &args.from {
        return Ok(Profile::from_document(read_json(file, "profile")?)?.definition);
    }
    let plan = match (&args.runtime_config, &args.uniform_runtime_config) {
        (Some(file), _) => Some(ProfilePlan::Exact(read_json(file, "runtime config")?)),
        (None, Some(file)) => Some(ProfilePlan::Uniform(read_json(file, "runtime config")?)),
        (None, None) => None,
    };
    Ok(ProfileDefinition {
        graph: args
            .graph
            .as_deref()
            .map(|file| read_json(file, "graph"))
            .transpose()?,
        template: args.template.as_ref().map(|name| ProfileTemplate {
            name: name.clone(),
            delivery: args.delivery,
            ignore_pr_feedback: args.no_pr_feedback,
        }),
        task_default: args.task_default.clone(),
        input: args
            .input
            .as_deref()
            .map(|file| read_json(file, "input"))
            .transpose()?,
        plan,
        description: args.description.clone(),
    })
}

pub fn run(runtime: &Runtime, command: &ProfileCommand) -> anyhow::Result<u8> {
    match command {
        ProfileCommand::Save(args) => {
            let request = SaveProfile {
                name: args.name.clone(),
                definition: definition(args)?,
                expected: expected(args.revision, args.force),
            };
            match runtime.save_profile(request) {
                Ok(saved) => print_saved(&saved, args.json),
                Err(RuntimeError::Admission(AdmissionError::Rejected { diagnostics, .. })) => {
                    refused_graph(&args.name, &diagnostics, args.json)
                }
                Err(error) => failed(&error.to_string(), error.code(), args.json),
            }
        }
        ProfileCommand::List { json } => {
            print_listing(&serde_json::to_value(runtime.profiles()?)?, *json)
        }
        ProfileCommand::Show { name, json } => {
            print_profile(&serde_json::to_value(runtime.profile(name)?)?, *json)
        }
        ProfileCommand::Export { name, output } => export(
            &serde_json::to_value(runtime.profile(name)?)?,
            output.as_deref(),
        ),
        ProfileCommand::Delete {
            name,
            revision,
            force,
            json,
        } => {
            let deleted = runtime.delete_profile(name, expected(*revision, *force))?;
            print_deleted(&serde_json::to_value(deleted)?, *json)
        }
    }
}

pub(crate) fn print_saved(saved: &SavedProfile, json: bool) -> anyhow::Result<u8> {
    print_saved_value(&serde_json::to_value(saved)?, json)
}

/// A saved profile (`SavedProfile` as JSON, local or from a server).
pub(crate) fn print_saved_value(saved: &Value, json: bool) -> anyhow::Result<u8> {
    if json {
        outln!("{saved}");
        return Ok(0);
    }
    for notice in saved["notices"].as_array().into_iter().flatten() {
        eprintln!("trellis: {}", notice.as_str().unwrap_or_default());
    }
    let replaced = match saved["previousRevision"].as_u64() {
        Some(previous) => format!(", replacing revision {previous}"),
        None => String::new(),
    };
    outln!(
        "✓ saved profile {} at revision {}{replaced} (graph {}); run it with `trellis run --profile {}`",
        saved["name"].as_str().unwrap_or_default(),
        saved["revision"],
        short(saved["identity"].as_str().unwrap_or_default()),
        saved["name"].as_str().unwrap_or_default(),
    );
    Ok(0)
}

/// A save whose graph the verifier rejected: every diagnostic, as `run --validate-only`
/// prints them (and `{"status": "rejected", "diagnostics"}` on stdout with `--json`).
pub(crate) fn refused_graph(
    name: &str,
    diagnostics: &[GraphDiagnostic],
    json: bool,
) -> anyhow::Result<u8> {
    if json {
        outln!(
            "{}",
            json!({"status": "rejected", "diagnostics": diagnostics})
        );
    }
    eprintln!(
        "✗ profile {name} was not saved: its graph is rejected with {} diagnostic(s)\n",
        diagnostics.len()
    );
    for diagnostic in diagnostics {
        eprintln!("{}", diagnostic_block(diagnostic));
    }
    Ok(1)
}

/// Any other refusal: its message (and `{"status": "error", "code", "error"}` with `--json`).
pub(crate) fn failed(message: &str, code: &str, json: bool) -> anyhow::Result<u8> {
    if json {
        outln!(
            "{}",
            json!({"status": "error", "code": code, "error": message})
        );
    }
    eprintln!("✗ {message} ({code})");
    Ok(1)
}

/// `ProfileListing` as JSON, local or from a server.
pub(crate) fn print_listing(listing: &Value, json: bool) -> anyhow::Result<u8> {
    if json {
        outln!("{listing}");
        return Ok(0);
    }
    let profiles = listing["profiles"].as_array().cloned().unwrap_or_default();
    if profiles.is_empty() {
        outln!("no profiles yet: `trellis profile save --help` shows how to make one");
    }
    for profile in &profiles {
        let runs = match profile["template"].as_str() {
            Some(template) => format!("template {template}"),
            None => "own graph".to_owned(),
        };
        outln!(
            "{:<24} rev {:<4} {:<28} {}",
            profile["name"].as_str().unwrap_or_default(),
            profile["revision"],
            runs,
            profile["description"].as_str().unwrap_or_default()
        );
    }
    for damaged in listing["unreadable"].as_array().into_iter().flatten() {
        eprintln!(
            "trellis: profile {} cannot be read: {}",
            damaged["name"].as_str().unwrap_or_default(),
            damaged["reason"].as_str().unwrap_or_default()
        );
    }
    Ok(0)
}

/// A `Profile` document, local or from a server.
pub(crate) fn print_profile(profile: &Value, json: bool) -> anyhow::Result<u8> {
    if json {
        outln!("{profile}");
        return Ok(0);
    }
    let definition = &profile["definition"];
    outln!(
        "profile   {}\nrevision  {}\nidentity  {}",
        profile["name"].as_str().unwrap_or_default(),
        profile["revision"],
        profile["identity"].as_str().unwrap_or_default()
    );
    if let Some(description) = definition["description"].as_str() {
        outln!("about     {description}");
    }
    match definition["template"]["name"].as_str() {
        Some(template) => {
            let delivery = definition["template"]["delivery"]
                .as_str()
                .unwrap_or("the template's default");
            outln!("runs      template {template} (delivery: {delivery})");
        }
        None => outln!(
            "runs      its own graph ({} bytes)",
            definition["graph"].to_string().len()
        ),
    }
    if let Some(task) = definition["taskDefault"].as_str() {
        outln!("task      {task}  (--task replaces it)");
    }
    if !definition["input"].is_null() {
        outln!("input     {}  (--input replaces it)", definition["input"]);
    }
    let plan = if !definition["plan"]["exact"].is_null() {
        "exact (one binding per executable)"
    } else if !definition["plan"]["uniform"].is_null() {
        "uniform (one binding for every executable)"
    } else {
        "none: the agent CLI found on PATH when it runs"
    };
    outln!("plan      {plan}");
    Ok(0)
}

/// Writes a `Profile` document to `output` or stdout.
pub(crate) fn export(profile: &Value, output: Option<&Path>) -> anyhow::Result<u8> {
    let mut text = serde_json::to_string_pretty(profile)?;
    text.push('\n');
    match output {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => out!("{text}"),
    }
    Ok(0)
}

/// A `DeletedProfile`, local or from a server.
pub(crate) fn print_deleted(deleted: &Value, json: bool) -> anyhow::Result<u8> {
    if json {
        outln!("{deleted}");
    } else {
        outln!(
            "✓ deleted profile {} (revision {})",
            deleted["name"].as_str().unwrap_or_default(),
            deleted["revision"]
        );
    }
    Ok(0)
}

fn short(identity: &str) -> &str {
    identity.get(..12).unwrap_or(identity)
}

/// Checks a profile name before it goes into a URL path.
pub(crate) fn checked_name(name: &str) -> anyhow::Result<&str> {
    trellis_runtime::ProfileName::parse(name).map_err(|e| anyhow!("{e}"))?;
    Ok(name)
}
