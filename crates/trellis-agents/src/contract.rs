//! A node's reply contract (output type, signals, diagnostic) and the mechanical check every
//! reply passes before it may reach the graph.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};
use trellis_graph::{
    EnumLabel, FieldName, GraphNode, PayloadType, VerifierContract, WorkerOutcome,
};

/// What a node must reply: an output, plus signals and a diagnostic for a verifier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeContract {
    pub output: PayloadType,
    pub verifier: Option<VerifierContract>,
}

impl NodeContract {
    /// The contract a graph node declares; `None` for non-executables.
    pub fn of(node: &GraphNode) -> Option<Self> {
        match node {
            GraphNode::Step(step) => Some(Self {
                output: step.output.clone(),
                verifier: None,
            }),
            GraphNode::Verifier(v) => Some(Self {
                output: v.exec.output.clone(),
                verifier: Some(VerifierContract {
                    signals: v.signals.clone(),
                    diagnostic: v.diagnostic.clone(),
                }),
            }),
            _ => None,
        }
    }

    pub fn is_verifier(&self) -> bool {
        self.verifier.is_some()
    }

    /// The contract as shown to agents: `{"kind":"worker","output":…}` or
    /// `{"kind":"verifier","output":…,"signals":…,"diagnostic":…}`.
    pub fn describe(&self) -> Value {
        match &self.verifier {
            None => json!({"kind": "worker", "output": self.output}),
            Some(v) => json!({
                "kind": "verifier",
                "output": self.output,
                "signals": v.signals,
                "diagnostic": v.diagnostic,
            }),
        }
    }

    /// Checks a reply body: for a worker the output value itself; for a verifier exactly
    /// `{"output","signals","diagnostic"}`. Returns the outcome or why the reply is rejected.
    pub fn accept(&self, reply: &Value) -> Result<WorkerOutcome, String> {
        match &self.verifier {
            None => {
                self.output
                    .check_value(reply)
                    .map_err(|e| format!("output: {e}"))?;
                Ok(WorkerOutcome::Verified {
                    output: reply.clone(),
                    artifacts: Vec::new(),
                })
            }
            Some(contract) => {
                let fields = exact_fields(reply, &["output", "signals", "diagnostic"])?;
                let output = &fields["output"];
                self.output
                    .check_value(output)
                    .map_err(|e| format!("output: {e}"))?;
                let signals = check_signals(&contract.signals, &fields["signals"])?;
                let diagnostic = &fields["diagnostic"];
                contract
                    .diagnostic
                    .check_value(diagnostic)
                    .map_err(|e| format!("diagnostic: {e}"))?;
                Ok(WorkerOutcome::Verifier {
                    output: output.clone(),
                    signals,
                    diagnostic: diagnostic.clone(),
                    artifacts: Vec::new(),
                })
            }
        }
    }

    /// Checks the exec harness reply shape: `{"output":…}` for a step, plus `signals` and
    /// `diagnostic` for a verifier.
    pub fn accept_command_reply(&self, reply: &Value) -> Result<WorkerOutcome, String> {
        if self.is_verifier() {
            self.accept(reply)
        } else {
            let fields = exact_fields(reply, &["output"])?;
            self.accept(&fields["output"])
        }
    }
}

/// Requires `value` to be an object with exactly `names` as keys.
fn exact_fields<'a>(value: &'a Value, names: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let object = value.as_object().ok_or_else(|| {
        format!(
            "reply must be a JSON object with fields {}",
            names.join(", ")
        )
    })?;
    if let Some(extra) = object.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(format!("reply has undeclared field {extra}"));
    }
    if let Some(missing) = names.iter().find(|n| !object.contains_key(**n)) {
        return Err(format!("reply is missing field {missing}"));
    }
    Ok(object)
}

fn check_signals(
    declared: &BTreeMap<FieldName, trellis_graph::EnumSet>,
    value: &Value,
) -> Result<BTreeMap<FieldName, EnumLabel>, String> {
    let object = value
        .as_object()
        .ok_or_else(|| "signals must be an object".to_owned())?;
    if let Some(extra) = object.keys().find(|k| !declared.contains_key(k.as_str())) {
        return Err(format!("signals has undeclared signal {extra}"));
    }
    let mut signals = BTreeMap::new();
    for (name, labels) in declared {
        let label = object
            .get(name.as_str())
            .ok_or_else(|| format!("signals is missing signal {name}"))?
            .as_str()
            .ok_or_else(|| format!("signal {name} must be a string label"))?;
        if !labels.contains(label) {
            let allowed: Vec<&str> = labels.iter().map(|l| l.as_str()).collect();
            return Err(format!(
                "signal {name} has label {label}, expected one of {}",
                allowed.join(", ")
            ));
        }
        let label = EnumLabel::new(label).map_err(|e| format!("signal {name}: {e}"))?;
        signals.insert(name.clone(), label);
    }
    Ok(signals)
}

#[cfg(test)]
mod tests {
    use super::*;
    use trellis_graph::JsonPath;

    fn verifier_contract() -> NodeContract {
        let node = GraphNode::parse(
            &json!({"kind":"verifier","name":"v","worker":"w@1","input":{"kind":"null"},
                "output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"attempts":1,
                "signals":{"verdict":["accepted","rejected"]},
                "diagnostic":{"kind":"record","fields":{"message":{"type":{"kind":"string"},"required":true}}}}),
            &JsonPath::root(),
        )
        .unwrap();
        NodeContract::of(&node).unwrap()
    }

    #[test]
    fn verifier_replies_must_match_exactly() {
        let c = verifier_contract();
        let ok =
            json!({"output":null,"signals":{"verdict":"accepted"},"diagnostic":{"message":"fine"}});
        assert!(matches!(c.accept(&ok), Ok(WorkerOutcome::Verifier { .. })));
        let bad_label =
            json!({"output":null,"signals":{"verdict":"maybe"},"diagnostic":{"message":""}});
        assert!(c.accept(&bad_label).unwrap_err().contains("label maybe"));
        let extra = json!({"output":null,"signals":{"verdict":"accepted"},"diagnostic":{"message":""},"x":1});
        assert!(c.accept(&extra).unwrap_err().contains("undeclared field x"));
        let missing = json!({"output":null,"signals":{},"diagnostic":{"message":""}});
        assert!(
            c.accept(&missing)
                .unwrap_err()
                .contains("missing signal verdict")
        );
    }

    #[test]
    fn command_step_replies_wrap_the_output() {
        let c = NodeContract {
            output: PayloadType::Integer,
            verifier: None,
        };
        assert!(c.accept_command_reply(&json!({"output": 3})).is_ok());
        assert!(c.accept_command_reply(&json!({"output": "x"})).is_err());
        assert!(c.accept_command_reply(&json!(3)).is_err());
    }
}
