//! Trace writer: `dag_trace.json` plus `node_data/<id>/` files, flushed as the run goes.

use crate::model::{END, NodeDef, NodeType, START, Workflow};
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

fn now_epoch() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// Last dotted segment, made safe as a path component.
fn path_segment(text: &str) -> String {
    let last = text.rsplit('.').next().unwrap_or(text);
    last.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '#') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A node id made safe as a directory name (ids hold only `.`-joined names in practice).
fn id_dir(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c == '/' || c == '\\' || c == '\0' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

struct NodeRecord {
    record: Map<String, Value>,
    started: Option<Instant>,
    /// A visit is open between its start and its (single) close.
    open: bool,
}

#[derive(Default)]
struct TraceState {
    nodes: IndexMap<String, NodeRecord>,
    edges: Vec<Value>,
    events: Vec<Value>,
    visits: IndexMap<String, u32>,
}

impl TraceState {
    fn event(&mut self, event_type: &str, name: &str, status: Option<&str>, detail: Value) {
        let node_id = self
            .nodes
            .get(name)
            .and_then(|n| n.record.get("id").cloned());
        let seq = self.events.len();
        self.events.push(json!({
            "seq": seq,
            "event_type": event_type,
            "timestamp": now_epoch(),
            "node_id": node_id,
            "node_name": name,
            "status": status,
            "detail": detail,
        }));
    }
}

/// How often `dag_trace.json` is rewritten while nodes finish; rewriting after every node
/// would make long traced runs quadratic in the trace size.
const FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// Writes one run's trace directory.
pub(crate) struct TraceWriter {
    dir: PathBuf,
    state: Mutex<TraceState>,
    last_flush: Mutex<Option<Instant>>,
}

impl TraceWriter {
    /// Creates the directory.
    pub(crate) fn create(dir: &Path) -> std::io::Result<TraceWriter> {
        std::fs::create_dir_all(dir)?;
        Ok(TraceWriter {
            dir: dir.to_path_buf(),
            state: Mutex::new(TraceState::default()),
            last_flush: Mutex::new(None),
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TraceState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers top-level nodes, then each subgraph's as `<sg>.<node>`, and their edges.
    pub(crate) fn register_topology(&self, workflow: &Workflow) {
        let mut state = self.lock();
        let register = |state: &mut TraceState, name: String, node: &NodeDef| {
            let id = format!("n_{:04}", state.nodes.len());
            let (service, method) = match node.node_type {
                NodeType::Tool => (Value::Null, node.tool.clone().unwrap_or(Value::Null)),
                _ => (Value::Null, Value::Null),
            };
            let mut record = Map::new();
            for (key, value) in [
                ("id", json!(id)),
                ("name", json!(name)),
                ("node_type", json!(node.node_type.as_str())),
                ("service", service),
                ("method", method),
                ("script", node.script.clone().unwrap_or(Value::Null)),
                ("started_at", Value::Null),
                ("finished_at", Value::Null),
                ("duration_ms", Value::Null),
                ("status", json!("pending")),
                ("condition", Value::Null),
                ("condition_result", Value::Null),
                ("error_message", Value::Null),
                ("has_inputs", json!(false)),
                ("has_output", json!(false)),
                ("assets", json!([])),
                ("checkpoints", json!([])),
                ("visits", json!(0)),
            ] {
                record.insert(key.to_string(), value);
            }
            state.nodes.insert(
                name.clone(),
                NodeRecord {
                    record,
                    started: None,
                    open: false,
                },
            );
            state.event(
                "node_registered",
                &name,
                Some("pending"),
                json!({"node_type": node.node_type.as_str()}),
            );
        };
        for (name, node) in &workflow.nodes {
            register(&mut state, name.clone(), node);
        }
        for (sg_name, sg) in &workflow.subgraphs {
            for (name, node) in &sg.nodes {
                register(&mut state, format!("{sg_name}.{name}"), node);
            }
        }
        let add_edges = |state: &mut TraceState, prefix: &str, pairs: Vec<(&str, &str)>| {
            for (src, dst) in pairs {
                if src == START || dst == END || dst == START || src == END {
                    continue;
                }
                let from = format!("{prefix}{src}");
                let to = format!("{prefix}{dst}");
                let id_of = |n: &str| state.nodes.get(n).and_then(|r| r.record.get("id").cloned());
                let (from_id, to_id) = (id_of(&from), id_of(&to));
                state.edges.push(json!({
                    "from": from_id.clone().unwrap_or_else(|| json!(from)),
                    "to": to_id.clone().unwrap_or_else(|| json!(to)),
                    "from_id": from_id, "to_id": to_id.clone(),
                    "from_name": from, "to_name": to,
                }));
                state.event(
                    "edge_registered",
                    &from,
                    None,
                    json!({"from_name": from, "to_name": to, "to_id": to_id}),
                );
            }
        };
        let pairs =
            |edges: &'_ [(String, String)],
             cond: &'_ IndexMap<String, crate::model::ConditionalEdge>| {
                let mut out: Vec<(String, String)> = edges.to_vec();
                for (src, ce) in cond {
                    out.extend(ce.mapping.values().map(|t| (src.clone(), t.clone())));
                }
                out
            };
        let top = pairs(&workflow.edges, &workflow.conditional_edges);
        add_edges(
            &mut state,
            "",
            top.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect(),
        );
        for (sg_name, sg) in &workflow.subgraphs {
            let inner = pairs(&sg.edges, &sg.conditional_edges);
            let prefix = format!("{sg_name}.");
            add_edges(
                &mut state,
                &prefix,
                inner
                    .iter()
                    .map(|(a, b)| (a.as_str(), b.as_str()))
                    .collect(),
            );
        }
    }

    /// Copies `workflow.json` and `scripts/` beside the trace once (skipped if already present).
    pub(crate) fn copy_workflow(&self, workflow_dir: &Path) {
        let source = workflow_dir.join("workflow.json");
        let target = self.dir.join("workflow.json");
        if source.is_file() && !target.exists() && source != target {
            let _ = std::fs::copy(&source, &target);
        }
        let scripts = workflow_dir.join("scripts");
        let scripts_target = self.dir.join("scripts");
        if scripts.is_dir() && !scripts_target.exists() && scripts != scripts_target {
            let _ = copy_dir(&scripts, &scripts_target, 0);
        }
    }

    /// Opens a new visit of `id`; returns its 0-based index.
    pub(crate) fn start_node(&self, id: &str) -> u32 {
        let mut state = self.lock();
        let visit = {
            let counter = state.visits.entry(id.to_string()).or_insert(0);
            *counter += 1;
            *counter - 1
        };
        if let Some(node) = state.nodes.get_mut(id) {
            node.started = Some(Instant::now());
            node.open = true;
            node.record.insert("started_at".into(), json!(now_epoch()));
            node.record.insert("finished_at".into(), Value::Null);
            node.record.insert("status".into(), json!("running"));
            node.record.insert("visits".into(), json!(visit + 1));
        }
        state.event("node_started", id, Some("running"), json!({}));
        visit
    }

    fn write_visit_file(&self, id: &str, visit: u32, file: &str, value: &Value) {
        let base = self.dir.join("node_data").join(id_dir(id));
        let text = serde_json::to_string_pretty(value).unwrap_or_default();
        for dir in [base.clone(), base.join("iters").join(format!("{visit:03}"))] {
            if std::fs::create_dir_all(&dir).is_ok() {
                let _ = std::fs::write(dir.join(file), &text);
            }
        }
    }

    pub(crate) fn record_inputs(&self, id: &str, visit: u32, inputs: &Map<String, Value>) {
        self.write_visit_file(
            id,
            visit,
            "resolved_inputs.json",
            &Value::Object(inputs.clone()),
        );
        let mut state = self.lock();
        if let Some(node) = state.nodes.get_mut(id) {
            node.record.insert("has_inputs".into(), json!(true));
        }
        let keys: Vec<&String> = inputs.keys().collect();
        state.event(
            "inputs_recorded",
            id,
            None,
            json!({"asset_count": 0, "keys": keys}),
        );
    }

    pub(crate) fn record_output(&self, id: &str, visit: u32, output: &Value) {
        self.write_visit_file(id, visit, "output.json", output);
        let mut state = self.lock();
        if let Some(node) = state.nodes.get_mut(id) {
            node.record.insert("has_output".into(), json!(true));
        }
        state.event("output_recorded", id, None, json!({"asset_count": 0}));
    }

    /// Closes the current visit of `id` as ok or error; a second close of one visit is ignored.
    pub(crate) fn finish_node(&self, id: &str, error: Option<&str>) {
        let mut state = self.lock();
        let mut duration = 0.0;
        if let Some(node) = state.nodes.get_mut(id) {
            if !node.open {
                return;
            }
            node.open = false;
            duration = node
                .started
                .map(|s| round2(s.elapsed().as_secs_f64() * 1000.0))
                .unwrap_or(0.0);
            let status = if error.is_some() { "error" } else { "ok" };
            node.record.insert("finished_at".into(), json!(now_epoch()));
            node.record.insert("duration_ms".into(), json!(duration));
            node.record.insert("status".into(), json!(status));
            node.record.insert("error_message".into(), json!(error));
        }
        if let Some(text) = error {
            state.event("error_recorded", id, Some("error"), json!({"error": text}));
        }
        let status = if error.is_some() { "error" } else { "ok" };
        state.event(
            "node_finished",
            id,
            Some(status),
            json!({"success": error.is_none(), "duration_ms": duration}),
        );
    }

    /// Counts a visit of a node that is never started as a body (a subgraph call site).
    pub(crate) fn count_visit(&self, id: &str, visit: u32) {
        if let Some(node) = self.lock().nodes.get_mut(id) {
            node.record.insert("visits".into(), json!(visit + 1));
        }
    }

    /// Appends the checkpoint results of one subgraph visit to the call site's record.
    pub(crate) fn record_checkpoints(
        &self,
        id: &str,
        visit: u32,
        results: &[crate::checkpoint::CheckpointResult],
    ) {
        let mut state = self.lock();
        let entries: Vec<Value> = results
            .iter()
            .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
            .collect();
        if let Some(node) = state.nodes.get_mut(id)
            && let Some(Value::Array(list)) = node.record.get_mut("checkpoints")
        {
            list.extend(entries);
        }
        for result in results {
            state.event(
                "checkpoint_evaluated",
                id,
                Some(if result.passed { "ok" } else { "error" }),
                json!({"visit": visit, "name": result.name, "passed": result.passed,
                       "eval_error": result.eval_error}),
            );
        }
    }

    /// Writes `stream_reads/<seq>_<stream>/` for one read of the observation stream.
    pub(crate) fn record_stream_read(
        &self,
        id: &str,
        seq: u32,
        stream: &str,
        value: &Value,
        sampled_at: f64,
    ) {
        let dir = self
            .dir
            .join("node_data")
            .join(id_dir(id))
            .join("stream_reads")
            .join(format!("{seq:03}_{}", path_segment(stream)));
        if std::fs::create_dir_all(&dir).is_ok() {
            let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
            let _ = std::fs::write(dir.join("value.json"), pretty(value));
            let _ = std::fs::write(
                dir.join("meta.json"),
                pretty(&json!({"stream": stream, "sampled_at": sampled_at})),
            );
        }
        self.lock().event(
            "stream_read",
            id,
            None,
            json!({"seq": seq, "stream": stream, "sampled_at": sampled_at}),
        );
    }

    /// Writes `calls/<seq>_<tool>/` for a successful `ctx.tool` sub-call.
    pub(crate) fn record_subcall(
        &self,
        id: &str,
        seq: u32,
        tool: &str,
        request: &Value,
        response: &Value,
    ) {
        let dir = self
            .dir
            .join("node_data")
            .join(id_dir(id))
            .join("calls")
            .join(format!("{seq:03}_{}", path_segment(tool)));
        if std::fs::create_dir_all(&dir).is_ok() {
            let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
            let _ = std::fs::write(dir.join("request.json"), pretty(request));
            let _ = std::fs::write(
                dir.join("request.meta.json"),
                pretty(&json!({"tool": tool})),
            );
            let _ = std::fs::write(dir.join("response.json"), pretty(response));
        }
        self.lock().event(
            "subcall_recorded",
            id,
            None,
            json!({"seq": seq, "tool": tool}),
        );
    }

    /// Rewrites `dag_trace.json` unless it was rewritten less than a flush interval ago; the
    /// run's final flush is unconditional, so nothing is lost.
    pub(crate) fn flush_if_due(&self) {
        let due = {
            let mut last = self.last_flush.lock().unwrap_or_else(|p| p.into_inner());
            let due = last.is_none_or(|at| at.elapsed() >= FLUSH_INTERVAL);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if due {
            self.flush();
        }
    }

    /// Rewrites `dag_trace.json` (write to a temporary file, then rename).
    pub(crate) fn flush(&self) {
        let document = {
            let state = self.lock();
            let nodes: Vec<Value> = state
                .nodes
                .values()
                .map(|n| Value::Object(n.record.clone()))
                .collect();
            json!({"nodes": nodes, "edges": state.edges, "events": state.events})
        };
        let text = serde_json::to_string_pretty(&document).unwrap_or_default();
        let tmp = self.dir.join("dag_trace.json.tmp");
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, self.dir.join("dag_trace.json"));
        }
    }
}

const MAX_COPY_DEPTH: usize = 16;

fn copy_dir(from: &Path, to: &Path, depth: usize) -> std::io::Result<()> {
    if depth > MAX_COPY_DEPTH {
        return Ok(());
    }
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let file_type = entry.file_type()?;
        let target = to.join(entry.file_name());
        if file_type.is_dir() {
            copy_dir(&entry.path(), &target, depth + 1)?;
        } else if file_type.is_file() {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
