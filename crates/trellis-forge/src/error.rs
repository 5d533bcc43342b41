//! The closed error enum of the forge client, with stable codes. No variant ever holds a token.

/// Why a forge operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForgeError {
    #[error("the forge token variable {variable} is not set; export it before the run")]
    TokenMissing { variable: String },
    #[error("{variable:?} is not an environment variable name")]
    InvalidTokenVariable { variable: String },
    #[error("token rejected: GitHub did not accept the value of {variable} (401)")]
    TokenRejected { variable: String },
    #[error("repository {repository} not found, or the token cannot see it")]
    RepositoryNotFound { repository: String },
    #[error("{resource} not found in {repository} (or the token cannot see it)")]
    NotFound {
        repository: String,
        resource: String,
    },
    #[error("the token may not {action} in {repository} (403): {message}")]
    Forbidden {
        repository: String,
        action: String,
        message: String,
    },
    #[error("GitHub's API rate limit is exhausted{}", reset_hint(*reset_at, *retry_after))]
    RateLimited {
        /// When the primary limit resets (`x-ratelimit-reset`, Unix time).
        reset_at: Option<u64>,
        /// Seconds to wait (`Retry-After`, a secondary rate limit's answer).
        retry_after: Option<u64>,
    },
    #[error("GitHub refused to {action} in {repository} ({status}): {message}")]
    Refused {
        repository: String,
        action: String,
        status: u16,
        message: String,
    },
    #[error("GitHub failed to {action} ({status}); try again later")]
    Unavailable { action: String, status: u16 },
    #[error("cannot reach the GitHub API at {api}: {message}")]
    Unreachable { api: String, message: String },
    #[error("GitHub's answer to {action} is not what was expected: {message}")]
    Decode { action: String, message: String },
    #[error("the API base URL {url:?} is not an http(s) URL")]
    InvalidApiUrl { url: String },
    #[error("{repository:?} is not a repository name of the form owner/name")]
    InvalidRepository { repository: String },
    #[error("{url:?} is not a GitHub issue or pull request URL: {reason}")]
    InvalidTaskUrl { url: String, reason: String },
    #[error("{url} is on {host}, but the GitHub client talks to {api}")]
    ForeignHost {
        url: String,
        host: String,
        api: String,
    },
    #[error("{url} is an issue; the template {template} needs a pull request URL")]
    NotAPullRequest { url: String, template: String },
    #[error("the template {template} does not take its input from a GitHub URL")]
    TemplateTakesNoUrl { template: String },
    #[error("{marker:?} is not a report key (1 to 128 of A-Z a-z 0-9 . _ : -)")]
    InvalidReportKey { marker: String },
    #[error("GitHub's GraphQL API refused to {action}: {message}")]
    GraphQl { action: String, message: String },
    #[error("more than {limit} pages of {what}; giving up")]
    TooManyPages { what: String, limit: usize },
}

fn reset_hint(reset_at: Option<u64>, retry_after: Option<u64>) -> String {
    match (retry_after, reset_at) {
        (Some(seconds), _) => format!(" (a secondary limit); try again after {seconds} s"),
        (None, Some(at)) => format!(" until {at} (Unix time); try again after it"),
        (None, None) => String::new(),
    }
}

impl ForgeError {
    /// A stable machine-readable code for this error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TokenMissing { .. } => "forge.token_missing",
            Self::InvalidTokenVariable { .. } => "forge.invalid_token_variable",
            Self::TokenRejected { .. } => "forge.token_rejected",
            Self::RepositoryNotFound { .. } => "forge.repository_not_found",
            Self::NotFound { .. } => "forge.not_found",
            Self::Forbidden { .. } => "forge.forbidden",
            Self::RateLimited { .. } => "forge.rate_limited",
            Self::Refused { .. } => "forge.refused",
            Self::Unavailable { .. } => "forge.unavailable",
            Self::Unreachable { .. } => "forge.unreachable",
            Self::Decode { .. } => "forge.unexpected_answer",
            Self::InvalidApiUrl { .. } => "forge.invalid_api_url",
            Self::InvalidRepository { .. } => "forge.invalid_repository",
            Self::InvalidTaskUrl { .. } => "forge.invalid_task_url",
            Self::ForeignHost { .. } => "forge.foreign_host",
            Self::NotAPullRequest { .. } => "forge.not_a_pull_request",
            Self::TemplateTakesNoUrl { .. } => "forge.template_takes_no_url",
            Self::InvalidReportKey { .. } => "forge.invalid_report_key",
            Self::TooManyPages { .. } => "forge.too_many_pages",
            Self::GraphQl { .. } => "forge.graphql_refused",
        }
    }

    /// True when trying the same call again later may succeed (network, 5xx, rate limit).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Unavailable { .. } | Self::Unreachable { .. } | Self::RateLimited { .. }
        )
    }
}
