//! Template session scopes under a derived plan: the nodes the reference runs with
//! `node_instance` sessions get them unless the plan states a scope.

use serde_json::{Value, json};
use trellis_agents::binding::SessionScope;

use super::*;

fn scopes(template: &str, lane: Value) -> Vec<(String, SessionScope)> {
    let workspace = tempfile::tempdir().unwrap();
    let admitted = admit(AdmitRequest {
        graph: GraphSource::Template {
            name: template.to_owned(),
            delivery: TemplateDelivery::default(),
        },
        input: InputSource::Task("Why is startup slow?".to_owned()),
        plan: PlanSource::Uniform(ConfigSource::Document(lane)),
        workspace: Some(workspace.path().to_path_buf()),
    })
    .unwrap();
    admitted
        .plan
        .unwrap()
        .nodes
        .iter()
        .filter_map(|(name, binding)| match binding {
            Binding::Agent(agent) => Some((name.to_string(), agent.session_scope)),
            _ => None,
        })
        .collect()
}

fn kept(scopes: &[(String, SessionScope)]) -> Vec<&str> {
    scopes
        .iter()
        .filter(|(_, scope)| *scope == SessionScope::NodeInstance)
        .map(|(name, _)| name.as_str())
        .collect()
}

#[test]
fn template_repair_loops_keep_their_sessions_as_in_the_reference() {
    let lane = json!({"harness": "claude", "provider": "anthropic", "model": "m"});
    let software = scopes("software-change", lane.clone());
    assert_eq!(kept(&software), ["worker"]);
    assert!(
        software.len() > 1,
        "the reviewers are agents too: {software:?}"
    );
    let research = scopes("auto-research", lane.clone());
    let mut research = kept(&research);
    research.sort_unstable();
    assert_eq!(
        research,
        ["experiment", "planner", "research_scout", "staging"]
    );
    assert!(kept(&scopes("single-worker", lane.clone())).is_empty());

    // A scope the plan states wins, as it does in the reference.
    let mut stated = lane;
    stated["sessionScope"] = json!("execution");
    assert!(kept(&scopes("software-change", stated.clone())).is_empty());
    stated["sessionScope"] = json!("node_instance");
    let all = scopes("software-change", stated);
    assert_eq!(kept(&all).len(), all.len());
}
