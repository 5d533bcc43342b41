//! A GaP run's admission: the workflow loaded and validated with its tools and skill bundles,
//! its inputs read, its connector started, before anything is recorded or executed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use trellis_agents::Isolation;
use trellis_gap::{
    CheckpointMode, CommandConnector, Connector, ExecuteOptions, ExecutionResult, Issue, LoadError,
    PythonConfig, PythonConnector, SkillRegistry, ToolRegistry, ValidateOptions, Workflow,
    load_command_manifest, load_workflow, read_inputs_file, render_issues, validate,
};
use trellis_ledger::RunId;

use crate::shared::admission_error::AdmissionError;
use crate::shared::documents::read_json_file;

/// A GaP workflow to run, and how.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GapRunRequest {
    /// The workflow: a directory with `workflow.json`, or the file itself.
    pub workflow: PathBuf,
    /// Top-level inputs: a JSON object file.
    pub inputs: Option<PathBuf>,
    /// Write `dag_trace.json` and `node_data/` here as the run goes.
    pub trace_dir: Option<PathBuf>,
    /// Most ready nodes run at once per super-step.
    pub max_workers: Option<usize>,
    /// Register the command tools of these manifests (a `tools.json` beside the workflow is
    /// always read).
    pub tool_manifests: Vec<PathBuf>,
    /// Register Python functions as tools: `NAME=MODULE.py:FUNCTION`.
    pub python_tools: Vec<String>,
    /// Register the built-in `stub.*` test tools.
    pub stub_tools: bool,
    /// Skill bundles under these directories: contract checks, `gap_skills.*` packages for
    /// their subgraphs' scripts, canonical scripts, and their `tools.py` tools.
    pub skills: Vec<PathBuf>,
    /// Where the observation stream and the checkpoints' world snapshot come from.
    pub connector: Option<GapConnector>,
    /// How checkpoint sidecars are judged (`trellis run` asks for `warn`).
    pub checkpoints: CheckpointMode,
    /// Names of environment variables holding secrets: their values are masked in everything
    /// the ledger records of the run, and a detached controller is handed them (names only are
    /// recorded).
    pub secret_env: Vec<String>,
    pub title: Option<String>,
    pub submission_key: Option<String>,
}

/// A GaP run's connector: what feeds `in.observation_stream` and the checkpoints' world
/// snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GapConnector {
    /// A Python module with `get_observation()` and `world_snapshot()`.
    PythonModule(PathBuf),
    /// A program answering JSON lines `{"id","op"}` with `{"id","value"}`.
    Command(Vec<String>),
}

/// A finished GaP run: its id and the executor's result object.
#[derive(Debug, Clone)]
pub struct GapOutcome {
    pub run_id: RunId,
    pub result: ExecutionResult,
}

fn tool_registry(
    request: &GapRunRequest,
    workflow_dir: &Path,
) -> Result<ToolRegistry, AdmissionError> {
    let mut registry = if request.stub_tools {
        ToolRegistry::with_builtin_stubs()
    } else {
        ToolRegistry::new()
    };
    let beside = workflow_dir.join("tools.json");
    let manifests = request
        .tool_manifests
        .iter()
        .cloned()
        .chain(beside.is_file().then_some(beside));
    for manifest in manifests {
        load_command_manifest(&mut registry, &manifest).map_err(|e| {
            AdmissionError::GapOptions(format!("tool manifest {}: {e}", manifest.display()))
        })?;
    }
    for spec in &request.python_tools {
        let malformed = || {
            AdmissionError::GapOptions(format!(
                "--python-tool {spec:?}: expected NAME=MODULE.py:FUNCTION"
            ))
        };
        let (name, target) = spec.split_once('=').ok_or_else(malformed)?;
        let (module, function) = target.rsplit_once(':').ok_or_else(malformed)?;
        registry
            .register_python(name, PathBuf::from(module), function)
            .map_err(|e| AdmissionError::GapOptions(format!("--python-tool {spec:?}: {e}")))?;
    }
    Ok(registry)
}

/// Loads and validates the workflow with its tools, and reads its inputs: a GaP run's
/// admission.
pub(crate) fn prepare(request: GapRunRequest) -> Result<GapRun, AdmissionError> {
    let request = absolute_paths(request)?;
    let path = request.workflow.clone();
    let workflow = load_workflow(&path).map_err(|e| match e {
        // The file's own problems name the file (the others already do).
        LoadError::Json { .. } | LoadError::Invalid { .. } => AdmissionError::GapOptions(format!(
            "{}: {e}",
            trellis_gap::workflow_file_path(&path).display()
        )),
        other => AdmissionError::GapOptions(other.to_string()),
    })?;
    // What the ledger keeps of the document, so the run's graph outlives its folder.
    let document = read_json_file(&trellis_gap::workflow_file_path(&path), "workflow").ok();
    let skills = load_skill_dirs(&request.skills)?;
    let mut registry = tool_registry(&request, &workflow.workflow_dir)?;
    registry
        .register_bundle_tools(&skills)
        .map_err(|e| AdmissionError::GapOptions(format!("skill bundle tools: {e}")))?;
    let issues: Vec<Issue> = validate(
        &workflow,
        &ValidateOptions {
            tool_registry: Some(&registry),
            skill_registry: (!skills.is_empty()).then_some(&skills),
            ..ValidateOptions::default()
        },
    );
    if issues.iter().any(Issue::is_error) {
        return Err(AdmissionError::GapRejected {
            path,
            report: render_issues(&issues),
        });
    }
    let mut options = ExecuteOptions {
        trace_dir: request.trace_dir.clone(),
        tool_registry: Arc::new(registry),
        skill_registry: Arc::new(skills),
        checkpoints: request.checkpoints,
        connector: connector(request.connector.as_ref())?,
        ..ExecuteOptions::default()
    };
    if let Some(file) = &request.inputs {
        options.inputs =
            read_inputs_file(file).map_err(|e| AdmissionError::GapOptions(e.to_string()))?;
    }
    if let Some(n) = request.max_workers {
        options.max_workers = n.max(1);
    }
    let title = request.title.clone().unwrap_or_else(|| {
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "gap".into())
    });
    Ok(GapRun {
        workflow,
        document,
        workflow_path: path,
        title,
        submission_key: request.submission_key,
        options,
        skills: request.skills,
        connector: request.connector,
        tool_manifests: request.tool_manifests,
        python_tools: request.python_tools,
        stub_tools: request.stub_tools,
        secret_env: request.secret_env,
        isolation: Isolation::None,
    })
}

/// The request with every path made absolute against the current directory, so the stored
/// submission means the same to a controller started elsewhere. A path that exists is named
/// by its real path: `ws/../flow` would not resolve inside a sandbox that shows `flow` but not
/// `ws`.
fn absolute_paths(mut request: GapRunRequest) -> Result<GapRunRequest, AdmissionError> {
    let absolute = |path: &Path| {
        path.canonicalize().or_else(|_| {
            std::path::absolute(path).map_err(|e| {
                AdmissionError::GapOptions(format!("{}: cannot resolve: {e}", path.display()))
            })
        })
    };
    request.workflow = absolute(&request.workflow)?;
    if let Some(inputs) = &request.inputs {
        request.inputs = Some(absolute(inputs)?);
    }
    if let Some(trace) = &request.trace_dir {
        request.trace_dir = Some(absolute(trace)?);
    }
    for path in request
        .tool_manifests
        .iter_mut()
        .chain(request.skills.iter_mut())
    {
        *path = absolute(path)?;
    }
    if let Some(GapConnector::PythonModule(module)) = &request.connector {
        request.connector = Some(GapConnector::PythonModule(absolute(module)?));
    }
    for spec in &mut request.python_tools {
        if let Some((name, target)) = spec.split_once('=')
            && let Some((module, function)) = target.rsplit_once(':')
        {
            let module = absolute(Path::new(module))?;
            *spec = format!("{name}={}:{function}", module.display());
        }
    }
    Ok(request)
}

/// Admits a stored GaP submission again (a detached controller, a resumed run): the same
/// workflow, tools, skills and connector, and the inputs as they were read at submission.
pub(crate) fn readmit(submission: &Value, run: &str) -> Result<GapRun, AdmissionError> {
    let stored = |what: &str| AdmissionError::StoredSubmission {
        run: run.to_owned(),
        reason: format!("the stored GaP submission has no valid {what}"),
    };
    let text = |key: &str| submission.get(key).and_then(Value::as_str);
    let texts = |key: &str| -> Result<Vec<String>, AdmissionError> {
        match submission.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| stored(key)))
                .collect(),
            Some(_) => Err(stored(key)),
        }
    };
    let paths = |key: &str| -> Result<Vec<PathBuf>, AdmissionError> {
        Ok(texts(key)?.into_iter().map(PathBuf::from).collect())
    };
    let connector = match submission.get("connector") {
        None | Some(Value::Null) => None,
        Some(value) => match (value.get("pythonModule"), value.get("command")) {
            (Some(Value::String(module)), None) => {
                Some(GapConnector::PythonModule(PathBuf::from(module)))
            }
            (None, Some(Value::Array(argv))) => Some(GapConnector::Command(
                argv.iter()
                    .map(|word| {
                        word.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| stored("connector"))
                    })
                    .collect::<Result<_, _>>()?,
            )),
            _ => return Err(stored("connector")),
        },
    };
    let request = GapRunRequest {
        workflow: PathBuf::from(text("workflow").ok_or_else(|| stored("workflow"))?),
        inputs: None,
        trace_dir: text("traceDir").map(PathBuf::from),
        max_workers: submission
            .get("maxWorkers")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok()),
        tool_manifests: paths("toolManifests")?,
        python_tools: texts("pythonTools")?,
        stub_tools: submission
            .get("stubTools")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        skills: paths("skills")?,
        connector,
        checkpoints: text("checkpoints")
            .and_then(CheckpointMode::parse)
            .ok_or_else(|| stored("checkpoints"))?,
        secret_env: texts("secretEnv")?,
        title: None,
        submission_key: None,
    };
    let mut run = prepare(request)?;
    // Recorded only for a contained run; a value this version cannot read contains it too.
    run.isolation = text("isolation").map_or(Isolation::None, |text| {
        Isolation::parse(text).unwrap_or(Isolation::Sandbox)
    });
    run.options.inputs = match submission.get("inputs") {
        Some(Value::Object(inputs)) => inputs.clone(),
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(_) => return Err(stored("inputs")),
    };
    Ok(run)
}

/// Largest workflow document recorded with a submission (the ledger takes 4 MiB in all).
const MAX_RECORDED_DOCUMENT_BYTES: usize = 1024 * 1024;

/// An admitted GaP run.
pub(crate) struct GapRun {
    pub workflow: Workflow,
    /// The workflow file as read at admission (none when it does not read as JSON again).
    pub document: Option<Value>,
    pub workflow_path: PathBuf,
    pub title: String,
    pub submission_key: Option<String>,
    pub options: ExecuteOptions,
    /// Recorded with the submission, so a run's record says what it ran with and a
    /// controller can admit it again.
    pub skills: Vec<PathBuf>,
    pub connector: Option<GapConnector>,
    pub tool_manifests: Vec<PathBuf>,
    pub python_tools: Vec<String>,
    pub stub_tools: bool,
    /// Names only; the values stay in the environment.
    pub secret_env: Vec<String>,
    /// Whether its bodies run in the sandbox: recorded, so its controller and a resumed
    /// successor contain them whatever their host says.
    pub isolation: Isolation,
}

impl GapRun {
    /// What the ledger records of the submission: paths and modes, never values read from
    /// the environment.
    pub fn submission(&self) -> Value {
        let connector = self.connector.as_ref().map(|c| match c {
            GapConnector::PythonModule(module) => {
                json!({"pythonModule": module.display().to_string()})
            }
            GapConnector::Command(argv) => json!({"command": argv}),
        });
        // A document too large to keep beside the submission is left out (its graph is then
        // read from the folder, while it exists).
        let document = self.document.as_ref().filter(|d| {
            serde_json::to_vec(d).is_ok_and(|t| t.len() <= MAX_RECORDED_DOCUMENT_BYTES)
        });
        let mut submission = json!({
            "workflow": self.workflow_path.display().to_string(),
            "document": document,
            "inputs": Value::Object(self.options.inputs.clone()),
            "traceDir": self.options.trace_dir.as_ref().map(|p| p.display().to_string()),
            "maxWorkers": self.options.max_workers,
            "skills": self.skills.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "checkpoints": checkpoint_mode_name(self.options.checkpoints),
            "connector": connector,
            "toolManifests": self
                .tool_manifests
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>(),
            "pythonTools": self.python_tools,
            "stubTools": self.stub_tools,
            "secretEnv": self.secret_env,
        });
        // Absent for an uncontained run, whose submission reads as it always has.
        if self.isolation == Isolation::Sandbox
            && let Some(fields) = submission.as_object_mut()
        {
            fields.insert("isolation".into(), json!(self.isolation.as_str()));
        }
        submission
    }
}

fn checkpoint_mode_name(mode: CheckpointMode) -> &'static str {
    match mode {
        CheckpointMode::Off => "off",
        CheckpointMode::Warn => "warn",
        CheckpointMode::Strict => "strict",
    }
}

/// Loads every skill directory into one registry (bundle names must be unique across them).
pub(crate) fn load_skill_dirs(dirs: &[PathBuf]) -> Result<SkillRegistry, AdmissionError> {
    let mut registry = SkillRegistry::new();
    for dir in dirs {
        registry.load_dir(dir).map_err(|e| {
            AdmissionError::GapOptions(format!("skill registry {}: {e}", dir.display()))
        })?;
    }
    Ok(registry)
}

fn connector(choice: Option<&GapConnector>) -> Result<Option<Arc<dyn Connector>>, AdmissionError> {
    match choice {
        None => Ok(None),
        Some(GapConnector::PythonModule(module)) => {
            if !module.is_file() {
                return Err(AdmissionError::GapOptions(format!(
                    "connector {}: no such file",
                    module.display()
                )));
            }
            Ok(Some(Arc::new(PythonConnector::new(
                module.clone(),
                PythonConfig::from_env(),
            ))))
        }
        Some(GapConnector::Command(argv)) => {
            let connector = CommandConnector::spawn(argv)
                .map_err(|e| AdmissionError::GapOptions(format!("connector command: {e}")))?;
            Ok(Some(Arc::new(connector)))
        }
    }
}
