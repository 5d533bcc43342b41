//! A caller's connection values as a request carries them (`"connections": {NAME: value}`),
//! read without ever echoing a value (not in a parse error, not in debug output), and the
//! answer naming the variables a run requires.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use trellis_runtime::{Connections, ServerConnections};
use utoipa::ToSchema;

use crate::problem::Problem;

/// Values of environment variables the caller sends for its run: `{NAME: value}`, exactly
/// for variables the target reported as required. Held in memory only.
#[derive(Default)]
pub struct CallerValues(BTreeMap<String, String>);

impl std::fmt::Debug for CallerValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl<'de> Deserialize<'de> for CallerValues {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        // Read as any JSON first: serde's own type errors would quote the offending value.
        let Value::Object(map) = Value::deserialize(deserializer)? else {
            return Err(D::Error::custom(
                "`connections` is an object of variable names to string values",
            ));
        };
        let mut values = BTreeMap::new();
        for (name, value) in map {
            let Value::String(value) = value else {
                return Err(D::Error::custom(format!(
                    "the value of connection {name} is not a string"
                )));
            };
            values.insert(name, value);
        }
        Ok(Self(values))
    }
}

impl CallerValues {
    /// The caller's values over what `server` lets this host supply; a refusal names the
    /// variable, never its value.
    pub fn connections(self, server: &ServerConnections) -> Result<Connections, Problem> {
        Connections::from_caller(self.0, server.clone())
            .map_err(|error| Problem::new(StatusCode::BAD_REQUEST, error.code(), error.to_string()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The environment variables a run requires: the caller reads exactly these from its own
/// environment and sends their values with the submission (or resumption).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Requirements {
    /// Variable names, sorted.
    pub connections: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_value_is_refused_without_quoting_it() {
        let error = serde_json::from_str::<CallerValues>(r#"{"KEY": 5}"#).unwrap_err();
        assert!(error.to_string().contains("KEY"));
        let error = serde_json::from_str::<CallerValues>(r#""canary-value""#).unwrap_err();
        assert!(!error.to_string().contains("canary"));
        let values = serde_json::from_str::<CallerValues>(r#"{"KEY": "canary-value"}"#).unwrap();
        assert_eq!(format!("{values:?}"), r#"["KEY"]"#);
    }
}
