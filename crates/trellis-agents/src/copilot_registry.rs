//! Copilot's provider registry, as the reference names it: a declared `COPILOT_PROVIDERS_CONFIG`
//! connection whose value is the registry JSON itself or the path of a `providers.json`, with
//! named BYOK `providers` (endpoint, `apiKey`, `bearerToken` or `apiKeyCommand`) and the `models`
//! they serve. It is checked here and handed to the headless session; its values never reach a
//! log line.
//!
//! Copilot's named providers take no `apiKeyCommand` of their own: such a provider is handed
//! over with `hasBearerTokenProvider`, so Copilot asks `providerToken.getToken` before every
//! request, and Trellis runs the command each time — an expiring token is fetched fresh.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_process::{ProcessEnd, ProcessLimits, ProcessObserver, ProcessSpec, Redactor, Stream};

use crate::protocol::Launch;

/// Longest a token command may take.
const TOKEN_COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// The connection variable naming the registry.
pub const PROVIDERS_CONFIG_ENV: &str = "COPILOT_PROVIDERS_CONFIG";
/// Largest registry accepted.
const MAX_REGISTRY_BYTES: usize = 64 * 1024;
/// Most providers, and most models, one registry may list.
const MAX_ENTRIES: usize = 64;

/// The parts of a registry the session takes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Registry {
    pub providers: Value,
    pub models: Value,
    /// Provider name → the command printing its current token.
    pub token_commands: Vec<(String, String)>,
}

/// The registry the binding declares, if it declares one.
pub(crate) fn read_registry(launch: &Launch<'_>) -> Result<Option<Registry>, String> {
    let declared = launch
        .binding
        .connections
        .values()
        .flatten()
        .any(|name| name == PROVIDERS_CONFIG_ENV);
    if !declared {
        return Ok(None);
    }
    let Some(value) = launch.request.environment.get(PROVIDERS_CONFIG_ENV) else {
        return Err(format!("{PROVIDERS_CONFIG_ENV} has no value"));
    };
    let text = if value.trim_start().starts_with('{') {
        value.to_owned()
    } else {
        read_file(value.trim())?
    };
    parse_registry(&text).map(Some)
}

fn read_file(path: &str) -> Result<String, String> {
    let metadata = std::fs::metadata(path).map_err(|e| {
        format!("the Copilot provider registry in {PROVIDERS_CONFIG_ENV} could not be read: {e}")
    })?;
    if metadata.len() > MAX_REGISTRY_BYTES as u64 {
        return Err(oversized());
    }
    std::fs::read_to_string(path).map_err(|e| {
        format!("the Copilot provider registry in {PROVIDERS_CONFIG_ENV} could not be read: {e}")
    })
}

fn oversized() -> String {
    format!("the Copilot provider registry is over {MAX_REGISTRY_BYTES} bytes")
}

/// Checks the registry's shape: named providers with a base URL, models naming a listed
/// provider. The error never quotes the registry (it may hold keys).
pub(crate) fn parse_registry(text: &str) -> Result<Registry, String> {
    if text.len() > MAX_REGISTRY_BYTES {
        return Err(oversized());
    }
    let invalid = |why: &str| format!("the Copilot provider registry is invalid: {why}");
    let registry: Value = serde_json::from_str(text).map_err(|_| invalid("it is not JSON"))?;
    let providers = registry
        .get("providers")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("`providers` must be an array"))?;
    let models = match registry.get("models") {
        None => &Vec::new(),
        Some(models) => models
            .as_array()
            .ok_or_else(|| invalid("`models` must be an array"))?,
    };
    if providers.is_empty() || providers.len() > MAX_ENTRIES || models.len() > MAX_ENTRIES {
        return Err(invalid(&format!(
            "it needs 1 to {MAX_ENTRIES} providers and at most {MAX_ENTRIES} models"
        )));
    }
    let mut names = Vec::new();
    let mut token_commands = Vec::new();
    let mut handed = Vec::new();
    for provider in providers {
        let name = provider.get("name").and_then(Value::as_str).unwrap_or("");
        let base_url = provider
            .get("baseUrl")
            .and_then(Value::as_str)
            .unwrap_or("");
        if name.is_empty() || base_url.is_empty() {
            return Err(invalid("every provider needs a `name` and a `baseUrl`"));
        }
        if names.contains(&name) {
            return Err(invalid(&format!("provider {name:?} is listed twice")));
        }
        names.push(name);
        let mut provider = provider.clone();
        if let Some(object) = provider.as_object_mut()
            && let Some(command) = object.remove("apiKeyCommand")
        {
            let command = command
                .as_str()
                .filter(|c| !c.trim().is_empty())
                .ok_or_else(|| invalid("`apiKeyCommand` must be a non-empty string"))?;
            token_commands.push((name.to_owned(), command.to_owned()));
            object.insert("hasBearerTokenProvider".into(), Value::Bool(true));
        }
        handed.push(provider);
    }
    for model in models {
        let id = model.get("id").and_then(Value::as_str).unwrap_or("");
        let provider = model.get("provider").and_then(Value::as_str).unwrap_or("");
        if id.is_empty() {
            return Err(invalid("every model needs an `id`"));
        }
        if !names.contains(&provider) {
            return Err(invalid(&format!(
                "model {id:?} references a missing provider"
            )));
        }
    }
    Ok(Registry {
        providers: Value::Array(handed),
        models: Value::Array(models.clone()),
        token_commands,
    })
}

/// Ignores a token command's output lines: its stdout is the token, its stderr may quote it.
struct Quiet;

impl ProcessObserver for Quiet {
    fn line(&mut self, _stream: Stream, _line: &str) {}
}

/// Runs a provider's `apiKeyCommand` (with `sh -c`, in `cwd`, with `env`) and returns the
/// token it printed. The error says how it failed, never what it printed.
pub(crate) async fn run_token_command(
    command: &str,
    env: &[(String, String)],
    cwd: &Path,
) -> Result<String, String> {
    let spec = ProcessSpec {
        program: "sh".to_owned(),
        args: vec!["-c".to_owned(), command.to_owned()],
        cwd: cwd.to_path_buf(),
        env: env.to_vec(),
        stdin: Vec::new(),
        // The token must come back as printed; it never reaches a log.
        redactor: Redactor::new(Vec::<&str>::new()),
    };
    let limits = ProcessLimits {
        deadline: Some(TOKEN_COMMAND_LIMIT),
        max_stdout_bytes: 64 * 1024,
        ..ProcessLimits::default()
    };
    let report =
        trellis_process::run_process(&spec, &limits, &CancellationToken::new(), &mut Quiet).await;
    match report.end {
        ProcessEnd::Exited { code: 0 } => {
            let token = String::from_utf8_lossy(&report.stdout).trim().to_owned();
            if token.is_empty() {
                Err("the apiKeyCommand printed no token".to_owned())
            } else {
                Ok(token)
            }
        }
        other => Err(format!("the apiKeyCommand {}", other.describe())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn registries_are_checked_without_quoting_their_keys() {
        let good = json!({"providers": [{"name": "corp", "baseUrl": "http://127.0.0.1:1/v1",
            "apiKeyCommand": "corp-token --fresh"}],
            "models": [{"id": "m1", "provider": "corp"}]});
        let registry = parse_registry(&good.to_string()).unwrap();
        assert_eq!(registry.models, json!([{"id": "m1", "provider": "corp"}]));
        // The command stays with Trellis; Copilot is told to ask for a token per request.
        assert_eq!(
            registry.providers,
            json!([{"name": "corp", "baseUrl": "http://127.0.0.1:1/v1", "hasBearerTokenProvider": true}])
        );
        assert_eq!(
            registry.token_commands,
            vec![("corp".to_owned(), "corp-token --fresh".to_owned())]
        );
        let secret = json!({"providers": [{"name": "corp", "baseUrl": "http://x",
            "apiKey": "sk-secret-value"}], "models": [{"id": "m1", "provider": "nope"}]});
        let error = parse_registry(&secret.to_string()).unwrap_err();
        assert!(error.contains("missing provider"), "{error}");
        assert!(!error.contains("sk-secret-value"));
        assert!(parse_registry("{\"providers\": []}").is_err());
        assert!(
            parse_registry("not json sk-secret")
                .unwrap_err()
                .contains("not JSON")
        );
        assert!(parse_registry(&"x".repeat(MAX_REGISTRY_BYTES + 1)).is_err());
    }
}
