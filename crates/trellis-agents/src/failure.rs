//! Naming a provider failure an agent CLI reported: authentication, an unknown model, rate or
//! quota exhaustion, an overflowing context — from the CLI's own structured error fields where
//! it has them (Claude's `error` kind, HTTP statuses), else from its well-known wording.

use serde_json::Value;

use crate::lane::HarnessKind;

/// What kind of provider failure a CLI reported. Anything not named here is `Other` and is
/// retried once; a named failure is not, since running the same request again cannot help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderFailureKind {
    /// Not signed in, an invalid or revoked key, a 401/403 from the provider or a gateway.
    AuthenticationRequired,
    /// The provider does not know (or does not offer) the requested model.
    UnknownModel,
    /// Rate limit, quota or credit exhausted.
    RateLimited,
    /// The conversation no longer fits the model's context window.
    ContextOverflow,
    Other,
}

impl ProviderFailureKind {
    /// The stable name shown in logs and causes (`authentication_required`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AuthenticationRequired => "authentication_required",
            Self::UnknownModel => "unknown_model",
            Self::RateLimited => "rate_limited",
            Self::ContextOverflow => "context_overflow",
            Self::Other => "provider_error",
        }
    }

    /// Reads a name back (the inverse of [`ProviderFailureKind::as_str`]).
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::AuthenticationRequired,
            Self::UnknownModel,
            Self::RateLimited,
            Self::ContextOverflow,
            Self::Other,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == name)
    }

    /// Whether retrying the same turn could succeed.
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::Other)
    }

    /// The kind a provider's HTTP status says, when it says one.
    pub fn of_status(status: u64) -> Option<Self> {
        match status {
            401 | 403 => Some(Self::AuthenticationRequired),
            404 => Some(Self::UnknownModel),
            429 => Some(Self::RateLimited),
            413 => Some(Self::ContextOverflow),
            _ => None,
        }
    }

    /// Claude Code's own error kind (the `error` field of its synthetic assistant message).
    pub fn of_claude_error(kind: &str) -> Option<Self> {
        match kind {
            "authentication_failed"
            | "oauth_org_not_allowed"
            | "account_on_hold"
            | "verification_required"
            | "cloud_credential_error" => Some(Self::AuthenticationRequired),
            "model_not_found" => Some(Self::UnknownModel),
            "rate_limit" | "billing_error" => Some(Self::RateLimited),
            _ => None,
        }
    }

    /// Recognises a failure from the wording the CLIs and providers use; `Other` otherwise.
    pub fn of_message(message: &str) -> Self {
        let lower = message.to_lowercase();
        let any = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
        if any(&[
            "prompt is too long",
            "context window",
            "context_length_exceeded",
            "maximum context length",
            "input is too long",
        ]) {
            Self::ContextOverflow
        } else if any(&[
            "not logged in",
            "please run /login",
            "invalid x-api-key",
            "invalid api key",
            "incorrect api key",
            "authentication_error",
            "authentication failed",
            "unauthorized",
            "permission_error",
            "forbidden",
            "no authentication information",
            "no github oauth token",
            "401 ",
            "403 ",
        ]) {
            Self::AuthenticationRequired
        } else if any(&[
            "rate limit",
            "rate_limit",
            "too many requests",
            "quota",
            "insufficient_quota",
            "usage limit",
            "credit balance",
            "429 ",
        ]) {
            Self::RateLimited
        } else if any(&[
            "model_not_found",
            "not_found_error",
            "unknown model",
            "model not found",
            "does not exist",
            "is not supported",
            "not available",
            "404 ",
        ]) && lower.contains("model")
        {
            Self::UnknownModel
        } else {
            Self::Other
        }
    }

    /// Reads the strongest hint in one CLI event: a structured error kind or an HTTP status.
    pub(crate) fn of_event(harness: HarnessKind, event: &Value) -> Option<Self> {
        let status = |pointer: &str| event.pointer(pointer).and_then(Value::as_u64);
        match harness {
            HarnessKind::Claude => event
                .get("error")
                .and_then(Value::as_str)
                .and_then(Self::of_claude_error)
                .or_else(|| status("/api_error_status").and_then(Self::of_status)),
            HarnessKind::Copilot => status("/data/statusCode").and_then(Self::of_status),
            HarnessKind::Codex | HarnessKind::Pi => None,
        }
    }
}

/// The one line a user needs to fix an authentication failure of this CLI.
pub fn sign_in_advice(harness: HarnessKind) -> &'static str {
    match harness {
        HarnessKind::Claude => {
            "Claude Code is not signed in: run \"claude\" once, or export ANTHROPIC_API_KEY"
        }
        HarnessKind::Codex => {
            "Codex is not signed in: run \"codex login\", or export OPENAI_API_KEY"
        }
        HarnessKind::Pi => {
            "pi is not signed in: run \"pi\" and /login, or export the provider's API key \
             (ANTHROPIC_API_KEY, OPENAI_API_KEY)"
        }
        HarnessKind::Copilot => {
            "GitHub Copilot CLI is not signed in: run \"copilot\" and /login, or export \
             COPILOT_GITHUB_TOKEN"
        }
    }
}

/// What to do about a named failure, one line, or `None` when there is nothing to add.
pub fn advice(harness: HarnessKind, kind: ProviderFailureKind, gateway: bool) -> Option<String> {
    match kind {
        ProviderFailureKind::AuthenticationRequired if gateway => Some(
            "the gateway refused the key: check the key variable the plan's connection names"
                .to_owned(),
        ),
        ProviderFailureKind::AuthenticationRequired => Some(sign_in_advice(harness).to_owned()),
        ProviderFailureKind::UnknownModel => Some(
            "the provider does not offer this model: fix the binding's model in the plan"
                .to_owned(),
        ),
        ProviderFailureKind::RateLimited => {
            Some("rate limit or quota exhausted: wait, or raise the account's limits".to_owned())
        }
        ProviderFailureKind::ContextOverflow => Some(
            "the conversation outgrew the model's context window: split the task or use a \
             model with a larger window"
                .to_owned(),
        ),
        ProviderFailureKind::Other => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_hints_win_and_names_round_trip() {
        let claude = serde_json::json!({"type": "assistant", "error": "authentication_failed"});
        assert_eq!(
            ProviderFailureKind::of_event(HarnessKind::Claude, &claude),
            Some(ProviderFailureKind::AuthenticationRequired)
        );
        let copilot = serde_json::json!({"type": "session.error", "data": {"statusCode": 429}});
        assert_eq!(
            ProviderFailureKind::of_event(HarnessKind::Copilot, &copilot),
            Some(ProviderFailureKind::RateLimited)
        );
        for kind in [
            ProviderFailureKind::AuthenticationRequired,
            ProviderFailureKind::UnknownModel,
            ProviderFailureKind::RateLimited,
            ProviderFailureKind::ContextOverflow,
            ProviderFailureKind::Other,
        ] {
            assert_eq!(ProviderFailureKind::parse(kind.as_str()), Some(kind));
            assert_eq!(kind.is_retryable(), kind == ProviderFailureKind::Other);
        }
    }

    #[test]
    fn wording_is_recognised() {
        use ProviderFailureKind::*;
        let cases = [
            ("Not logged in · Please run /login", AuthenticationRequired),
            (
                "API Error: 401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\"}}",
                AuthenticationRequired,
            ),
            (
                "prompt is too long: 250000 tokens > 200000 maximum",
                ContextOverflow,
            ),
            ("429 Too Many Requests", RateLimited),
            ("The model `gpt-nope` does not exist", UnknownModel),
            ("API Error: 529 overloaded", Other),
        ];
        for (message, kind) in cases {
            assert_eq!(ProviderFailureKind::of_message(message), kind, "{message}");
        }
    }
}
