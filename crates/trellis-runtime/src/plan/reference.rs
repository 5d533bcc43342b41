//! Fields of the reference's runtime plans (Zeroshot 10.19.1) for features Trellis does not
//! have: accepted with the reference's own ranges so that an existing plan works unchanged,
//! and named by admission as ignored.

use serde::{Deserialize, Serialize};
use trellis_graph::NodeName;

use super::error::PlanError;

/// The reference's active memory settings (lessons learned across runs). Trellis has no
/// active memory: a plan may carry them, and admission says they are ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActiveMemory {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_bytes: Option<u32>,
}

/// The reference's global agents (a postmortem agent after a run). Trellis has none: a plan
/// may carry them, and admission says they are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GlobalAgents {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postmortem: Option<Postmortem>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Postmortem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_node: Option<NodeName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u32>,
}

/// The ranges the reference accepts for the fields Trellis ignores.
pub(crate) fn check_reference_fields(
    memory: Option<&ActiveMemory>,
    agents: Option<&GlobalAgents>,
) -> Result<(), PlanError> {
    if memory
        .and_then(|m| m.budget_bytes)
        .is_some_and(|b| !(1..=16_384).contains(&b))
    {
        return Err(PlanError::Malformed(
            "memory budgetBytes must be in 1..=16384".into(),
        ));
    }
    let postmortem = agents.and_then(|a| a.postmortem.as_ref());
    if postmortem
        .and_then(|p| p.timeout_ms)
        .is_some_and(|t| !(1..=600_000).contains(&t))
    {
        return Err(PlanError::Malformed(
            "postmortem timeoutMs must be in 1..=600000".into(),
        ));
    }
    Ok(())
}
