//! Provider access for one execution: which credentials a lane needs, read from the declared
//! connections, and the base environment every agent CLI starts from.
//!
//! Variable names come from the binding's `connections` (by connection key: `gateway`,
//! `openrouter`, `bedrock`, `anthropic`, `openai`, `github`) or the lane's defaults; values
//! come only from the execution's resolved environment and are handed to the CLI through its
//! environment, never through argv or files (the gateway base URL is an endpoint, not a
//! credential, and is the one exception: Codex only accepts it as a `-c` override).

use std::collections::BTreeMap;

use crate::binding::AgentBinding;
use crate::harness::ExecutionRequest;
use crate::lane::Provider;

/// Default variable names of the gateway lane.
pub const GATEWAY_BASE_URL_ENV: &str = "GATEWAY_BASE_URL";
pub const GATEWAY_API_KEY_ENV: &str = "GATEWAY_API_KEY";
/// Longest gateway base URL accepted.
const MAX_BASE_URL_BYTES: usize = 8192;

/// The credentials a lane resolved to.
#[derive(Clone, PartialEq, Eq)]
pub enum LaneAccess {
    /// The CLI's own login, or an API key when one was declared.
    Native {
        api_key: Option<String>,
    },
    /// A caller-owned endpoint; `key_name` is the variable holding `key`.
    Gateway {
        base_url: String,
        key_name: String,
        key: String,
    },
    Openrouter {
        key_name: String,
        key: String,
    },
    Bedrock {
        token: String,
        region: String,
    },
}

impl std::fmt::Debug for LaneAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values stay out of debug output.
        let name = match self {
            Self::Native { .. } => "Native",
            Self::Gateway { .. } => "Gateway",
            Self::Openrouter { .. } => "Openrouter",
            Self::Bedrock { .. } => "Bedrock",
        };
        f.write_str(name)
    }
}

/// Why an execution cannot reach its provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    #[error("connection values are unavailable: {}", .0.join(", "))]
    MissingValues(Vec<String>),
    #[error("the gateway base URL in {name} is not usable: {why}")]
    BadBaseUrl { name: String, why: String },
}

impl AccessError {
    /// Missing values settle `refusal` + `authentication_required`; anything else is a crash.
    pub fn is_missing_credentials(&self) -> bool {
        matches!(self, Self::MissingValues(_))
    }
}

/// Resolves the lane's credentials and checks every declared connection has a value.
pub fn resolve_access(
    provider: Provider,
    binding: &AgentBinding,
    request: &ExecutionRequest,
) -> Result<LaneAccess, AccessError> {
    let declared = declared_names(binding);
    let mut missing: Vec<String> = declared
        .iter()
        .filter(|name| request.environment.get(name).is_none())
        .cloned()
        .collect();
    let mut value = |name: &str| match request.environment.get(name) {
        Some(v) => v.to_owned(),
        None => {
            if !missing.iter().any(|m| m == name) {
                missing.push(name.to_owned());
            }
            String::new()
        }
    };
    let named = |key: &str| binding.connections.get(key).cloned().unwrap_or_default();
    let access = match provider {
        Provider::Anthropic | Provider::Openai | Provider::Github => {
            let (key, default) = match provider {
                Provider::Anthropic => ("anthropic", "ANTHROPIC_API_KEY"),
                Provider::Openai => ("openai", "OPENAI_API_KEY"),
                _ => ("github", "COPILOT_GITHUB_TOKEN"),
            };
            // Native lanes only use a key that the binding declares.
            let name = named(key)
                .into_iter()
                .next()
                .or_else(|| declared.contains(default).then(|| default.to_owned()));
            LaneAccess::Native {
                api_key: name.and_then(|n| request.environment.get(&n).map(str::to_owned)),
            }
        }
        Provider::Gateway => {
            let names = named("gateway");
            let base_name = names
                .iter()
                .find(|n| n.ends_with("URL"))
                .cloned()
                .unwrap_or_else(|| GATEWAY_BASE_URL_ENV.to_owned());
            let key_name = names
                .iter()
                .find(|n| !n.ends_with("URL") && !is_wire_api_name(n))
                .cloned()
                .unwrap_or_else(|| GATEWAY_API_KEY_ENV.to_owned());
            let base_url = value(&base_name);
            let key = value(&key_name);
            if !base_url.is_empty() {
                check_base_url(&base_url).map_err(|why| AccessError::BadBaseUrl {
                    name: base_name.clone(),
                    why,
                })?;
            }
            LaneAccess::Gateway {
                base_url,
                key_name,
                key,
            }
        }
        Provider::Openrouter => {
            let key_name = named("openrouter")
                .into_iter()
                .next()
                .unwrap_or_else(|| "OPENROUTER_API_KEY".to_owned());
            let key = value(&key_name);
            LaneAccess::Openrouter { key_name, key }
        }
        Provider::Bedrock => {
            let names = named("bedrock");
            let region_name = names
                .iter()
                .find(|n| n.contains("REGION"))
                .cloned()
                .unwrap_or_else(|| "AWS_REGION".to_owned());
            let token_name = names
                .iter()
                .find(|n| !n.contains("REGION"))
                .cloned()
                .unwrap_or_else(|| "AWS_BEARER_TOKEN_BEDROCK".to_owned());
            LaneAccess::Bedrock {
                token: value(&token_name),
                region: value(&region_name),
            }
        }
    };
    if missing.is_empty() {
        Ok(access)
    } else {
        missing.sort();
        Err(AccessError::MissingValues(missing))
    }
}

/// A gateway field naming the wire protocol (`GATEWAY_API`, read by the pi lane) rather than
/// the key or the endpoint.
pub fn is_wire_api_name(name: &str) -> bool {
    name.ends_with("_API")
}

/// Every variable name the binding declares.
pub fn declared_names(binding: &AgentBinding) -> std::collections::BTreeSet<String> {
    binding.connections.values().flatten().cloned().collect()
}

/// The declared connection variables with their values, minus names the harness itself
/// controls (`reserved`); the skipped names are returned for a note.
pub fn declared_env(
    binding: &AgentBinding,
    request: &ExecutionRequest,
    reserved: &dyn Fn(&str) -> bool,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut env = BTreeMap::new();
    let mut skipped = Vec::new();
    for name in declared_names(binding) {
        if reserved(&name) {
            skipped.push(name);
        } else if let Some(value) = request.environment.get(&name) {
            env.insert(name, value.to_owned());
        }
    }
    (env.into_iter().collect(), skipped)
}

/// The user's own agent configuration a native lane keeps from the environment it runs in:
/// endpoint settings (a proxy's base URL) and the CLIs' configuration directories. A front end
/// hands their values to the execution's base environment; a declared connection of the same
/// name wins.
pub const AGENT_CONFIG_ENV: [&str; 4] = [
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CONFIG_DIR",
    "OPENAI_BASE_URL",
    "CODEX_HOME",
];

/// Names no declared connection may override, for every CLI.
pub fn is_base_reserved(name: &str) -> bool {
    matches!(name, "PATH" | "HOME" | "TMPDIR" | "LANG")
}

/// `base_env`'s value of `name`.
pub fn base_value<'a>(request: &'a ExecutionRequest, name: &str) -> Option<&'a str> {
    request
        .base_env
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Absolute http(s), a host, no user info, query, fragment, whitespace or backslash.
fn check_base_url(url: &str) -> Result<(), String> {
    if url.len() > MAX_BASE_URL_BYTES {
        return Err(format!("longer than {MAX_BASE_URL_BYTES} bytes"));
    }
    if url
        .chars()
        .any(|c| c.is_whitespace() || c == '\\' || c.is_control())
    {
        return Err("contains whitespace, a backslash or a control character".into());
    }
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or("must start with http:// or https://")?;
    if rest.contains(['?', '#']) {
        return Err("must not have a query or fragment".into());
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.contains('@') {
        return Err("must not carry user info".into());
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Err("has no host".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_checked() {
        assert!(check_base_url("http://127.0.0.1:8080").is_ok());
        assert!(check_base_url("https://gw.example/prefix/v1").is_ok());
        assert!(check_base_url("ftp://x").is_err());
        assert!(check_base_url("http://user:pw@x").is_err());
        assert!(check_base_url("http://x/?q=1").is_err());
        assert!(check_base_url("http:///v1").is_err());
        assert!(check_base_url("http://x/ y").is_err());
    }
}
