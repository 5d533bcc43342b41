//! Copilot's single BYOK provider from declared `COPILOT_PROVIDER_*` connection fields, the
//! names the reference (and the CLI's own environment) uses: the session's `provider`, sent over
//! the JSON-RPC pipe, since headless sessions ignore those variables in the environment.

use serde_json::{Map, Value, json};

use crate::protocol::Launch;

/// The prefix every field of the provider shares.
pub const PROVIDER_PREFIX: &str = "COPILOT_PROVIDER_";

/// The session's `provider`, when the binding declares `COPILOT_PROVIDER_BASE_URL`; an error
/// names a field that is declared but unusable (never its value).
pub(crate) fn declared_provider(launch: &Launch<'_>) -> Result<Option<Value>, String> {
    let declared: Vec<&str> = launch
        .binding
        .connections
        .values()
        .flatten()
        .map(String::as_str)
        .filter(|name| name.starts_with(PROVIDER_PREFIX))
        .collect();
    if declared.is_empty() {
        return Ok(None);
    }
    let value = |field: &str| {
        let name = format!("{PROVIDER_PREFIX}{field}");
        declared
            .contains(&name.as_str())
            .then(|| launch.request.environment.get(&name))
            .flatten()
    };
    let Some(base_url) = value("BASE_URL") else {
        return Err(format!(
            "the Copilot provider fields need {PROVIDER_PREFIX}BASE_URL"
        ));
    };
    let mut provider = Map::new();
    provider.insert("baseUrl".into(), json!(base_url));
    let text_fields = [
        ("TYPE", "type"),
        ("WIRE_API", "wireApi"),
        ("TRANSPORT", "transport"),
        ("API_KEY", "apiKey"),
        ("API_KEY_COMMAND", "apiKeyCommand"),
        ("BEARER_TOKEN", "bearerToken"),
        ("MODEL_ID", "modelId"),
        ("WIRE_MODEL", "wireModel"),
    ];
    for (field, key) in text_fields {
        if let Some(text) = value(field) {
            provider.insert(key.into(), json!(text));
        }
    }
    for (field, key) in [
        ("MAX_PROMPT_TOKENS", "maxPromptTokens"),
        ("MAX_OUTPUT_TOKENS", "maxOutputTokens"),
    ] {
        if let Some(text) = value(field) {
            let number: u64 = text
                .trim()
                .parse()
                .map_err(|_| format!("{PROVIDER_PREFIX}{field} must be a whole number"))?;
            provider.insert(key.into(), json!(number));
        }
    }
    if let Some(version) = value("AZURE_API_VERSION") {
        provider.insert("azure".into(), json!({"apiVersion": version}));
    }
    if let Some(headers) = value("HEADERS") {
        provider.insert("headers".into(), parse_headers(headers)?);
    }
    Ok(Some(Value::Object(provider)))
}

/// `Name: Value` pairs separated by newlines (or a literal `\n`), as the CLI takes them.
fn parse_headers(text: &str) -> Result<Value, String> {
    let mut headers = Map::new();
    for line in text.replace("\\n", "\n").lines() {
        if line.trim().is_empty() {
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!(
                "{PROVIDER_PREFIX}HEADERS needs `Name: Value` lines"
            ));
        };
        headers.insert(name.trim().to_owned(), json!(value.trim()));
    }
    Ok(Value::Object(headers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_name_value_lines() {
        assert_eq!(
            parse_headers("X-Tenant: a\\nX-Route: b:c\n").unwrap(),
            json!({"X-Tenant": "a", "X-Route": "b:c"})
        );
        let error = parse_headers("no colon secret-value").unwrap_err();
        assert!(!error.contains("secret-value"));
    }
}
