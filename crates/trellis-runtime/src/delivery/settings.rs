//! Where the forge is (API base, web host, from the environment as GitHub Actions names them)
//! and how patiently delivery waits on it; reading a GitHub remote URL into its repository.

use std::time::Duration;

use trellis_forge::{ForgeError, GITHUB_API_URL, GitHub, RepoRef, Token};

use super::retry::RetrySchedule;

/// Default pause between two looks at a pull request's checks.
pub(crate) const DEFAULT_POLL: Duration = Duration::from_secs(20);
/// Default longest wait for checks and mergeability before delivery gives up.
pub(crate) const DEFAULT_WAIT_LIMIT: Duration = Duration::from_secs(60 * 60);
/// Default longest wait for one answer of the forge's API.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the forge is and how patiently delivery waits on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeSettings {
    /// The REST API base; `None`: `https://api.github.com` for github.com, else
    /// `https://HOST/api/v3` (GitHub Enterprise Server).
    pub api_url: Option<String>,
    /// The web host issue and pull-request URLs name; `None`: the remote's host.
    pub web_host: Option<String>,
    /// Pause between two looks at pending checks.
    pub poll: Duration,
    /// Longest wait for pending checks or mergeability.
    pub wait_limit: Duration,
    /// How forge operations are tried again through transient failures.
    pub retry: RetrySchedule,
    /// Longest wait for one API answer (a longer one is a transient failure).
    pub request_timeout: Duration,
}

impl Default for ForgeSettings {
    fn default() -> Self {
        Self {
            api_url: None,
            web_host: None,
            poll: DEFAULT_POLL,
            wait_limit: DEFAULT_WAIT_LIMIT,
            retry: RetrySchedule::default(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// The API base variable (as in GitHub Actions), the web server variable, and delivery's
/// poll interval and wait limit.
pub const API_URL_ENV: &str = "GITHUB_API_URL";
pub const SERVER_URL_ENV: &str = "GITHUB_SERVER_URL";
pub const POLL_MS_ENV: &str = "TRELLIS_DELIVERY_POLL_MS";
pub const WAIT_S_ENV: &str = "TRELLIS_DELIVERY_WAIT_S";
/// The first pause before a failed forge call is tried again (it doubles after each try).
pub const RETRY_MS_ENV: &str = "TRELLIS_DELIVERY_RETRY_MS";
/// The longest wait for one answer of the forge's API.
pub const REQUEST_TIMEOUT_MS_ENV: &str = "TRELLIS_DELIVERY_REQUEST_TIMEOUT_MS";

impl ForgeSettings {
    /// Settings from the environment (`GITHUB_API_URL`, `GITHUB_SERVER_URL`,
    /// `TRELLIS_DELIVERY_POLL_MS`, `TRELLIS_DELIVERY_WAIT_S`, `TRELLIS_DELIVERY_RETRY_MS`,
    /// `TRELLIS_DELIVERY_REQUEST_TIMEOUT_MS`); unset or unreadable values keep the defaults.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let number = |name: &str| lookup(name).and_then(|v| v.trim().parse::<u64>().ok());
        let defaults = Self::default();
        Self {
            api_url: lookup(API_URL_ENV).filter(|v| !v.trim().is_empty()),
            web_host: lookup(SERVER_URL_ENV).and_then(|url| host_of(&url)),
            poll: number(POLL_MS_ENV).map_or(defaults.poll, Duration::from_millis),
            wait_limit: number(WAIT_S_ENV).map_or(defaults.wait_limit, Duration::from_secs),
            retry: number(RETRY_MS_ENV).map_or(defaults.retry, |ms| RetrySchedule {
                first_pause: Duration::from_millis(ms),
                longest_pause: Duration::from_millis(ms.saturating_mul(30)),
                ..defaults.retry
            }),
            request_timeout: number(REQUEST_TIMEOUT_MS_ENV)
                .filter(|ms| *ms > 0)
                .map_or(defaults.request_timeout, Duration::from_millis),
        }
    }

    /// A client for the forge at `host`, authenticated with the token `variable` names
    /// (read through `lookup`).
    pub fn client(
        &self,
        host: &str,
        variable: &str,
        lookup: impl FnOnce(&str) -> Option<String>,
    ) -> Result<GitHub, ForgeError> {
        let token = Token::from_lookup(variable, lookup)?;
        let api = match &self.api_url {
            Some(api) => api.clone(),
            None if host == "github.com" => GITHUB_API_URL.to_owned(),
            None => format!("https://{host}/api/v3"),
        };
        let web_host = self.web_host.clone().unwrap_or_else(|| host.to_owned());
        Ok(GitHub::new(&api, token)?
            .with_web_host(&web_host)
            .with_request_timeout(self.request_timeout))
    }
}

fn host_of(url: &str) -> Option<String> {
    let rest = url.trim().split_once("://")?.1;
    let host = rest.split(['/', '?', '#']).next()?;
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Reads a GitHub remote URL — `https://HOST/OWNER/REPO(.git)`, `ssh://git@HOST/OWNER/REPO`
/// or `git@HOST:OWNER/REPO` — into its host and repository; `None` for anything else (a local
/// path, a URL with a deeper path).
pub fn parse_remote(url: &str) -> Option<(String, RepoRef)> {
    let url = url.trim();
    let (host, path) = match url.split_once("://") {
        Some((_, rest)) => {
            let (authority, path) = rest.split_once('/')?;
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            let host = host.split(':').next().unwrap_or(host);
            (host, path)
        }
        None => {
            let (authority, path) = url.split_once(':')?;
            if authority.contains('/') {
                return None;
            }
            (
                authority.rsplit_once('@').map_or(authority, |(_, h)| h),
                path,
            )
        }
    };
    let path = path.trim_end_matches('/');
    let (owner, name) = path.split_once('/')?;
    if host.is_empty() || name.contains('/') {
        return None;
    }
    let repo = RepoRef::new(owner, name).ok()?;
    Some((host.to_ascii_lowercase(), repo))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_name_their_repository() {
        for url in [
            "https://github.com/acme/app.git",
            "https://x-access-token@github.com/acme/app",
            "ssh://git@github.com/acme/app.git",
            "git@github.com:acme/app.git",
        ] {
            let (host, repo) = parse_remote(url).unwrap();
            assert_eq!(
                (host.as_str(), repo.to_string().as_str()),
                ("github.com", "acme/app"),
                "{url}"
            );
        }
        assert_eq!(parse_remote("/srv/git/app.git"), None);
        assert_eq!(parse_remote("https://github.com/acme/app/tree/main"), None);
        assert_eq!(parse_remote("https://github.com/acme"), None);
    }

    #[test]
    fn settings_come_from_the_environment() {
        let env = |name: &str| match name {
            API_URL_ENV => Some("http://127.0.0.1:9/".to_owned()),
            SERVER_URL_ENV => Some("https://github.com".to_owned()),
            POLL_MS_ENV => Some("50".to_owned()),
            RETRY_MS_ENV => Some("20".to_owned()),
            _ => None,
        };
        let settings = ForgeSettings::from_lookup(env);
        assert_eq!(settings.api_url.as_deref(), Some("http://127.0.0.1:9/"));
        assert_eq!(settings.web_host.as_deref(), Some("github.com"));
        assert_eq!(settings.poll, Duration::from_millis(50));
        assert_eq!(settings.wait_limit, DEFAULT_WAIT_LIMIT);
        assert_eq!(settings.retry.first_pause, Duration::from_millis(20));
        assert_eq!(settings.retry.longest_pause, Duration::from_millis(600));
        assert_eq!(settings.request_timeout, DEFAULT_REQUEST_TIMEOUT);
    }
}
