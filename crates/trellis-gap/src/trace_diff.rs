//! `trace diff`: aligns two trace directories by node name and visit, reports the reference's
//! agreement rates, and finds the first divergence in A's execution order — a visit missing on
//! one side, a different status, or the first differing input or output value.

use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Largest `dag_trace.json` or per-visit file read.
pub const MAX_TRACE_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Why a trace could not be compared.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TraceDiffError {
    #[error("dag_trace.json not found at {0}")]
    Missing(PathBuf),
    #[error("cannot read {path}: {message}")]
    Unreadable { path: PathBuf, message: String },
}

/// How one node compares across the traces (joined by name, as the reference does).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeAgreement {
    pub name: String,
    pub a_status: Option<String>,
    pub b_status: Option<String>,
    pub a_visits: u64,
    pub b_visits: u64,
    /// Both `ok`, or both not.
    pub verdict_agree: bool,
    pub status_agree: bool,
}

/// The first place where the runs parted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    pub node: String,
    /// 0-based visit of the node.
    pub visit: u32,
    /// `missing_in_a`, `missing_in_b`, `status`, `inputs` or `outputs`.
    pub kind: String,
    /// Where inside the inputs or outputs the values first differ (`$.pose.x`).
    pub path: Option<String>,
    pub a: Option<Value>,
    pub b: Option<Value>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceDiff {
    pub a_dir: String,
    pub b_dir: String,
    pub matched_count: usize,
    pub verdict_agreement_rate: f64,
    pub status_agreement_rate: f64,
    pub first_divergence: Option<Divergence>,
    pub a_only: Vec<String>,
    pub b_only: Vec<String>,
    pub nodes: Vec<NodeAgreement>,
}

impl TraceDiff {
    /// 0: the runs agree; 1: they diverge; 2: no node is in both traces.
    pub fn exit_code(&self) -> u8 {
        if self.matched_count == 0 {
            2
        } else if self.first_divergence.is_some()
            || self.nodes.iter().any(|n| !n.verdict_agree && in_both(n))
        {
            1
        } else {
            0
        }
    }

    /// A short report for terminals.
    pub fn render(&self) -> String {
        let mut out = format!(
            "A: {}\nB: {}\nmatched: {}  verdict-agreement: {:.2}%  status-agreement: {:.2}%\n",
            self.a_dir,
            self.b_dir,
            self.matched_count,
            self.verdict_agreement_rate * 100.0,
            self.status_agreement_rate * 100.0
        );
        if !self.a_only.is_empty() {
            out.push_str(&format!("only in A: {}\n", self.a_only.join(", ")));
        }
        if !self.b_only.is_empty() {
            out.push_str(&format!("only in B: {}\n", self.b_only.join(", ")));
        }
        match &self.first_divergence {
            None => out.push_str("first divergence: none — every visit agrees\n"),
            Some(d) => {
                out.push_str(&format!(
                    "first divergence: {} visit {} ({})",
                    d.node,
                    d.visit + 1,
                    d.kind.replace('_', " ")
                ));
                if let Some(path) = &d.path {
                    out.push_str(&format!(" at {path}"));
                }
                out.push('\n');
                let show = |v: &Option<Value>| {
                    v.as_ref()
                        .map(|v| truncate(&v.to_string()))
                        .unwrap_or_else(|| "—".into())
                };
                out.push_str(&format!("  A: {}\n  B: {}\n", show(&d.a), show(&d.b)));
            }
        }
        out
    }
}

fn in_both(node: &NodeAgreement) -> bool {
    node.a_status.is_some() && node.b_status.is_some()
}

fn truncate(text: &str) -> String {
    const SHOWN: usize = 200;
    match text.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// One trace directory, read.
struct Trace {
    dir: PathBuf,
    nodes: Vec<Value>,
    /// `(node, visit)` in the order the visits started.
    visits: Vec<(String, u32)>,
    /// Status each visit finished with.
    finished: HashMap<(String, u32), String>,
}

fn read_json(path: &Path) -> Result<Value, TraceDiffError> {
    let unreadable = |message: String| TraceDiffError::Unreadable {
        path: path.to_path_buf(),
        message,
    };
    let size = std::fs::metadata(path)
        .map_err(|e| unreadable(e.to_string()))?
        .len();
    if size > MAX_TRACE_FILE_BYTES {
        return Err(unreadable(format!(
            "larger than {MAX_TRACE_FILE_BYTES} bytes"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| unreadable(e.to_string()))
}

impl Trace {
    /// Reads `dir/dag_trace.json` (or the file itself).
    fn load(path: &Path) -> Result<Trace, TraceDiffError> {
        let (dir, file) = if path.is_dir() {
            (path.to_path_buf(), path.join("dag_trace.json"))
        } else {
            (
                path.parent().map(Path::to_path_buf).unwrap_or_default(),
                path.to_path_buf(),
            )
        };
        if !file.is_file() {
            return Err(TraceDiffError::Missing(file));
        }
        let document = read_json(&file)?;
        let array = |key: &str| {
            document
                .get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let mut visits = Vec::new();
        let mut finished = HashMap::new();
        let mut started: HashMap<String, u32> = HashMap::new();
        let mut open: HashMap<String, u32> = HashMap::new();
        for event in array("events") {
            let name = event.get("node_name").and_then(Value::as_str).unwrap_or("");
            match event.get("event_type").and_then(Value::as_str) {
                Some("node_started") => {
                    let count = started.entry(name.to_string()).or_insert(0);
                    visits.push((name.to_string(), *count));
                    open.insert(name.to_string(), *count);
                    *count += 1;
                }
                Some("node_finished") => {
                    if let Some(visit) = open.remove(name) {
                        let status = event.get("status").and_then(Value::as_str).unwrap_or("");
                        finished.insert((name.to_string(), visit), status.to_string());
                    }
                }
                _ => {}
            }
        }
        Ok(Trace {
            dir,
            nodes: array("nodes"),
            visits,
            finished,
        })
    }

    /// `node_data/<node>/iters/<NNN>/<file>` of one visit, when recorded.
    fn visit_file(&self, node: &str, visit: u32, file: &str) -> Option<Value> {
        let path = self
            .dir
            .join("node_data")
            .join(node)
            .join("iters")
            .join(format!("{visit:03}"))
            .join(file);
        read_json(&path).ok()
    }
}

/// Where two JSON values first differ (depth-first, object keys in A's order then B's extras).
pub fn first_difference(a: &Value, b: &Value) -> Option<(String, Option<Value>, Option<Value>)> {
    // An explicit stack instead of recursion: values come from files of any depth.
    let mut stack: Vec<(String, Option<&Value>, Option<&Value>)> =
        vec![("$".to_string(), Some(a), Some(b))];
    while let Some((path, a, b)) = stack.pop() {
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let mut keys: Vec<&String> = x.keys().collect();
                keys.extend(y.keys().filter(|k| !x.contains_key(*k)));
                for key in keys.into_iter().rev() {
                    stack.push((format!("{path}.{key}"), x.get(key), y.get(key)));
                }
            }
            (Some(Value::Array(x)), Some(Value::Array(y))) => {
                for index in (0..x.len().max(y.len())).rev() {
                    stack.push((format!("{path}[{index}]"), x.get(index), y.get(index)));
                }
            }
            (x, y) if x == y => {}
            (x, y) => return Some((path, x.cloned(), y.cloned())),
        }
    }
    None
}

/// Compares the traces in `a` and `b` (directories or `dag_trace.json` files).
pub fn diff_traces(a: &Path, b: &Path) -> Result<TraceDiff, TraceDiffError> {
    let (ta, tb) = (Trace::load(a)?, Trace::load(b)?);
    let index = |t: &Trace| -> HashMap<String, Value> {
        t.nodes
            .iter()
            .filter_map(|n| Some((n.get("name")?.as_str()?.to_string(), n.clone())))
            .collect()
    };
    let (ia, ib) = (index(&ta), index(&tb));
    let mut names: Vec<String> = Vec::new();
    for node in ta.nodes.iter().chain(tb.nodes.iter()) {
        if let Some(name) = node.get("name").and_then(Value::as_str)
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_string());
        }
    }
    let field = |n: Option<&Value>, key: &str| n.and_then(|n| n.get(key)).cloned();
    let nodes: Vec<NodeAgreement> = names
        .iter()
        .map(|name| {
            let (na, nb) = (ia.get(name), ib.get(name));
            let status =
                |n: Option<&Value>| field(n, "status").and_then(|s| s.as_str().map(str::to_string));
            let (sa, sb) = (status(na), status(nb));
            let both = na.is_some() && nb.is_some();
            NodeAgreement {
                name: name.clone(),
                verdict_agree: both
                    && (sa.as_deref() == Some("ok")) == (sb.as_deref() == Some("ok")),
                status_agree: both && sa == sb,
                a_status: sa,
                b_status: sb,
                a_visits: field(na, "visits").and_then(|v| v.as_u64()).unwrap_or(0),
                b_visits: field(nb, "visits").and_then(|v| v.as_u64()).unwrap_or(0),
            }
        })
        .collect();
    let matched: Vec<&NodeAgreement> = nodes.iter().filter(|n| in_both(n)).collect();
    let rate = |agree: fn(&NodeAgreement) -> bool| {
        if matched.is_empty() {
            0.0
        } else {
            let agreeing = matched.iter().filter(|n| agree(n)).count() as f64;
            ((agreeing / matched.len() as f64) * 10_000.0).round() / 10_000.0
        }
    };
    let mut a_only: Vec<String> = ia
        .keys()
        .filter(|k| !ib.contains_key(*k))
        .cloned()
        .collect();
    let mut b_only: Vec<String> = ib
        .keys()
        .filter(|k| !ia.contains_key(*k))
        .cloned()
        .collect();
    a_only.sort();
    b_only.sort();
    Ok(TraceDiff {
        a_dir: ta.dir.display().to_string(),
        b_dir: tb.dir.display().to_string(),
        matched_count: matched.len(),
        verdict_agreement_rate: rate(|n| n.verdict_agree),
        status_agreement_rate: rate(|n| n.status_agree),
        first_divergence: first_divergence(&ta, &tb),
        a_only,
        b_only,
        nodes,
    })
}

fn first_divergence(a: &Trace, b: &Trace) -> Option<Divergence> {
    let divergence = |node: &str, visit: u32, kind: &str| Divergence {
        node: node.to_string(),
        visit,
        kind: kind.to_string(),
        path: None,
        a: None,
        b: None,
    };
    let in_b: std::collections::HashSet<&(String, u32)> = b.visits.iter().collect();
    for key in &a.visits {
        let (node, visit) = (key.0.as_str(), key.1);
        if !in_b.contains(key) {
            return Some(divergence(node, visit, "missing_in_b"));
        }
        let (sa, sb) = (a.finished.get(key), b.finished.get(key));
        if sa != sb {
            return Some(Divergence {
                a: sa.map(|s| Value::String(s.clone())),
                b: sb.map(|s| Value::String(s.clone())),
                ..divergence(node, visit, "status")
            });
        }
        for (file, kind) in [
            ("resolved_inputs.json", "inputs"),
            ("output.json", "outputs"),
        ] {
            let (va, vb) = (
                a.visit_file(node, visit, file),
                b.visit_file(node, visit, file),
            );
            let (va, vb) = (va.unwrap_or(Value::Null), vb.unwrap_or(Value::Null));
            if let Some((path, x, y)) = first_difference(&va, &vb) {
                return Some(Divergence {
                    path: Some(path),
                    a: x,
                    b: y,
                    ..divergence(node, visit, kind)
                });
            }
        }
    }
    let in_a: std::collections::HashSet<&(String, u32)> = a.visits.iter().collect();
    b.visits
        .iter()
        .find(|key| !in_a.contains(key))
        .map(|(node, visit)| divergence(node, *visit, "missing_in_a"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn first_difference_names_the_path() {
        let a = json!({"pose": {"x": 1, "y": [1, 2]}, "ok": true});
        let b = json!({"pose": {"x": 1, "y": [1, 3]}, "ok": false});
        assert_eq!(
            first_difference(&a, &b),
            Some(("$.pose.y[1]".to_string(), Some(json!(2)), Some(json!(3))))
        );
        assert_eq!(first_difference(&a, &a), None);
        let missing = first_difference(&json!({"a": 1}), &json!({"a": 1, "b": 2}));
        assert_eq!(missing, Some(("$.b".to_string(), None, Some(json!(2)))));
    }
}
