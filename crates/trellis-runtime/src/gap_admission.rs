//! A GaP run's admission: the workflow loaded and validated with its tools and skill bundles,
//! its inputs read, its connector started, before anything is recorded or executed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use trellis_gap::{
    CheckpointMode, CommandConnector, Connector, ExecuteOptions, ExecutionResult, Issue, LoadError,
    PythonConfig, PythonConnector, SkillRegistry, ToolRegistry, ValidateOptions, Workflow,
    load_command_manifest, load_workflow, read_inputs_file, render_issues, validate,
};
use trellis_ledger::RunId;

use crate::admission::AdmissionError;

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
    let path = request.workflow.clone();
    let workflow = load_workflow(&path).map_err(|e| match e {
        // The file's own problems name the file (the others already do).
        LoadError::Json { .. } | LoadError::Invalid { .. } => AdmissionError::GapOptions(format!(
            "{}: {e}",
            trellis_gap::workflow_file_path(&path).display()
        )),
        other => AdmissionError::GapOptions(other.to_string()),
    })?;
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
        workflow_path: path,
        title,
        submission_key: request.submission_key,
        options,
        skills: request.skills,
        connector: request.connector,
    })
}

/// An admitted GaP run.
pub(crate) struct GapRun {
    pub workflow: Workflow,
    pub workflow_path: PathBuf,
    pub title: String,
    pub submission_key: Option<String>,
    pub options: ExecuteOptions,
    /// Recorded with the submission, so a run's record says what it ran with.
    pub skills: Vec<PathBuf>,
    pub connector: Option<GapConnector>,
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
        json!({
            "workflow": self.workflow_path.display().to_string(),
            "inputs": Value::Object(self.options.inputs.clone()),
            "traceDir": self.options.trace_dir.as_ref().map(|p| p.display().to_string()),
            "maxWorkers": self.options.max_workers,
            "skills": self.skills.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "checkpoints": checkpoint_mode_name(self.options.checkpoints),
            "connector": connector,
        })
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
