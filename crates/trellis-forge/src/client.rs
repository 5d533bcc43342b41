//! The HTTP side of the GitHub client: base URL, authentication, GitHub's headers, bounded
//! retries of reads, pagination, and mapping GitHub's answers onto [`ForgeError`].

use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, USER_AGENT};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{ForgeError, RepoRef, Token};

/// The public GitHub API.
pub const GITHUB_API_URL: &str = "https://api.github.com";
/// The REST API version every request asks for.
const API_VERSION: &str = "2022-11-28";
const AGENT: &str = concat!("trellis/", env!("CARGO_PKG_VERSION"));
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Reads are tried this often on network errors and 5xx answers; writes once.
const READ_ATTEMPTS: u32 = 3;
const RETRY_DELAY: Duration = Duration::from_millis(250);
/// Page size of list calls (GitHub's maximum) and the most pages one list may take.
pub(crate) const PER_PAGE: usize = 100;
pub(crate) const MAX_PAGES: usize = 50;
/// Longest GitHub message kept in an error.
const MAX_MESSAGE_CHARS: usize = 300;

/// A GitHub (or GitHub Enterprise Server) REST client authenticated with one token.
#[derive(Debug, Clone)]
pub struct GitHub {
    http: reqwest::Client,
    api: String,
    web_host: String,
    token: Token,
    /// Longest one request may take before it counts as a network failure.
    timeout: Duration,
}

/// What a call does, in words for its errors.
pub(crate) struct Op<'a> {
    pub repo: &'a RepoRef,
    /// e.g. "open a pull request".
    pub action: &'a str,
    /// The object addressed below the repository (`pull request #4`); `None` for the
    /// repository itself, whose 404 then reads "repository not found".
    pub resource: Option<String>,
}

/// The web host that belongs to an API base: `api.github.com` → `github.com`; GitHub
/// Enterprise (`https://HOST/api/v3`) → `HOST`.
fn web_host_of(api: &str) -> String {
    let rest = api.split_once("://").map_or(api, |(_, rest)| rest);
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    if host.eq_ignore_ascii_case("api.github.com") {
        "github.com".into()
    } else {
        host.to_ascii_lowercase()
    }
}

fn truncate(text: &str) -> String {
    let mut out: String = text.chars().take(MAX_MESSAGE_CHARS).collect();
    if text.chars().count() > MAX_MESSAGE_CHARS {
        out.push('…');
    }
    out
}

/// GitHub's error text: `message`, then each validation error's `message`.
fn github_message(body: &str) -> String {
    let Ok(value) = serde_json::from_str::<Value>(body) else {
        return truncate(body.trim());
    };
    let mut parts: Vec<&str> = Vec::new();
    if let Some(message) = value.get("message").and_then(Value::as_str) {
        parts.push(message);
    }
    for error in value
        .get("errors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(message) = error.get("message").and_then(Value::as_str) {
            parts.push(message);
        } else if let Some(code) = error.get("code").and_then(Value::as_str) {
            parts.push(code);
        }
    }
    truncate(&parts.join(": "))
}

impl GitHub {
    /// A client for the API at `api_url` (e.g. [`GITHUB_API_URL`], or
    /// `https://HOST/api/v3` for GitHub Enterprise Server).
    pub fn new(api_url: &str, token: Token) -> Result<GitHub, ForgeError> {
        let api = api_url.trim().trim_end_matches('/').to_owned();
        let scheme_ok = api.starts_with("https://") || api.starts_with("http://");
        if !scheme_ok || api.contains(char::is_whitespace) || web_host_of(&api).is_empty() {
            return Err(ForgeError::InvalidApiUrl {
                url: api_url.to_owned(),
            });
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(AGENT)
            .build()
            .map_err(|e| ForgeError::Unreachable {
                api: api.clone(),
                message: format!("cannot set up the HTTP client: {e}"),
            })?;
        Ok(GitHub {
            http,
            web_host: web_host_of(&api),
            api,
            token,
            timeout: REQUEST_TIMEOUT,
        })
    }

    /// Sets the web host issue and pull-request URLs must name (default: derived from the API
    /// URL). Tests that serve the API on loopback set `github.com`.
    pub fn with_web_host(mut self, host: &str) -> GitHub {
        self.web_host = host.to_ascii_lowercase();
        self
    }

    /// Sets how long one request may take (default 30 s); a request that takes longer fails
    /// as [`ForgeError::Unreachable`], which is transient.
    pub fn with_request_timeout(mut self, timeout: Duration) -> GitHub {
        self.timeout = timeout;
        self
    }

    pub fn api_url(&self) -> &str {
        &self.api
    }

    pub fn web_host(&self) -> &str {
        &self.web_host
    }

    /// The variable the token came from.
    pub fn token_variable(&self) -> &str {
        self.token.variable()
    }

    /// One call: `path` is below the API base (e.g. `/repos/o/r/pulls`).
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        op: &Op<'_>,
    ) -> Result<T, ForgeError> {
        let (text, _) = self.call_text(method, path, query, body, op).await?;
        serde_json::from_str(&text).map_err(|e| ForgeError::Decode {
            action: op.action.to_owned(),
            message: e.to_string(),
        })
    }

    /// Every page of a list call, in order.
    pub(crate) async fn call_all<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
        op: &Op<'_>,
    ) -> Result<Vec<T>, ForgeError> {
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let mut paged: Vec<(&str, String)> = query.to_vec();
            paged.push(("per_page", PER_PAGE.to_string()));
            paged.push(("page", page.to_string()));
            let (text, more) = self.call_text(Method::GET, path, &paged, None, op).await?;
            let items: Vec<T> = serde_json::from_str(&text).map_err(|e| ForgeError::Decode {
                action: op.action.to_owned(),
                message: e.to_string(),
            })?;
            let short = items.len() < PER_PAGE;
            all.extend(items);
            if short || !more {
                return Ok(all);
            }
        }
        Err(ForgeError::TooManyPages {
            what: op.action.to_owned(),
            limit: MAX_PAGES,
        })
    }

    /// Sends a request (retrying reads), returns the body and whether a next page is linked.
    async fn call_text(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        op: &Op<'_>,
    ) -> Result<(String, bool), ForgeError> {
        let attempts = if method == Method::GET {
            READ_ATTEMPTS
        } else {
            1
        };
        let mut attempt = 0;
        let result = loop {
            attempt += 1;
            match self.send_once(method.clone(), path, query, body, op).await {
                Err(error) if error.is_transient() && attempt < attempts => {
                    if matches!(error, ForgeError::RateLimited { .. }) {
                        break Err(error);
                    }
                    tokio::time::sleep(RETRY_DELAY * attempt).await;
                }
                other => break other,
            }
        };
        // GitHub answers 404 both for a missing object and a repository the token cannot see:
        // one look at the repository tells which, so the error names the real problem.
        if let Err(ForgeError::NotFound { repository, .. }) = &result {
            let probe = Op {
                repo: op.repo,
                action: "read the repository",
                resource: None,
            };
            let repo_path = op.repo.api_path();
            if let Err(ForgeError::RepositoryNotFound { .. }) = self
                .send_once(Method::GET, &repo_path, &[], None, &probe)
                .await
            {
                return Err(ForgeError::RepositoryNotFound {
                    repository: repository.clone(),
                });
            }
        }
        result
    }

    /// A request to `url` with GitHub's headers and the token.
    fn request(&self, method: Method, url: String) -> reqwest::RequestBuilder {
        self.http
            .request(method, url)
            .timeout(self.timeout)
            .header(ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", API_VERSION)
            .header(USER_AGENT, AGENT)
            .header(AUTHORIZATION, format!("Bearer {}", self.token.value()))
    }

    fn unreachable(&self, error: reqwest::Error) -> ForgeError {
        let message = if error.is_timeout() {
            format!("no answer within {} s", self.timeout.as_secs_f32())
        } else {
            error.without_url().to_string()
        };
        ForgeError::Unreachable {
            api: self.api.clone(),
            message,
        }
    }

    /// GETs `path` as text, following GitHub's redirect to a download URL (reqwest drops the
    /// `Authorization` header when the redirect leaves the API's host), and keeps only the last
    /// `max_bytes` bytes of the body; the flag tells whether anything before them was dropped.
    /// Read once, without retries: what it fetches is optional.
    pub(crate) async fn get_tail(
        &self,
        path: &str,
        max_bytes: usize,
        op: &Op<'_>,
    ) -> Result<(Vec<u8>, bool), ForgeError> {
        let mut response = self
            .request(Method::GET, format!("{}{path}", self.api))
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let status = response.status();
        if !status.is_success() {
            let headers = response.headers().clone();
            let text = response.text().await.unwrap_or_default();
            return Err(self.status_error(status, &headers, &text, op));
        }
        let mut tail: Vec<u8> = Vec::new();
        let mut dropped = false;
        while let Some(chunk) = response.chunk().await.map_err(|e| self.unreachable(e))? {
            tail.extend_from_slice(&chunk);
            if tail.len() > max_bytes.saturating_mul(2) {
                let cut = tail.len() - max_bytes;
                tail.drain(..cut);
                dropped = true;
            }
        }
        if tail.len() > max_bytes {
            let cut = tail.len() - max_bytes;
            tail.drain(..cut);
            dropped = true;
        }
        Ok((tail, dropped))
    }

    /// The GraphQL endpoint that belongs to the REST base: `…/graphql` on github.com,
    /// `https://HOST/api/graphql` for GitHub Enterprise Server's `https://HOST/api/v3`.
    pub(crate) fn graphql_url(&self) -> String {
        match self.api.strip_suffix("/api/v3") {
            Some(host) => format!("{host}/api/graphql"),
            None => format!("{}/graphql", self.api),
        }
    }

    /// One GraphQL call (never retried: mutations go through here); answers its `data`.
    /// GraphQL errors (a 200 with `errors`) become [`ForgeError::GraphQl`], or `Forbidden` /
    /// `NotFound` when GitHub types them so.
    pub(crate) async fn graphql(
        &self,
        query: &str,
        variables: Value,
        op: &Op<'_>,
    ) -> Result<Value, ForgeError> {
        let body = serde_json::json!({"query": query, "variables": variables});
        let response = self
            .request(Method::POST, self.graphql_url())
            .json(&body)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.map_err(|e| self.unreachable(e))?;
        if !status.is_success() {
            return Err(self.status_error(status, &headers, &text, op));
        }
        let answer: Value = serde_json::from_str(&text).map_err(|e| ForgeError::Decode {
            action: op.action.to_owned(),
            message: e.to_string(),
        })?;
        if let Some(first) = answer
            .get("errors")
            .and_then(Value::as_array)
            .and_then(|errors| errors.first())
        {
            let message = truncate(first.get("message").and_then(Value::as_str).unwrap_or(""));
            return Err(match first.get("type").and_then(Value::as_str) {
                Some("FORBIDDEN") => ForgeError::Forbidden {
                    repository: op.repo.to_string(),
                    action: op.action.to_owned(),
                    message,
                },
                Some("NOT_FOUND") => ForgeError::NotFound {
                    repository: op.repo.to_string(),
                    resource: op.resource.clone().unwrap_or_else(|| "an object".into()),
                },
                _ => ForgeError::GraphQl {
                    action: op.action.to_owned(),
                    message,
                },
            });
        }
        Ok(answer.get("data").cloned().unwrap_or(Value::Null))
    }

    async fn send_once(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        op: &Op<'_>,
    ) -> Result<(String, bool), ForgeError> {
        let mut request = self.request(method, format!("{}{path}", self.api));
        if !query.is_empty() {
            request = request.query(query);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let unreachable = |e: reqwest::Error| self.unreachable(e);
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.map_err(unreachable)?;
        if status.is_success() {
            let more = headers
                .get_all(reqwest::header::LINK)
                .iter()
                .any(|v| v.to_str().is_ok_and(|l| l.contains("rel=\"next\"")));
            return Ok((text, more));
        }
        Err(self.status_error(status, &headers, &text, op))
    }

    fn status_error(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &str,
        op: &Op<'_>,
    ) -> ForgeError {
        let message = github_message(body);
        let header_number = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
        };
        let rate_limited = status == StatusCode::TOO_MANY_REQUESTS
            || header_number("x-ratelimit-remaining") == Some(0)
            || message.to_ascii_lowercase().contains("rate limit");
        match status.as_u16() {
            401 => ForgeError::TokenRejected {
                variable: self.token.variable().to_owned(),
            },
            403 | 429 if rate_limited || header_number("retry-after").is_some() => {
                ForgeError::RateLimited {
                    reset_at: header_number("x-ratelimit-reset"),
                    retry_after: header_number("retry-after"),
                }
            }
            403 => ForgeError::Forbidden {
                repository: op.repo.to_string(),
                action: op.action.to_owned(),
                message,
            },
            404 => match &op.resource {
                None => ForgeError::RepositoryNotFound {
                    repository: op.repo.to_string(),
                },
                Some(resource) => ForgeError::NotFound {
                    repository: op.repo.to_string(),
                    resource: resource.clone(),
                },
            },
            500..=599 => ForgeError::Unavailable {
                action: op.action.to_owned(),
                status: status.as_u16(),
            },
            code => ForgeError::Refused {
                repository: op.repo.to_string(),
                action: op.action.to_owned(),
                status: code,
                message,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_hosts_follow_the_api_base() {
        assert_eq!(web_host_of("https://api.github.com"), "github.com");
        assert_eq!(
            web_host_of("https://ghe.example.com/api/v3"),
            "ghe.example.com"
        );
        assert_eq!(web_host_of("http://127.0.0.1:8080"), "127.0.0.1:8080");
    }

    #[test]
    fn github_messages_join_validation_errors() {
        let body = r#"{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for acme:b."}]}"#;
        assert_eq!(
            github_message(body),
            "Validation Failed: A pull request already exists for acme:b."
        );
        assert_eq!(github_message("plain failure\n"), "plain failure");
    }

    #[test]
    fn api_urls_must_be_http() {
        let token = Token::from_lookup("T", |_| Some("x".into())).unwrap();
        for bad in ["ftp://x", "api.github.com", "https://", "https://a b"] {
            assert_eq!(
                GitHub::new(bad, token.clone()).unwrap_err().code(),
                "forge.invalid_api_url",
                "{bad}"
            );
        }
        let client = GitHub::new("https://ghe.example.com/api/v3/", token).unwrap();
        assert_eq!(client.api_url(), "https://ghe.example.com/api/v3");
        assert_eq!(client.web_host(), "ghe.example.com");
    }
}
