//! What a profile is: its definition (the documents a run is made of, never paths), the stored
//! and exported document around it (name, revision, graph identity), and how a run of it
//! becomes an admission request.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::graphspec::admission::{
    AdmitRequest, ConfigSource, GraphSource, InputSource, PlanSource,
};
use crate::shared::profile_error::ProfileError;
use crate::shared::templates::{self, DeliveryMode, TemplateDelivery, TemplateInput};

/// The `format` of a stored or exported profile document.
pub const PROFILE_FORMAT: &str = "trellis.profile/v1";

/// The longest description, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 4096;

/// The task a template profile without a task default is checked with on save: any text
/// builds the template's input, so the check covers everything but the task itself.
const PLACEHOLDER_TASK: &str = "(the task given when the profile runs)";

/// A saved run definition: exactly one of `graph` (a GraphSpec document) and `template`; the
/// template's default task (`taskDefault`) or a default `input`; the runtime `plan` (none: the
/// agent CLI detected when it runs); a description for people.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileDefinition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<ProfileTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_default: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<ProfilePlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A built-in template and the delivery it runs with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileTemplate {
    pub name: String,
    /// None: the template's own default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<DeliveryMode>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_pr_feedback: bool,
}

/// A runtime plan document: `{"exact": PLAN}` (one binding per executable) or `{"uniform":
/// BINDING}` (one binding for every executable).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum ProfilePlan {
    Exact(Value),
    Uniform(Value),
}

/// A stored profile, as `show` and `export` give it and `save --from` reads it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    /// Always [`PROFILE_FORMAT`].
    pub format: String,
    pub name: String,
    /// Starts at 1, one more on every save.
    pub revision: u64,
    pub saved_at_ms: u64,
    /// The SHA-256 identity of the graph the profile ran as when it was saved.
    pub identity: String,
    pub definition: ProfileDefinition,
}

/// One profile as a list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileSummary {
    pub name: String,
    pub revision: u64,
    pub saved_at_ms: u64,
    pub identity: String,
    /// The template it runs, if any (else it holds its own graph).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl Profile {
    pub fn summary(&self) -> ProfileSummary {
        ProfileSummary {
            name: self.name.clone(),
            revision: self.revision,
            saved_at_ms: self.saved_at_ms,
            identity: self.identity.clone(),
            template: self.definition.template.as_ref().map(|t| t.name.clone()),
            description: self.definition.description.clone(),
        }
    }

    /// Reads an exported profile document (`save --from FILE`).
    pub fn from_document(value: Value) -> Result<Self, ProfileError> {
        let profile: Profile = serde_json::from_value(value)
            .map_err(|e| ProfileError::Invalid(format!("not a profile document: {e}")))?;
        if profile.format != PROFILE_FORMAT {
            return Err(ProfileError::Invalid(format!(
                "format {:?} is not {PROFILE_FORMAT:?}",
                profile.format
            )));
        }
        Ok(profile)
    }
}

impl ProfileDefinition {
    /// The rules of a definition's shape (its documents are checked by admission).
    pub fn check(&self) -> Result<(), ProfileError> {
        let invalid = |text: &str| Err(ProfileError::Invalid(text.to_owned()));
        match (&self.graph, &self.template) {
            (Some(_), Some(_)) | (None, None) => {
                return invalid("give exactly one of a graph and a template");
            }
            (Some(_), None) if self.task_default.is_some() => {
                return invalid("a task default goes with a template; a graph takes an input");
            }
            _ => {}
        }
        if self.task_default.is_some() && self.input.is_some() {
            return invalid("give a task default or an input, not both");
        }
        if self
            .task_default
            .as_ref()
            .is_some_and(|t| t.trim().is_empty())
        {
            return invalid("the task default is empty");
        }
        if let Some(description) = &self.description {
            if description.len() > MAX_DESCRIPTION_BYTES {
                return invalid("the description is longer than 4096 bytes");
            }
            if description.chars().any(|c| c.is_control() && c != '\n') {
                return invalid("the description holds a control character");
            }
        }
        Ok(())
    }

    /// The admission request of a run of this profile: `input` (a task, a document, a file)
    /// replaces the profile's default input when given (`InputSource::Default`: not given).
    pub fn admit_request(&self, input: InputSource, workspace: Option<PathBuf>) -> AdmitRequest {
        let input = match input {
            InputSource::Default => self.default_input(),
            given => given,
        };
        AdmitRequest {
            graph: self.graph_source(),
            input,
            plan: match &self.plan {
                None => PlanSource::Detect,
                Some(ProfilePlan::Exact(plan)) => {
                    PlanSource::Exact(ConfigSource::Document(plan.clone()))
                }
                Some(ProfilePlan::Uniform(plan)) => {
                    PlanSource::Uniform(ConfigSource::Document(plan.clone()))
                }
            },
            workspace,
        }
    }

    /// The request a save admits: the profile as it would run with no input given, except
    /// that a template taking a task and given no default is checked with a placeholder task
    /// (the task is the one thing a run of it must add).
    pub fn save_check_request(&self, workspace: PathBuf) -> AdmitRequest {
        let mut request = self.admit_request(InputSource::Default, Some(workspace));
        if let (InputSource::Default, Some(template)) = (&request.input, &self.template)
            && templates::find(&template.name)
                .is_some_and(|t| t.input_source() == TemplateInput::Task)
        {
            request.input = InputSource::Task(PLACEHOLDER_TASK.to_owned());
        }
        request
    }

    fn default_input(&self) -> InputSource {
        match (&self.input, &self.task_default) {
            (Some(document), _) => InputSource::Document(document.clone()),
            (None, Some(task)) => InputSource::Task(task.clone()),
            (None, None) => InputSource::Default,
        }
    }

    fn graph_source(&self) -> GraphSource {
        match (&self.template, &self.graph) {
            (Some(template), _) => GraphSource::Template {
                name: template.name.clone(),
                delivery: TemplateDelivery {
                    mode: template.delivery,
                    ignore_pr_feedback: template.ignore_pr_feedback,
                },
            },
            (None, Some(graph)) => GraphSource::Document(graph.clone()),
            // `check` refuses a definition without either; admission then says what is wrong.
            (None, None) => GraphSource::Document(Value::Null),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_run_input_replaces_the_default_and_the_plan_stays_a_document() {
        let definition = ProfileDefinition {
            template: Some(ProfileTemplate {
                name: "software-change".into(),
                delivery: Some(DeliveryMode::Push),
                ignore_pr_feedback: false,
            }),
            task_default: Some("tidy up".into()),
            plan: Some(ProfilePlan::Uniform(json!({"kind": "command"}))),
            ..ProfileDefinition::default()
        };
        definition.check().unwrap();
        let default = definition.admit_request(InputSource::Default, None);
        assert_eq!(default.input, InputSource::Task("tidy up".into()));
        assert_eq!(
            default.plan,
            PlanSource::Uniform(ConfigSource::Document(json!({"kind": "command"})))
        );
        let given = definition.admit_request(InputSource::Task("other".into()), None);
        assert_eq!(given.input, InputSource::Task("other".into()));
    }

    #[test]
    fn shapes_that_cannot_be_a_run_are_refused() {
        let both = ProfileDefinition {
            graph: Some(json!({})),
            template: Some(ProfileTemplate {
                name: "x".into(),
                delivery: None,
                ignore_pr_feedback: false,
            }),
            ..ProfileDefinition::default()
        };
        assert!(both.check().is_err());
        assert!(ProfileDefinition::default().check().is_err());
        let task_on_graph = ProfileDefinition {
            graph: Some(json!({})),
            task_default: Some("t".into()),
            ..ProfileDefinition::default()
        };
        assert!(task_on_graph.check().is_err());
        let text = json!({"graph": {}, "plan": {"exact": {}, "uniform": {}}});
        assert!(serde_json::from_value::<ProfileDefinition>(text).is_err());
    }
}
