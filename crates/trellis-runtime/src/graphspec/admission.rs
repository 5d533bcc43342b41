//! The one admission every run goes through — `validate --input`, `run --validate-only`, `run`,
//! the controller re-reading its stored submission, and `resume`: parse and verify the graph,
//! check the input against its `initialInput`, admit the runtime plan (including the
//! environment variables its command bindings declare), and check the workspace.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};
use trellis_agents::Binding;
use trellis_engine::{Refusal, RunnableGraph};
use trellis_graph::{GraphSpec, JsonPath, PayloadType, StaticRegistry};
use trellis_verify::builtin::BuiltinRegistry;
use trellis_verify::{Verification, VerifiedGraph};

use crate::graphspec::harnesses::default_plan;
use crate::observation::views::GraphLayout;
use crate::plan::RuntimePlan;
use crate::plan::admission::{
    AdmissionRefusal, admit_graph, check_comment_destinations, check_delivery_overlap,
    check_iteration_counts, with_input_iteration_counts,
};
use crate::plan::connections::Connections;
pub use crate::shared::admission_error::AdmissionError;
use crate::shared::documents::{DocumentKind, classify, read_json_file, read_text_file};
use crate::shared::submission::Submission;
use crate::shared::templates::{self, TemplateDelivery};

/// Where the graph comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum GraphSource {
    /// A GraphSpec file (a GaP workflow is refused with [`AdmissionError::GapWorkflow`]).
    File(PathBuf),
    /// A GraphSpec document already read as JSON (e.g. an HTTP request body).
    Document(Value),
    /// A built-in template and the delivery asked for (its default when `delivery.mode` is
    /// `None`).
    Template {
        name: String,
        delivery: TemplateDelivery,
    },
}

/// Where the initial input comes from.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum InputSource {
    /// None given: `null` for graphs whose `initialInput` is `null`, else a refusal.
    #[default]
    Default,
    File(PathBuf),
    Document(Value),
    /// A task description: a template's input `{"task": …}`.
    Task(String),
    /// A GitHub issue or pull request URL, resolved into a review template's input
    /// (`--task-from`).
    TaskFrom(String),
}

/// A plan document, from a file or already read.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigSource {
    File(PathBuf),
    Document(Value),
}

/// Where the runtime plan comes from.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum PlanSource {
    /// None given: no bindings for a graph without executables, else the first agent CLI
    /// found on `PATH` with its default model.
    #[default]
    Detect,
    /// An exact plan: one binding per executable (`--runtime-config`).
    Exact(ConfigSource),
    /// One binding for every executable: an agent lane or a command
    /// (`--uniform-runtime-config`).
    Uniform(ConfigSource),
    /// No plan at all: only graph and input are admitted (`validate --input`). Such an
    /// admission cannot be submitted.
    Unchecked,
}

/// Everything a run is admitted from.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmitRequest {
    pub graph: GraphSource,
    pub input: InputSource,
    pub plan: PlanSource,
    /// The directory the run works in; `None` means the current directory.
    pub workspace: Option<PathBuf>,
}

impl AdmitRequest {
    /// A request with the default input, a detected plan and the current directory.
    pub fn new(graph: GraphSource) -> Self {
        Self {
            graph,
            input: InputSource::Default,
            plan: PlanSource::Detect,
            workspace: None,
        }
    }
}

/// A graph, input and plan that passed admission: the only thing [`crate::Runtime::submit`]
/// accepts, so nothing unverified ever reaches the engine.
#[derive(Debug, Clone)]
pub struct Admitted {
    pub(crate) graph: RunnableGraph,
    pub(crate) verified: VerifiedGraph,
    pub(crate) input: Value,
    pub(crate) plan: Option<RuntimePlan>,
    pub(crate) workspace: Option<PathBuf>,
    pub(crate) template: Option<String>,
    pub(crate) default_title: String,
    pub(crate) notices: Vec<String>,
    /// Where its connection variables take their values (a caller's, on a team server).
    pub(crate) connections: Connections,
}

impl Admitted {
    /// The graph's SHA-256 identity (lowercase hex).
    pub fn identity(&self) -> String {
        self.verified.identity.to_string()
    }

    /// A title derived from the task, template or file name.
    pub fn default_title(&self) -> &str {
        &self.default_title
    }

    pub fn template(&self) -> Option<&str> {
        self.template.as_deref()
    }

    /// The environment variable names the admitted run's plan requires (its connections),
    /// sorted: what a team server reports to a caller, who sends their values.
    pub fn connection_names(&self) -> Vec<String> {
        self.plan
            .as_ref()
            .map(RuntimePlan::connection_names)
            .unwrap_or_default()
    }

    /// The canonical workspace directory, when a plan was admitted.
    pub fn workspace(&self) -> Option<&Path> {
        self.workspace.as_deref()
    }

    /// Things worth telling the person who asked (e.g. which agent CLI was chosen).
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// The graph's shape, for drawing.
    pub fn layout(&self) -> GraphLayout {
        GraphLayout::of(self.graph.spec())
    }

    /// What would run: identity, worst-case bounds, budget and the binding kind per node
    /// (`run --validate-only`). Never a secret value: plans only name variables.
    pub fn summary(&self) -> AdmissionSummary {
        let bounds = &self.verified.ir.bounds;
        let max_attempts = bounds
            .attempts_per_node
            .values()
            .map(|a| a.get())
            .max()
            .unwrap_or(1);
        let plan = self.plan.as_ref();
        AdmissionSummary {
            valid: true,
            identity: self.identity(),
            worst_case: WorstCase {
                max_node_executions: bounds.max_node_executions.get(),
                peak_concurrency: bounds.peak_concurrency.get(),
                max_attempts,
                // Attempts multiply executions only through crash retries: an explicit ceiling.
                max_executions_with_retries: bounds
                    .max_node_executions
                    .get()
                    .saturating_mul(max_attempts),
            },
            budget: plan.and_then(|p| p.budget).map(|b| json!(b)),
            bindings: plan
                .map(|p| {
                    p.nodes
                        .iter()
                        .map(|(n, b)| (n.to_string(), json!(b.kind_name())))
                        .collect()
                })
                .unwrap_or_default(),
            harness: plan.and_then(|p| p.harness).map(|h| json!(h)),
            provider: plan.and_then(|p| p.provider).map(|p| json!(p)),
        }
    }
}

/// The `run --validate-only` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionSummary {
    pub valid: bool,
    pub identity: String,
    pub worst_case: WorstCase,
    pub budget: Option<Value>,
    pub bindings: Map<String, Value>,
    pub harness: Option<Value>,
    pub provider: Option<Value>,
}

/// A verified graph's worst case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorstCase {
    pub max_node_executions: u64,
    pub peak_concurrency: u64,
    pub max_attempts: u64,
    pub max_executions_with_retries: u64,
}

/// Admits a graph, its input and its plan. Needs no state directory.
pub fn admit(request: AdmitRequest) -> Result<Admitted, AdmissionError> {
    admit_where(request, &|name| std::env::var_os(name).is_some())
}

/// Admits as [`admit`] does, judging whether a command's connection variable has a value
/// with `is_set` (a team server also counts the values its caller sent).
pub(crate) fn admit_where(
    request: AdmitRequest,
    is_set: &dyn Fn(&str) -> bool,
) -> Result<Admitted, AdmissionError> {
    let graph = read_graph(&request.graph)?;
    let spec = parse_graph(&graph.value, &graph.shown)?;
    // What was given is settled first; whether the input fits the graph, after verification.
    let input = resolve_input(&spec, &request.input, &graph)?;
    let mut notices = Vec::new();
    // Under a plan the graph is admitted before it is verified, and verified against the
    // contracts it declares, as the reference does (graph-contract §13.9).
    let (mut plan, registry) = match &request.plan {
        PlanSource::Unchecked => (None, Registry::Builtin),
        source => (
            Some(admit_plan(&spec, source, &mut notices, is_set)?),
            Registry::Declared,
        ),
    };
    let (runnable, mut verified) = verify_parsed(spec, &graph.shown, registry)?;
    let spec = runnable.spec();
    check_input(spec, &input)?;
    check_iteration_counts(spec, &input).map_err(AdmissionRefusal::from)?;
    if plan.is_some() {
        check_comment_destinations(spec, &input).map_err(AdmissionRefusal::from)?;
        check_delivery_overlap(spec).map_err(AdmissionRefusal::from)?;
    }
    // Loops run as many rounds as the input asks: the bounds are those of that graph.
    if let Some(counted) = with_input_iteration_counts(&graph.value, &input) {
        verified.ir.bounds = verify(&counted, &graph.shown, registry)?.1.ir.bounds;
    }
    let workspace = match plan.as_mut() {
        Some(plan) => {
            if let GraphSource::Template { delivery, name } = &request.graph {
                if delivery.ignore_pr_feedback {
                    plan.ignore_pull_request_feedback();
                }
                if !plan_states_session_scope(&request.plan)?
                    && let Some(template) = templates::find(name)
                {
                    plan.keep_sessions_of(template.session_nodes());
                }
            }
            Some(admit_workspace(request.workspace.as_deref())?)
        }
        None => None,
    };
    // A task says best what a run is about.
    let default_title = match &request.input {
        InputSource::Task(task) => task.clone(),
        _ => graph.default_title,
    };
    Ok(Admitted {
        graph: runnable,
        verified,
        input,
        plan,
        workspace,
        template: graph.template,
        default_title,
        notices,
        connections: Connections::default(),
    })
}

/// A graph document read from its source.
struct ReadGraph {
    value: Value,
    /// How to name the graph in messages.
    shown: String,
    template: Option<String>,
    default_title: String,
}

fn read_graph(source: &GraphSource) -> Result<ReadGraph, AdmissionError> {
    match source {
        GraphSource::File(path) => match classify(path)? {
            DocumentKind::Gap { path } => Err(AdmissionError::GapWorkflow { path }),
            DocumentKind::Unparseable { path, error } => Err(AdmissionError::Unparseable {
                what: "graph",
                path: Some(path),
                error: format!("does not parse: {error}"),
            }),
            DocumentKind::GraphSpec { path, value } => Ok(ReadGraph {
                value,
                shown: path.display().to_string(),
                template: None,
                default_title: path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "run".into()),
            }),
        },
        GraphSource::Document(value) => Ok(ReadGraph {
            value: value.clone(),
            shown: "graph".to_owned(),
            template: None,
            default_title: "run".to_owned(),
        }),
        GraphSource::Template { name, delivery } => {
            let template = templates::find(name)
                .ok_or_else(|| AdmissionError::UnknownTemplate(name.clone()))?;
            let text = template
                .document_for(delivery.mode)
                .ok_or_else(|| AdmissionError::no_variant(name, delivery.mode))?;
            let value = serde_json::from_str(text).map_err(|e| AdmissionError::Unparseable {
                what: "built-in template",
                path: None,
                error: e.to_string(),
            })?;
            Ok(ReadGraph {
                value,
                shown: format!("template {name}"),
                template: Some(name.clone()),
                default_title: name.clone(),
            })
        }
    }
}

/// Which worker registry a graph is verified against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Registry {
    /// Trellis's built-in references (agents, delivery, `command.*`), with their graph rules
    /// reported as diagnostics: a graph checked without a plan.
    Builtin,
    /// Every reference resolves to the contract the graph declares for it: a graph admitted
    /// under a plan, which says how each node runs.
    Declared,
}

/// Parses a GraphSpec document.
fn parse_graph(value: &Value, shown: &str) -> Result<GraphSpec, AdmissionError> {
    GraphSpec::parse(value, &JsonPath::root()).map_err(|e| AdmissionError::InvalidGraph {
        shown: shown.to_owned(),
        error: e.to_string(),
    })
}

/// Parses and verifies a GraphSpec document: the graph a run may run, and its verification
/// (IR, identity, bounds).
pub(crate) fn verify(
    value: &Value,
    shown: &str,
    registry: Registry,
) -> Result<(RunnableGraph, VerifiedGraph), AdmissionError> {
    verify_parsed(parse_graph(value, shown)?, shown, registry)
}

fn verify_parsed(
    spec: GraphSpec,
    shown: &str,
    registry: Registry,
) -> Result<(RunnableGraph, VerifiedGraph), AdmissionError> {
    let verified = match registry {
        Registry::Builtin => RunnableGraph::verify_builtin(spec),
        Registry::Declared => {
            let declared = BuiltinRegistry::declared(&spec);
            RunnableGraph::verify(spec, &declared)
        }
    };
    verified.map_err(|refused| match refused {
        Refusal::Rejected(diagnostics) => AdmissionError::Rejected {
            shown: shown.to_owned(),
            diagnostics,
        },
        Refusal::Internal(message) => AdmissionError::VerifierInternal(message),
    })
}

/// Verifies a parsed graph with the built-in registry, or `registry`.
pub(crate) fn verify_spec(
    spec: &GraphSpec,
    shown: &str,
    registry: Option<&StaticRegistry>,
) -> Result<VerifiedGraph, AdmissionError> {
    let verification = match registry {
        None => trellis_verify::verify_builtin(spec),
        Some(registry) => trellis_verify::verify(spec, registry),
    };
    match verification {
        Verification::Verified(verified) => Ok(verified),
        Verification::Rejected(diagnostics) => Err(AdmissionError::Rejected {
            shown: shown.to_owned(),
            diagnostics,
        }),
        Verification::Internal(message) => Err(AdmissionError::VerifierInternal(message)),
    }
}

/// The input a request gives (a file, a document, a template's task), or why none can be had;
/// its value is checked against the graph later ([`check_input`]).
fn resolve_input(
    spec: &GraphSpec,
    source: &InputSource,
    graph: &ReadGraph,
) -> Result<Value, AdmissionError> {
    let input = match (source, &graph.template) {
        (InputSource::Task(task), Some(name)) => {
            let template = templates::find(name)
                .ok_or_else(|| AdmissionError::UnknownTemplate(name.clone()))?;
            if template.input_source() != templates::TemplateInput::Task {
                return Err(AdmissionError::TaskNotAccepted(name.clone()));
            }
            template.input_for_task(task)
        }
        (InputSource::Task(task), None) => json!({ "task": task }),
        (InputSource::TaskFrom(url), Some(name)) => {
            crate::graphspec::preparation::task_from(url, name)?
        }
        (InputSource::TaskFrom(_), None) => {
            return Err(AdmissionError::TaskFrom(
                "--task-from needs a review template (--template issue-review or pr-review)"
                    .to_owned(),
            ));
        }
        (InputSource::File(path), _) => read_json_file(path, "input")?,
        (InputSource::Document(value), _) => value.clone(),
        (InputSource::Default, Some(name)) => {
            return Err(AdmissionError::TemplateNeedsTask(name.clone()));
        }
        (InputSource::Default, None) if matches!(spec.initial_input, PayloadType::Null) => {
            Value::Null
        }
        (InputSource::Default, None) => return Err(AdmissionError::InputRequired),
    };
    Ok(input)
}

/// Checks a value against the graph's `initialInput`.
pub(crate) fn check_input(spec: &GraphSpec, input: &Value) -> Result<(), AdmissionError> {
    spec.initial_input
        .check_value(input)
        .map_err(|e| AdmissionError::InputMismatch(e.to_string()))
}

fn read_config(source: &ConfigSource, what: &'static str) -> Result<Value, AdmissionError> {
    match source {
        ConfigSource::File(path) => read_json_file(path, what),
        ConfigSource::Document(value) => Ok(value.clone()),
    }
}

/// Whether the plan given says which session scope its agents use (a template's own scopes
/// apply only when it does not, as in the reference).
fn plan_states_session_scope(source: &PlanSource) -> Result<bool, AdmissionError> {
    Ok(match source {
        PlanSource::Exact(_) => true,
        PlanSource::Uniform(config) => read_config(config, "uniform runtime config")?
            .get("sessionScope")
            .is_some(),
        PlanSource::Detect | PlanSource::Unchecked => false,
    })
}

fn admit_plan(
    spec: &GraphSpec,
    source: &PlanSource,
    notices: &mut Vec<String>,
    is_set: &dyn Fn(&str) -> bool,
) -> Result<RuntimePlan, AdmissionError> {
    let mut plan = match source {
        PlanSource::Exact(config) => {
            RuntimePlan::from_json(&read_config(config, "runtime config")?)?
        }
        PlanSource::Uniform(config) => {
            RuntimePlan::uniform(&read_config(config, "uniform runtime config")?, spec)?
        }
        PlanSource::Detect | PlanSource::Unchecked => default_plan(spec, notices)?,
    };
    plan.fill_delivery_defaults(spec);
    admit_graph(spec, &plan)?;
    check_plan(&plan, spec, is_set)?;
    notices.extend(plan.ignored_fields());
    Ok(plan)
}

/// The plan's own rules, then the environment: every connection variable a command binding
/// declares must be set (`is_set`), or the command would run without it.
fn check_plan(
    plan: &RuntimePlan,
    spec: &GraphSpec,
    is_set: &dyn Fn(&str) -> bool,
) -> Result<(), AdmissionError> {
    plan.admit(spec)?;
    for (node, binding) in &plan.nodes {
        let Binding::Command(command) = binding else {
            continue;
        };
        if let Some(variable) = command.connections.iter().find(|name| !is_set(name)) {
            return Err(AdmissionError::MissingConnection {
                node: node.to_string(),
                variable: variable.clone(),
            });
        }
    }
    Ok(())
}

/// The workspace must be an existing directory; it is recorded in canonical form.
fn admit_workspace(workspace: Option<&Path>) -> Result<PathBuf, AdmissionError> {
    let given = match workspace {
        Some(path) => path.to_path_buf(),
        None => std::env::current_dir().map_err(|e| AdmissionError::Workspace {
            path: PathBuf::from("."),
            reason: format!("cannot read the working directory: {e}"),
        })?,
    };
    let canonical = given
        .canonicalize()
        .map_err(|e| AdmissionError::Workspace {
            path: given.clone(),
            reason: format!("does not exist ({e})"),
        })?;
    if !canonical.is_dir() {
        return Err(AdmissionError::Workspace {
            path: given,
            reason: "is not a directory".to_owned(),
        });
    }
    Ok(canonical)
}

/// A stored submission admitted again: the controller and `resume` trust nothing they did
/// not check themselves.
#[derive(Debug, Clone)]
pub(crate) struct Readmitted {
    pub submission: Submission,
    pub graph: RunnableGraph,
    pub identity: String,
}

/// Admits a run's stored submission again, by the same rules as a new one.
pub(crate) fn readmit(stored: &Value, run: &str) -> Result<Readmitted, AdmissionError> {
    readmit_where(stored, run, &|name| std::env::var_os(name).is_some())
}

/// Readmits as [`readmit`] does, judging connection variables with `is_set`.
pub(crate) fn readmit_where(
    stored: &Value,
    run: &str,
    is_set: &dyn Fn(&str) -> bool,
) -> Result<Readmitted, AdmissionError> {
    let invalid = |reason: String| AdmissionError::StoredSubmission {
        run: run.to_owned(),
        reason,
    };
    let submission: Submission =
        serde_json::from_value(stored.clone()).map_err(|e| invalid(e.to_string()))?;
    let (graph, verified) =
        verify(&submission.graph, "graph", Registry::Declared).map_err(|e| match e {
            AdmissionError::Rejected { diagnostics, .. } => invalid(format!(
                "graph no longer verifies ({} diagnostics)",
                diagnostics.len()
            )),
            other => invalid(other.to_string()),
        })?;
    check_input(graph.spec(), &submission.input).map_err(|e| invalid(e.to_string()))?;
    check_iteration_counts(graph.spec(), &submission.input).map_err(|e| invalid(e.to_string()))?;
    check_plan(&submission.plan, graph.spec(), is_set)?;
    Ok(Readmitted {
        identity: verified.identity.to_string(),
        submission,
        graph,
    })
}

/// Reads a worker registry file for `validate --registry`.
pub(crate) fn read_registry(path: &Path) -> Result<StaticRegistry, AdmissionError> {
    let text = read_text_file(path, "registry")?;
    StaticRegistry::from_json_str(&text).map_err(|e| AdmissionError::Unparseable {
        what: "registry",
        path: Some(path.to_path_buf()),
        error: e.to_string(),
    })
}

#[cfg(test)]
#[path = "admission_sessions_tests.rs"]
mod sessions_tests;
