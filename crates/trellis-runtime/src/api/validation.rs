//! Checking a graph without running it: a GraphSpec graph is verified (by the same admission
//! steps a run takes, optionally against another worker registry and with an input), a GaP
//! workflow is loaded and validated.

use std::path::PathBuf;

use serde_json::{Value, json};
use trellis_gap::{PythonConfig, PythonIntrospector, ValidateOptions};
use trellis_graph::{GraphDiagnostic, GraphNode, GraphSpec, JsonPath};

use crate::gap_runs::admission::load_skill_dirs;
use crate::graphspec::admission::{
    AdmissionError, GraphSource, InputSource, check_input, read_registry, verify_spec,
};
use crate::observation::views::{GraphBounds, GraphLayout};
use crate::shared::documents::{DocumentKind, classify, read_json_file};
use crate::shared::templates;

/// What to validate.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidateRequest {
    pub document: GraphSource,
    /// Resolve workers from this registry file instead of the built-in registry.
    pub registry: Option<PathBuf>,
    /// Check this input against the graph's `initialInput` too.
    pub input: Option<InputSource>,
    /// GaP: check subgraphs against the skill bundles under these directories.
    pub skills: Vec<PathBuf>,
    /// GaP: also reconcile each skill subgraph's exits with its bundle's (needs `skills`).
    pub strict: bool,
}

impl ValidateRequest {
    pub fn new(document: GraphSource) -> Self {
        Self {
            document,
            registry: None,
            input: None,
            skills: Vec::new(),
            strict: false,
        }
    }
}

/// The verdict on a graph.
#[derive(Debug, Clone)]
pub enum ValidationReport {
    /// A GraphSpec graph that verifies (its input may still have failed the check).
    Verified(Box<VerifiedReport>),
    /// A GraphSpec graph with problems: every diagnostic, in canonical order.
    Rejected {
        shown: String,
        diagnostics: Vec<GraphDiagnostic>,
    },
    /// The document is not JSON, or not a GraphSpec graph.
    Unparseable { shown: String, error: String },
    /// A GaP workflow's report.
    Gap {
        path: PathBuf,
        report: trellis_gap::ValidationReport,
    },
}

/// A verified GraphSpec graph: identity, bounds, size and compiled shape.
#[derive(Debug, Clone)]
pub struct VerifiedReport {
    pub shown: String,
    pub identity: String,
    pub bounds: GraphBounds,
    /// Every node, and how many of them are steps or verifiers.
    pub nodes: usize,
    pub executables: usize,
    pub compiled_ir: Value,
    pub layout: GraphLayout,
    /// Why the given input does not match `initialInput`, when it does not.
    pub input_error: Option<String>,
}

impl ValidationReport {
    /// 0 when the graph (and input) passed, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Verified(report) if report.input_error.is_none() => 0,
            Self::Gap { report, .. } => u8::try_from(report.exit_code()).unwrap_or(1),
            _ => 1,
        }
    }

    /// The machine-readable report: `{"status": "verified" | "rejected" | "unparseable", …}`
    /// (a GaP report has its own shape).
    pub fn to_json(&self) -> Value {
        match self {
            Self::Verified(report) => {
                let mut out = json!({
                    "status": if report.input_error.is_some() { "rejected" } else { "verified" },
                    "identity": report.identity,
                    "bounds": report.bounds,
                    "compiledIr": report.compiled_ir,
                    "diagnostics": [],
                });
                if let Some(error) = &report.input_error {
                    out["inputError"] = json!(format!(
                        "initial input does not match initialInput: {error}"
                    ));
                }
                out
            }
            Self::Rejected { diagnostics, .. } => {
                json!({"status": "rejected", "diagnostics": diagnostics})
            }
            Self::Unparseable { error, .. } => json!({"status": "unparseable", "error": error}),
            Self::Gap { report, .. } => serde_json::to_value(report).unwrap_or(Value::Null),
        }
    }
}

/// A graph file that was read but cannot be a document (too large, not UTF-8) is reported
/// `unparseable` like bad JSON; a file that cannot be read at all stays an error.
fn unparseable_file(
    path: &std::path::Path,
    error: AdmissionError,
) -> Result<ValidationReport, AdmissionError> {
    match error {
        AdmissionError::TooLarge { .. } | AdmissionError::Unparseable { .. } => {
            Ok(ValidationReport::Unparseable {
                shown: path.display().to_string(),
                error: error.to_string(),
            })
        }
        other => Err(other),
    }
}

/// Validates a document. Files that cannot be read, registries and inputs that cannot be read,
/// and verifier failures are errors; everything about the graph itself is in the report.
pub fn validate(request: ValidateRequest) -> Result<ValidationReport, AdmissionError> {
    let (shown, value) = match &request.document {
        GraphSource::File(path) => match classify(path) {
            Err(error) => return unparseable_file(path, error),
            Ok(DocumentKind::Unparseable { path, error }) => {
                return Ok(ValidationReport::Unparseable {
                    shown: path.display().to_string(),
                    error,
                });
            }
            Ok(DocumentKind::Gap { path }) => return validate_gap(&request, path),
            Ok(DocumentKind::GraphSpec { path, value }) => (path.display().to_string(), value),
        },
        GraphSource::Document(value) if trellis_gap::is_gap_document(value) => {
            return validate_gap_document(&request, value);
        }
        GraphSource::Document(value) => ("graph".to_owned(), value.clone()),
        GraphSource::Template { name, delivery } => {
            let text = templates::find(name)
                .ok_or_else(|| AdmissionError::UnknownTemplate(name.clone()))?
                .document_for(delivery.mode)
                .ok_or_else(|| AdmissionError::no_variant(name, delivery.mode))?;
            let value = serde_json::from_str(text).map_err(|e| AdmissionError::Unparseable {
                what: "built-in template",
                path: None,
                error: e.to_string(),
            })?;
            (format!("template {name}"), value)
        }
    };
    if !request.skills.is_empty() || request.strict {
        return Err(AdmissionError::GapOptions(
            "--skills and --strict apply to GaP workflows".to_owned(),
        ));
    }
    let spec = match GraphSpec::parse(&value, &JsonPath::root()) {
        Ok(spec) => spec,
        Err(error) => {
            return Ok(ValidationReport::Unparseable {
                shown,
                error: error.to_string(),
            });
        }
    };
    let registry = request.registry.as_deref().map(read_registry).transpose()?;
    let verified = match verify_spec(&spec, &shown, registry.as_ref()) {
        Ok(verified) => verified,
        Err(AdmissionError::Rejected { shown, diagnostics }) => {
            return Ok(ValidationReport::Rejected { shown, diagnostics });
        }
        Err(other) => return Err(other),
    };
    let input_error = match &request.input {
        None => None,
        Some(source) => {
            let input = match source {
                InputSource::File(path) => read_json_file(path, "input")?,
                InputSource::Document(value) => value.clone(),
                InputSource::Task(task) => json!({ "task": task }),
                InputSource::Default => Value::Null,
                InputSource::TaskFrom(url) => match &request.document {
                    GraphSource::Template { name, .. } => {
                        crate::graphspec::preparation::task_from(url, name)?
                    }
                    _ => {
                        return Err(AdmissionError::TaskFrom(
                            "--task-from needs a review template".to_owned(),
                        ));
                    }
                },
            };
            match check_input(&spec, &input) {
                Ok(()) => None,
                Err(AdmissionError::InputMismatch(error)) => Some(error),
                Err(other) => return Err(other),
            }
        }
    };
    let (mut nodes, mut executables) = (0, 0);
    spec.root.walk(&mut |n: &GraphNode| {
        nodes += 1;
        executables += usize::from(n.executable().is_some());
    });
    Ok(ValidationReport::Verified(Box::new(VerifiedReport {
        shown,
        identity: verified.identity.to_string(),
        bounds: GraphBounds::of(&verified),
        nodes,
        executables,
        compiled_ir: verified.ir.to_value(),
        layout: GraphLayout::of(&spec),
        input_error,
    })))
}

/// GaP workflows take neither an input to check nor a registry, and `--strict` needs skills.
fn refuse_gap_options(request: &ValidateRequest) -> Result<(), AdmissionError> {
    if request.input.is_some() || request.registry.is_some() {
        return Err(AdmissionError::GapOptions(
            "--input and --registry apply to GraphSpec graphs; GaP workflows take \
             `trellis run --inputs`"
                .to_owned(),
        ));
    }
    if request.strict && request.skills.is_empty() {
        return Err(AdmissionError::GapOptions(
            "--strict reconciles exits against skill bundles; name them with --skills DIR"
                .to_owned(),
        ));
    }
    Ok(())
}

/// A GaP workflow given as a document (pasted, not on disk): validated by the same rules, but
/// without a directory its script nodes' files are not introspected (nothing is read from or
/// run on this machine on behalf of the document).
fn validate_gap_document(
    request: &ValidateRequest,
    document: &Value,
) -> Result<ValidationReport, AdmissionError> {
    refuse_gap_options(request)?;
    let skills = load_skill_dirs(&request.skills)?;
    let options = ValidateOptions {
        skill_registry: (!request.skills.is_empty()).then_some(&skills),
        reconcile_exits: request.strict,
        ..ValidateOptions::default()
    };
    let report = match trellis_gap::parse_workflow(document, PathBuf::new()) {
        Err(error) => trellis_gap::ValidationReport::Unparseable {
            error: error.to_string(),
        },
        Ok(workflow) => {
            let issues = trellis_gap::validate(&workflow, &options);
            if issues.iter().any(trellis_gap::Issue::is_error) {
                trellis_gap::ValidationReport::Rejected { issues }
            } else {
                trellis_gap::ValidationReport::Verified { issues }
            }
        }
    };
    Ok(ValidationReport::Gap {
        path: PathBuf::from("workflow.json"),
        report,
    })
}

fn validate_gap(
    request: &ValidateRequest,
    path: PathBuf,
) -> Result<ValidationReport, AdmissionError> {
    refuse_gap_options(request)?;
    let skills = load_skill_dirs(&request.skills)?;
    let introspector = PythonIntrospector::new(PythonConfig::from_env());
    let options = ValidateOptions {
        script_introspector: Some(&introspector),
        skill_registry: (!request.skills.is_empty()).then_some(&skills),
        reconcile_exits: request.strict,
        ..ValidateOptions::default()
    };
    let report = trellis_gap::ValidationReport::for_path(&path, &options);
    Ok(ValidationReport::Gap { path, report })
}
