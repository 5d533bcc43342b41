//! RuntimePlan: which harness runs each executable node, admitted against the graph before
//! anything runs. Plans name environment variables; they never hold secret values.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_agents::binding::is_env_name;
use trellis_agents::{
    AgentBinding, Binding, CommandBinding, DeliveryBinding, Effort, SessionScope,
};
pub use trellis_agents::{HarnessKind, Isolation, Network, Provider};
use trellis_graph::{GraphNode, GraphSpec, NodeName, WorkerRef};
use trellis_verify::builtin::{BuiltinKind, builtin_kind};

use super::error::PlanError;
use super::reference::check_reference_fields;
pub use super::reference::{ActiveMemory, GlobalAgents};

/// Recorded and reported; the host decides what it means (the reference's five sizes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunSize {
    Tiny,
    Small,
    #[default]
    Medium,
    Standard,
    Large,
}

/// Spending limits for a whole run; exceeding one ends the run `budget_exhausted`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// An exact plan: one binding per executable node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimePlan {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<HarnessKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    #[serde(default)]
    pub size: RunSize,
    pub nodes: BTreeMap<NodeName, Binding>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_memory: Option<ActiveMemory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_agents: Option<GlobalAgents>,
    /// Where the steps run (`none`, `sandbox`); the host's `--isolation` may only make it
    /// stricter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// `none` takes the network from sandboxed steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
}

/// The uniform shape: one agent lane for every executable (delivery nodes get git delivery).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UniformAgentPlan {
    pub harness: HarnessKind,
    pub provider: Provider,
    pub model: String,
    #[serde(default)]
    pub size: RunSize,
    #[serde(default)]
    pub effort: Option<Effort>,
    #[serde(default)]
    pub session_scope: SessionScope,
    #[serde(default)]
    pub connections: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    #[serde(default)]
    pub budget: Option<Budget>,
    #[serde(default)]
    pub active_memory: Option<ActiveMemory>,
    #[serde(default)]
    pub global_agents: Option<GlobalAgents>,
    #[serde(default)]
    pub isolation: Option<Isolation>,
    #[serde(default)]
    pub network: Option<Network>,
}

/// The uniform shape for the exec harness: one command for every executable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UniformCommandPlan {
    pub kind: CommandKind,
    pub command: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub connections: Vec<String>,
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    #[serde(default)]
    pub size: RunSize,
    #[serde(default)]
    pub budget: Option<Budget>,
    #[serde(default)]
    pub isolation: Option<Isolation>,
    #[serde(default)]
    pub network: Option<Network>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandKind {
    Command,
}

/// True for the built-in git and comment delivery workers.
pub fn is_delivery_worker(worker: &WorkerRef) -> bool {
    builtin_kind(worker) == Some(BuiltinKind::Delivery)
}

fn executables(graph: &GraphSpec) -> Vec<&GraphNode> {
    let mut found = Vec::new();
    graph.root.walk(&mut |node| {
        if node.executable().is_some() {
            found.push(node);
        }
    });
    found
}

/// The names of the executables that run a built-in delivery worker, found in one walk (a
/// lookup per node would make a plan quadratic in the graph's size).
fn delivery_nodes(graph: &GraphSpec) -> BTreeSet<&NodeName> {
    executables(graph)
        .into_iter()
        .filter(|n| {
            n.executable()
                .is_some_and(|e| is_delivery_worker(&e.worker))
        })
        .map(GraphNode::name)
        .collect()
}

fn default_delivery() -> Binding {
    Binding::GitDelivery(DeliveryBinding {
        connections: BTreeMap::from([("github".to_owned(), vec!["GH_TOKEN".to_owned()])]),
        pull_request_feedback: Default::default(),
        remote: None,
    })
}

impl RuntimePlan {
    /// Reads an exact plan (`--runtime-config`). A reference plan's `comment_delivery`
    /// binding is Trellis's delivery binding (which serves every delivery worker).
    pub fn from_json(value: &Value) -> Result<Self, PlanError> {
        let mut value = value.clone();
        if let Some(nodes) = value.get_mut("nodes").and_then(Value::as_object_mut) {
            for binding in nodes.values_mut() {
                if binding.get("kind").and_then(Value::as_str) == Some("comment_delivery") {
                    binding["kind"] = Value::from("git_delivery");
                }
            }
        }
        let plan: Self =
            serde_json::from_value(value).map_err(|e| PlanError::Malformed(e.to_string()))?;
        check_reference_fields(plan.active_memory.as_ref(), plan.global_agents.as_ref())?;
        Ok(plan)
    }

    /// One notice per field a reference plan may carry that Trellis accepts without the
    /// feature behind it.
    pub fn ignored_fields(&self) -> Vec<String> {
        let lane = match (self.harness, self.provider) {
            (Some(h), Some(p)) => format!("{}/{}", h.as_str(), p.as_str()),
            _ => "lane".to_owned(),
        };
        let mut notices = Vec::new();
        if self.active_memory.is_some() {
            notices.push(
                "runtime plan field activeMemory is ignored: Trellis has no active memory".into(),
            );
        }
        if self.global_agents.is_some() {
            notices.push(
                "runtime plan field globalAgents is ignored: Trellis runs no global agents".into(),
            );
        }
        for (node, binding) in &self.nodes {
            if let Binding::Agent(AgentBinding {
                lane: Some(own), ..
            }) = binding
            {
                notices.push(format!(
                    "runtime plan field lane of node {node} ({}/{}) is ignored: Trellis runs \
                     every agent node on the plan's {lane}",
                    own.harness.as_str(),
                    own.provider.as_str()
                ));
            }
        }
        notices
    }

    /// Expands a uniform plan (`--uniform-runtime-config`): an agent lane
    /// (`{"harness","provider","model",…}`) or a command (`{"kind":"command","command":[…]}`).
    pub fn uniform(value: &Value, graph: &GraphSpec) -> Result<Self, PlanError> {
        let is_command = value.get("kind").and_then(Value::as_str) == Some("command");
        let mut nodes = BTreeMap::new();
        if is_command {
            let u: UniformCommandPlan = serde_json::from_value(value.clone())
                .map_err(|e| PlanError::Malformed(e.to_string()))?;
            let binding = Binding::Command(CommandBinding {
                command: u.command,
                cwd: u.cwd,
                env: u.env,
                connections: u.connections,
                idle_timeout_ms: u.idle_timeout_ms,
            });
            for node in executables(graph) {
                nodes.insert(node.name().clone(), binding.clone());
            }
            let mut plan = Self {
                harness: None,
                provider: None,
                size: u.size,
                nodes,
                budget: u.budget,
                active_memory: None,
                global_agents: None,
                isolation: u.isolation,
                network: u.network,
            };
            // Delivery workers are Trellis's own: they keep git delivery under a command plan.
            let delivery = delivery_nodes(graph);
            plan.nodes.retain(|name, _| !delivery.contains(name));
            plan.fill_delivery_defaults(graph);
            return Ok(plan);
        }
        let u: UniformAgentPlan = serde_json::from_value(value.clone())
            .map_err(|e| PlanError::Malformed(e.to_string()))?;
        check_reference_fields(u.active_memory.as_ref(), u.global_agents.as_ref())?;
        let agent = Binding::Agent(AgentBinding {
            model: u.model,
            effort: u.effort,
            session_scope: u.session_scope,
            connections: u.connections,
            idle_timeout_ms: u.idle_timeout_ms,
            lane: None,
        });
        for node in executables(graph) {
            let delivery = node
                .executable()
                .is_some_and(|e| is_delivery_worker(&e.worker));
            let binding = if delivery {
                default_delivery()
            } else {
                agent.clone()
            };
            nodes.insert(node.name().clone(), binding);
        }
        Ok(Self {
            harness: Some(u.harness),
            provider: Some(u.provider),
            size: u.size,
            nodes,
            budget: u.budget,
            active_memory: u.active_memory,
            global_agents: u.global_agents,
            isolation: u.isolation,
            network: u.network,
        })
    }

    /// Checks the plan against the graph: exactly one binding per executable, none for other
    /// nodes, agent nodes carry instructions, delivery bindings only on delivery workers.
    pub fn admit(&self, graph: &GraphSpec) -> Result<(), PlanError> {
        let nodes = executables(graph);
        for node in &nodes {
            let exec = node
                .executable()
                .ok_or_else(|| PlanError::UnexpectedBinding(node.name().clone()))?;
            let name = node.name();
            let binding = self
                .nodes
                .get(name)
                .ok_or_else(|| PlanError::MissingBinding(name.clone()))?;
            check_binding(name, binding)?;
            let delivery = is_delivery_worker(&exec.worker);
            match binding {
                Binding::Agent(_) if delivery => {
                    return Err(PlanError::AgentOnDeliveryWorker(name.clone()));
                }
                Binding::Agent(_) if exec.instructions.is_none() => {
                    return Err(PlanError::AgentWithoutInstructions(name.clone()));
                }
                Binding::Agent(agent) => {
                    let (Some(harness), Some(provider)) = (self.harness, self.provider) else {
                        return Err(PlanError::HarnessMissing(name.clone()));
                    };
                    let own = agent.lane.map(|l| (l.harness, l.provider));
                    for (harness, provider) in [(harness, provider)].into_iter().chain(own) {
                        if !harness.accepts(provider) {
                            return Err(PlanError::UnsupportedProvider {
                                harness: harness.as_str().to_owned(),
                                provider: provider.as_str().to_owned(),
                            });
                        }
                    }
                }
                Binding::GitDelivery(_) if !delivery || !matches!(node, GraphNode::Verifier(_)) => {
                    return Err(PlanError::DeliveryBindingOnNonDelivery(name.clone()));
                }
                _ => {}
            }
        }
        let executable_names: BTreeSet<&NodeName> = nodes.iter().map(|n| n.name()).collect();
        if let Some(extra) = self.nodes.keys().find(|k| !executable_names.contains(k)) {
            return Err(PlanError::UnexpectedBinding(extra.clone()));
        }
        // A postmortem's source node must be a bound executable, as the reference checks.
        let postmortem = self
            .global_agents
            .as_ref()
            .and_then(|a| a.postmortem.as_ref());
        if let Some(source) = postmortem.and_then(|p| p.source_node.as_ref())
            && !self.nodes.contains_key(source)
        {
            return Err(PlanError::MissingBinding(source.clone()));
        }
        Ok(())
    }

    /// Gives every built-in delivery node without a binding the default git delivery binding,
    /// as templates own their delivery step (an exact plan may leave it out).
    pub fn fill_delivery_defaults(&mut self, graph: &GraphSpec) {
        for name in delivery_nodes(graph) {
            if !self.nodes.contains_key(name) {
                self.nodes.insert(name.clone(), default_delivery());
            }
        }
    }

    /// Turns off routing pull-request review feedback back into the change loop
    /// (`--no-pr-feedback`) for every delivery binding.
    pub fn ignore_pull_request_feedback(&mut self) {
        for binding in self.nodes.values_mut() {
            if let Binding::GitDelivery(delivery) = binding {
                delivery.pull_request_feedback =
                    trellis_agents::binding::PullRequestFeedback::Ignore;
            }
        }
    }

    /// Gives the agent bindings of `nodes` `node_instance` sessions (a template's repair loops
    /// keep their conversation, as in the reference).
    pub fn keep_sessions_of(&mut self, nodes: &[&str]) {
        for (name, binding) in &mut self.nodes {
            if let Binding::Agent(agent) = binding
                && nodes.contains(&name.as_str())
            {
                agent.session_scope = SessionScope::NodeInstance;
            }
        }
    }

    /// Every environment variable name any binding asks for, sorted and unique.
    pub fn connection_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .nodes
            .values()
            .flat_map(|b| b.connection_names().into_iter().map(str::to_owned))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    pub fn has_agents(&self) -> bool {
        self.nodes.values().any(|b| matches!(b, Binding::Agent(_)))
    }
}

fn check_binding(node: &NodeName, binding: &Binding) -> Result<(), PlanError> {
    let invalid = |problem: String| PlanError::InvalidBinding {
        node: node.clone(),
        problem,
    };
    for name in binding.connection_names() {
        if !is_env_name(name) {
            return Err(invalid(format!(
                "connection name {name:?} is not an environment variable name"
            )));
        }
    }
    match binding {
        Binding::Command(c) => {
            if c.command.is_empty() || c.command[0].is_empty() {
                return Err(invalid("command must name a program".into()));
            }
            // Checked against a stand-in workspace: the rule depends only on `cwd` itself.
            c.working_directory(std::path::Path::new("/workspace"))
                .map_err(invalid)?;
            if let Some(bad) = c.env.keys().find(|k| !is_env_name(k)) {
                return Err(invalid(format!(
                    "env name {bad:?} is not an environment variable name"
                )));
            }
        }
        Binding::Agent(a) => {
            if a.model.chars().any(char::is_control) || a.model.len() > 2048 {
                return Err(invalid(
                    "model must be at most 2048 non-control characters".into(),
                ));
            }
        }
        Binding::GitDelivery(_) => {}
    }
    if binding.idle_timeout_ms() == Some(0) {
        return Err(invalid("idleTimeoutMs must be at least 1".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn graph() -> GraphSpec {
        let step = |name: &str, worker: &str, instructions: Option<&str>| {
            let mut node = json!({"kind":"step","name":name,"worker":worker,"input":{"kind":"null"},
                "output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"attempts":1});
            if let Some(text) = instructions {
                node["instructions"] = json!(text);
            }
            node
        };
        GraphSpec::parse(
            &json!({"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},
                "policy":{"policy":"p@1","default":"deny"},
                "root":{"kind":"seq","name":"root","state":{"kind":"null"},"promotedStatePaths":[],
                  "children":[step("plain", "command.plain@1", None),
                              step("agent", "builtin.agent.worker@1", Some("Do it.")),
                              {"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}]}}),
            &Default::default(),
        )
        .unwrap()
    }

    #[test]
    fn a_command_plan_needs_no_harness() {
        let g = graph();
        let plan = RuntimePlan::uniform(&json!({"kind":"command","command":["true"]}), &g).unwrap();
        assert_eq!(plan.nodes.len(), 2);
        plan.admit(&g).unwrap();
        assert!(!plan.has_agents());
    }

    #[test]
    fn every_executable_needs_exactly_one_binding() {
        let g = graph();
        let missing = RuntimePlan::from_json(
            &json!({"nodes":{"plain":{"kind":"command","command":["true"]}}}),
        )
        .unwrap();
        assert_eq!(
            missing.admit(&g),
            Err(PlanError::MissingBinding(NodeName::new("agent").unwrap()))
        );
        let extra = RuntimePlan::from_json(&json!({"nodes":{
            "plain":{"kind":"command","command":["true"]},"agent":{"kind":"command","command":["true"]},
            "done":{"kind":"command","command":["true"]}}})).unwrap();
        assert_eq!(
            extra.admit(&g),
            Err(PlanError::UnexpectedBinding(NodeName::new("done").unwrap()))
        );
    }

    #[test]
    fn agent_bindings_need_instructions_and_a_lane() {
        let g = graph();
        let no_lane = RuntimePlan::from_json(&json!({"nodes":{
            "plain":{"kind":"command","command":["true"]},"agent":{"kind":"agent","model":"m"}}}))
        .unwrap();
        assert!(matches!(
            no_lane.admit(&g),
            Err(PlanError::HarnessMissing(_))
        ));
        let uninstructed = RuntimePlan::uniform(
            &json!({"harness":"claude","provider":"anthropic","model":"m"}),
            &g,
        )
        .unwrap();
        assert_eq!(
            uninstructed.admit(&g),
            Err(PlanError::AgentWithoutInstructions(
                NodeName::new("plain").unwrap()
            ))
        );
        let wrong_lane =
            RuntimePlan::from_json(&json!({"harness":"copilot","provider":"anthropic","nodes":{
            "plain":{"kind":"command","command":["true"]},"agent":{"kind":"agent","model":"m"}}}))
            .unwrap();
        assert!(matches!(
            wrong_lane.admit(&g),
            Err(PlanError::UnsupportedProvider { .. })
        ));
    }

    #[test]
    fn a_command_cwd_outside_the_workspace_is_refused_at_admission() {
        for cwd in ["/tmp", "../elsewhere", "a/../../b"] {
            let plan = RuntimePlan::uniform(
                &json!({"kind": "command", "command": ["true"], "cwd": cwd}),
                &graph(),
            )
            .unwrap();
            let refusal = plan.admit(&graph()).unwrap_err();
            assert!(
                matches!(&refusal, PlanError::InvalidBinding { problem, .. }
                    if problem.contains("relative path inside the workspace")),
                "{cwd}: {refusal}"
            );
        }
        let inside = RuntimePlan::uniform(
            &json!({"kind": "command", "command": ["true"], "cwd": "sub/dir"}),
            &graph(),
        )
        .unwrap();
        inside.admit(&graph()).unwrap();
    }

    #[test]
    fn a_reference_comment_delivery_binding_is_a_delivery_binding() {
        let plan = RuntimePlan::from_json(&json!({"harness": "claude", "provider": "anthropic",
            "size": "tiny", "nodes": {"post": {"kind": "comment_delivery",
                                                "connections": {"github": ["GH_TOKEN"]}}}}))
        .unwrap();
        assert!(matches!(
            &plan.nodes[&NodeName::new("post").unwrap()],
            Binding::GitDelivery(d) if d.connections["github"] == ["GH_TOKEN"]
        ));
        assert_eq!(plan.size, RunSize::Tiny);
    }

    #[test]
    fn plans_are_closed_and_name_only_variables() {
        assert!(RuntimePlan::from_json(&json!({"nodes":{},"secret":"x"})).is_err());
        let bad_env = RuntimePlan::from_json(&json!({"nodes":{
            "plain":{"kind":"command","command":["true"],"connections":["not-a-name"]},
            "agent":{"kind":"command","command":["true"]}}}))
        .unwrap();
        assert!(matches!(
            bad_env.admit(&graph()),
            Err(PlanError::InvalidBinding { .. })
        ));
    }
}
