//! Strict loader turning `workflow.json` v3 text into a [`Workflow`], with the reference's checks and messages.

use crate::model::*;
use crate::pyfmt::{py_list, py_repr, py_str_repr};
use indexmap::IndexMap;
use serde_json::{Map, Value};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Why a workflow could not be loaded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// The path (or `<dir>/workflow.json`) does not exist.
    #[error("Workflow file not found: {path}")]
    NotFound { path: PathBuf },
    /// The file exists but could not be read.
    #[error("cannot read workflow file {path}: {message}")]
    Io { path: PathBuf, message: String },
    /// A `--inputs` file exists but could not be read.
    #[error("cannot read inputs file {path}: {message}")]
    InputsIo { path: PathBuf, message: String },
    /// The text is not valid JSON.
    #[error("invalid JSON: {message}")]
    Json { message: String },
    /// The document violates the v3 format (message as in the reference).
    #[error("{message}")]
    Invalid { message: String },
}

fn invalid(message: impl Into<String>) -> LoadError {
    LoadError::Invalid {
        message: message.into(),
    }
}

const ROOT_KEYS: &[&str] = &[
    "version",
    "meta",
    "nodes",
    "edges",
    "conditional_edges",
    "subgraphs",
];
const SUBGRAPH_KEYS: &[&str] = &[
    "skill",
    "agent",
    "inputs",
    "outputs",
    "nodes",
    "edges",
    "conditional_edges",
    "exit",
    "on_error",
    "stage",
];
const NODE_KEYS: &[&str] = &[
    "type",
    "inputs",
    "streaming",
    "script",
    "tool",
    "ref",
    "status",
    "recovery",
];
const RECOVERY_KEYS: &[&str] = &["tool", "inputs"];
const COND_KEYS: &[&str] = &["router_field", "mapping"];
const EXIT_KEYS: &[&str] = &["router_field", "success_values"];

/// True when a parsed JSON document is a GaP v3 workflow (`"version": 3` or `3.0`).
pub fn is_gap_document(document: &Value) -> bool {
    document
        .as_object()
        .and_then(|root| root.get("version"))
        .is_some_and(is_version_three)
}

fn is_version_three(version: &Value) -> bool {
    match version {
        Value::Number(n) => n.as_f64() == Some(3.0),
        // Python `True == 1`, never 3; strings never compare equal to ints.
        _ => false,
    }
}

/// Resolves a file-or-directory argument to the `workflow.json` path.
pub fn workflow_file_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("workflow.json")
    } else {
        path.to_path_buf()
    }
}

/// Loads `path` (a `workflow.json` file or a directory holding one).
pub fn load_workflow(path: &Path) -> Result<Workflow, LoadError> {
    let file = workflow_file_path(path);
    if !file.is_file() {
        return Err(LoadError::NotFound { path: file });
    }
    let text = read_bounded(&file, |path, message| LoadError::Io { path, message })?;
    let dir = file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    load_workflow_str(&text, dir)
}

/// Reads a `--inputs FILE`: a JSON object whose keys become the run's `in.*` values.
pub fn read_inputs_file(path: &Path) -> Result<Map<String, Value>, LoadError> {
    let text = read_bounded(path, |path, message| LoadError::InputsIo { path, message })?;
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(invalid(format!(
            "inputs file {} must hold a JSON object",
            path.display()
        ))),
        Err(e) => Err(LoadError::Json {
            message: e.to_string(),
        }),
    }
}

/// The most a workflow or inputs file may hold, as for every document Trellis reads.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Reads a UTF-8 file of at most [`MAX_FILE_BYTES`]; a device or pipe (no length) is read one
/// byte past the limit at most, so `/dev/zero` or an endless pipe cannot exhaust memory.
fn read_bounded(
    path: &Path,
    failure: impl Fn(PathBuf, String) -> LoadError,
) -> Result<String, LoadError> {
    let io = |message: String| failure(path.to_path_buf(), message);
    let file = std::fs::File::open(path).map_err(|e| io(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io(e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(io("it is larger than 16 MiB".to_owned()));
    }
    String::from_utf8(bytes).map_err(|_| io("it is not UTF-8 text".to_owned()))
}

/// Parses workflow JSON text; `workflow_dir` is where relative script paths resolve.
pub fn load_workflow_str(text: &str, workflow_dir: PathBuf) -> Result<Workflow, LoadError> {
    let document: Value = serde_json::from_str(text).map_err(|e| LoadError::Json {
        message: e.to_string(),
    })?;
    parse_workflow(&document, workflow_dir)
}

/// Builds a [`Workflow`] from an already parsed JSON document.
pub fn parse_workflow(document: &Value, workflow_dir: PathBuf) -> Result<Workflow, LoadError> {
    let root = document
        .as_object()
        .ok_or_else(|| invalid("workflow root must be a JSON object"))?;
    check_keys(root, ROOT_KEYS, "workflow root")?;
    let version = root.get("version").cloned().unwrap_or(Value::Null);
    if !is_version_three(&version) {
        return Err(invalid(format!(
            "unsupported workflow version {}, expected 3",
            py_repr(&version)
        )));
    }
    let meta = match root.get("meta") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(invalid("workflow.meta must be an object")),
    };
    let nodes = match root.get("nodes") {
        Some(Value::Object(m)) if !m.is_empty() => parse_nodes(m, "workflow.nodes", false)?,
        _ => return Err(invalid("workflow.nodes must be a non-empty object")),
    };
    let edges = parse_edges(root.get("edges"), "workflow.edges")?;
    let conditional_edges =
        parse_conditional_edges(root.get("conditional_edges"), "workflow.conditional_edges")?;
    let mut subgraphs = IndexMap::new();
    match root.get("subgraphs") {
        None => {}
        Some(Value::Object(raw)) => {
            for (name, value) in raw {
                let sg = value
                    .as_object()
                    .ok_or_else(|| invalid(format!("subgraph '{name}' must be an object")))?;
                subgraphs.insert(name.clone(), parse_subgraph(name, sg)?);
            }
        }
        Some(_) => return Err(invalid("workflow.subgraphs must be an object")),
    }
    Ok(Workflow {
        version,
        meta,
        nodes,
        edges,
        conditional_edges,
        subgraphs,
        workflow_dir,
    })
}

fn check_keys(
    object: &Map<String, Value>,
    allowed: &[&str],
    location: &str,
) -> Result<(), LoadError> {
    let mut extras: Vec<&str> = object
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect();
    if extras.is_empty() {
        return Ok(());
    }
    extras.sort_unstable();
    let mut sorted_allowed = allowed.to_vec();
    sorted_allowed.sort_unstable();
    Err(invalid(format!(
        "{location} has unknown fields {}; allowed: {}",
        py_list(&extras),
        py_list(&sorted_allowed)
    )))
}

fn parse_subgraph(name: &str, raw: &Map<String, Value>) -> Result<SubgraphDef, LoadError> {
    let loc = format!("subgraph '{name}'");
    check_keys(raw, SUBGRAPH_KEYS, &loc)?;
    let skill = match raw
        .get("skill")
        .filter(|v| !v.is_null())
        .or_else(|| raw.get("agent"))
    {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(invalid(format!(
                "{loc} requires a string 'skill' or 'agent' field"
            )));
        }
    };
    let mut inputs = IndexMap::new();
    match raw.get("inputs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (input, ty) in m {
                let ty = ty.as_str().ok_or_else(|| {
                    invalid(format!("{loc}.inputs.{input} must be a type-name string"))
                })?;
                inputs.insert(input.clone(), ty.to_string());
            }
        }
        Some(_) => return Err(invalid(format!("{loc}.inputs must be an object"))),
    }
    let mut outputs = IndexMap::new();
    match raw.get("outputs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (output, value) in m {
                let reference = as_ref(value).ok_or_else(|| {
                    invalid(format!(
                        "{loc}.outputs.{output} must be a {{'$ref': '...'}} object binding to an internal node field"
                    ))
                })?;
                outputs.insert(output.clone(), reference);
            }
        }
        Some(_) => return Err(invalid(format!("{loc}.outputs must be an object"))),
    }
    let nodes = match raw.get("nodes") {
        Some(Value::Object(m)) if !m.is_empty() => parse_nodes(m, &format!("{loc}.nodes"), true)?,
        _ => return Err(invalid(format!("{loc}.nodes must be a non-empty object"))),
    };
    let edges = parse_edges(raw.get("edges"), &format!("{loc}.edges"))?;
    let conditional_edges = parse_conditional_edges(
        raw.get("conditional_edges"),
        &format!("{loc}.conditional_edges"),
    )?;
    let exit_raw = raw.get("exit").and_then(Value::as_object).ok_or_else(|| {
        invalid(format!(
            "{loc}.exit must be an object with router_field/success_values"
        ))
    })?;
    if exit_raw.contains_key("values") {
        return Err(invalid(format!(
            "{loc}.exit uses the legacy 'values' key, which is no longer supported: list the success exits in \
             'success_values' and name the failure exit in the sibling 'on_error' field \
             (tools/rewrite_workflow_json.py --exit-split <path> rewrites it)"
        )));
    }
    let exit_loc = format!("{loc}.exit");
    check_keys(exit_raw, EXIT_KEYS, &exit_loc)?;
    let router_field = optional_string(
        exit_raw.get("router_field"),
        &format!("{exit_loc}.router_field"),
    )?;
    let success_values = match exit_raw.get("success_values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                invalid(format!(
                    "{exit_loc}.success_values must be a list of strings"
                ))
            })?,
        Some(_) => {
            return Err(invalid(format!(
                "{exit_loc}.success_values must be a list of strings"
            )));
        }
    };
    let on_error = match raw.get("on_error") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(invalid(format!(
                "{loc}.on_error must be a string or absent"
            )));
        }
    };
    Ok(SubgraphDef {
        skill,
        inputs,
        outputs,
        nodes,
        edges,
        conditional_edges,
        exit: ExitDecl {
            router_field,
            success_values,
        },
        on_error,
    })
}

fn optional_string(value: Option<&Value>, loc: &str) -> Result<Option<String>, LoadError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("{loc} must be a string or null"))),
    }
}

fn parse_edges(value: Option<&Value>, loc: &str) -> Result<Vec<(String, String)>, LoadError> {
    let items = match value {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(invalid(format!("{loc} must be a list of [src, dst] pairs"))),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.as_array().map(Vec::as_slice) {
            Some([Value::String(a), Value::String(b)]) => Ok((a.clone(), b.clone())),
            _ => Err(invalid(format!(
                "{loc}[{i}] must be a [src, dst] pair of strings, got {}",
                py_repr(item)
            ))),
        })
        .collect()
}

fn parse_conditional_edges(
    value: Option<&Value>,
    loc: &str,
) -> Result<IndexMap<String, ConditionalEdge>, LoadError> {
    let raw = match value {
        None => return Ok(IndexMap::new()),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(invalid(format!(
                "{loc} must be an object keyed by source node"
            )));
        }
    };
    let mut out = IndexMap::new();
    for (source, spec) in raw {
        let entry_loc = format!("{loc}.{source}");
        let spec = spec
            .as_object()
            .ok_or_else(|| invalid(format!("{entry_loc} must be an object")))?;
        check_keys(spec, COND_KEYS, &entry_loc)?;
        let router_field = optional_string(
            spec.get("router_field"),
            &format!("{entry_loc}.router_field"),
        )?;
        let mapping_raw = match spec.get("mapping") {
            Some(Value::Object(m)) if !m.is_empty() => m,
            _ => {
                return Err(invalid(format!(
                    "{entry_loc}.mapping must be a non-empty object"
                )));
            }
        };
        let mut mapping = IndexMap::new();
        for (key, target) in mapping_raw {
            let target = target
                .as_str()
                .ok_or_else(|| invalid(format!("{entry_loc}.mapping must map string→string")))?;
            mapping.insert(key.clone(), target.to_string());
        }
        out.insert(
            source.clone(),
            ConditionalEdge {
                router_field,
                mapping,
            },
        );
    }
    Ok(out)
}

fn parse_nodes(
    raw: &Map<String, Value>,
    loc: &str,
    in_subgraph: bool,
) -> Result<IndexMap<String, NodeDef>, LoadError> {
    if in_subgraph && raw.contains_key(IN) {
        let sg_loc = loc.strip_suffix(".nodes").unwrap_or(loc);
        return Err(invalid(format!(
            "{sg_loc} cannot contain a node named 'in' (reserved for bound inputs)"
        )));
    }
    let mut nodes = IndexMap::new();
    for (name, value) in raw {
        let node_loc = format!("{loc}.{name}");
        let object = value
            .as_object()
            .ok_or_else(|| invalid(format!("{node_loc} must be an object")))?;
        if name == START || name == END {
            return Err(invalid(format!(
                "{node_loc} uses reserved virtual name {}",
                py_str_repr(name)
            )));
        }
        nodes.insert(name.clone(), parse_node(object, &node_loc)?);
    }
    Ok(nodes)
}

fn parse_node(raw: &Map<String, Value>, loc: &str) -> Result<NodeDef, LoadError> {
    let type_value = raw.get("type").cloned().unwrap_or(Value::Null);
    if let Some(legacy @ ("service" | "skill" | "policy")) = type_value.as_str() {
        return Err(invalid(format!(
            "{loc} uses retired type '{legacy}'; rewrite it as {{\"type\": \"tool\", \"tool\": \"<flat_name>\"}} \
             (connector methods become 'robot.<method>', atomic skills use the skill name, learned policies the policy name)"
        )));
    }
    check_keys(raw, NODE_KEYS, loc)?;
    let node_type = type_value
        .as_str()
        .and_then(NodeType::parse)
        .ok_or_else(|| {
            invalid(format!(
                "{loc} has invalid type {}; expected one of {}",
                py_repr(&type_value),
                py_list(&NodeType::ALL)
            ))
        })?;
    let streaming = raw.get("streaming").is_some_and(truthy);
    if streaming && !matches!(node_type, NodeType::Tool | NodeType::Script) {
        return Err(invalid(format!(
            "{loc} sets streaming=true but has type '{}'; only tool and script nodes may stream",
            node_type.as_str()
        )));
    }
    let mut inputs = IndexMap::new();
    match raw.get("inputs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (key, value) in m {
                inputs.insert(key.clone(), parse_input_value(value));
            }
        }
        Some(_) => return Err(invalid(format!("{loc}.inputs must be an object"))),
    }
    let mut node = NodeDef {
        node_type,
        inputs,
        streaming,
        script: raw.get("script").filter(|v| !v.is_null()).cloned(),
        tool: raw.get("tool").filter(|v| !v.is_null()).cloned(),
        subgraph_ref: None,
        status: None,
        recovery: Vec::new(),
    };
    match node_type {
        NodeType::End => {
            node.status = Some(match raw.get("status").and_then(Value::as_str) {
                Some("success") => EndStatus::Success,
                Some("failure") => EndStatus::Failure,
                _ => {
                    let got = raw.get("status").cloned().unwrap_or(Value::Null);
                    return Err(invalid(format!(
                        "{loc} (type=end) requires status 'success' or 'failure', got {}",
                        py_repr(&got)
                    )));
                }
            });
            node.recovery = parse_recovery(raw.get("recovery"), loc)?;
        }
        NodeType::Subgraph => match raw.get("ref").and_then(Value::as_str) {
            Some(r) if !r.is_empty() => node.subgraph_ref = Some(r.to_string()),
            _ => {
                return Err(invalid(format!(
                    "{loc} (type=subgraph) requires a string 'ref' field"
                )));
            }
        },
        NodeType::Router
            if raw
                .get("script")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty) =>
        {
            return Err(invalid(format!(
                "{loc} (type=router) requires a 'script' field naming the routing function"
            )));
        }
        NodeType::Tool if node.tool.is_none() => {
            return Err(invalid(format!(
                "{loc} (type=tool) requires a 'tool' field"
            )));
        }
        NodeType::Script if node.script.is_none() => {
            return Err(invalid(format!(
                "{loc} (type=script) requires a 'script' field"
            )));
        }
        _ => {}
    }
    Ok(node)
}

fn parse_recovery(value: Option<&Value>, loc: &str) -> Result<Vec<ToolCall>, LoadError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(invalid(format!("{loc}.recovery must be a list"))),
    };
    let mut calls = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let entry_loc = format!("{loc}.recovery[{i}]");
        let entry = item
            .as_object()
            .ok_or_else(|| invalid(format!("{entry_loc} must be an object")))?;
        if entry.contains_key("service") || entry.contains_key("method") {
            return Err(invalid(format!(
                "{entry_loc} uses the legacy service/method form; recovery entries now name a tool \
                 ({{\"tool\": \"robot.<method>\", \"inputs\": {{...}}}}); run the tool-name migration script"
            )));
        }
        check_keys(entry, RECOVERY_KEYS, &entry_loc)?;
        let tool = match entry.get("tool").and_then(Value::as_str) {
            Some(t) if !t.is_empty() => t.to_string(),
            _ => {
                return Err(invalid(format!(
                    "{entry_loc} requires a non-empty string 'tool'"
                )));
            }
        };
        let inputs = match entry.get("inputs") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(invalid(format!("{entry_loc}.inputs must be an object"))),
        };
        calls.push(ToolCall { tool, inputs });
    }
    Ok(calls)
}

/// Python truthiness of a JSON value (the reference uses `bool(raw.get("streaming"))`).
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// A value is a `$ref` iff it is an object with exactly one key `$ref` holding a string.
pub fn as_ref(value: &Value) -> Option<Ref> {
    let object = value.as_object()?;
    if object.len() != 1 {
        return None;
    }
    object.get("$ref").and_then(Value::as_str).map(|path| Ref {
        path: path.to_string(),
    })
}

/// Parses an input value: refs recognised at the top and inside (nested) lists only.
pub fn parse_input_value(value: &Value) -> InputValue {
    if let Some(reference) = as_ref(value) {
        return InputValue::Ref(reference);
    }
    match value {
        Value::Array(items) if items.iter().any(contains_ref) => {
            InputValue::List(items.iter().map(parse_input_value).collect())
        }
        other => InputValue::Literal(other.clone()),
    }
}

fn contains_ref(value: &Value) -> bool {
    as_ref(value).is_some()
        || value
            .as_array()
            .is_some_and(|items| items.iter().any(contains_ref))
}
