//! The browser sessions of a team server ([`Sessions`]), kept in memory only: each maps the
//! digest of a random cookie value to the name of the bearer token it was signed in with and
//! its own page token (the CSRF token written into the pages served to it), and ends after an
//! idle time, at a fixed lifetime, or when signed out. One-time sign-in links (made by a
//! bearer client for `trellis ui --target`) are kept the same way until used or expired.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::secret::PageToken;

/// Default: how long a session lasts at most from its sign-in.
pub const DEFAULT_SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);
/// Default: how long a session lasts without a request.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(3600);
/// How long a one-time sign-in link may wait to be opened.
pub const LINK_LIFETIME: Duration = Duration::from_secs(120);
/// The most sessions (and, separately, pending links) kept at once; the least recently used
/// goes first when a new one needs room.
pub const MAX_SESSIONS: usize = 10_000;

/// How long sessions last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionTimes {
    pub lifetime: Duration,
    pub idle: Duration,
}

impl Default for SessionTimes {
    fn default() -> Self {
        Self {
            lifetime: DEFAULT_SESSION_LIFETIME,
            idle: DEFAULT_SESSION_IDLE,
        }
    }
}

/// Who a live session is: the bearer token's name and the session's page token.
#[derive(Debug, Clone)]
pub struct SessionView {
    pub identity: String,
    pub page_token: PageToken,
}

struct Entry {
    identity: String,
    page_token: PageToken,
    created: Instant,
    last_seen: Instant,
}

struct Link {
    identity: String,
    expires: Instant,
}

/// The live sessions and pending sign-in links of one server.
pub struct Sessions {
    times: SessionTimes,
    sessions: Mutex<HashMap<[u8; 32], Entry>>,
    links: Mutex<HashMap<[u8; 32], Link>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Sessions")
            .field("times", &self.times)
            .finish_non_exhaustive()
    }
}

fn digest_of(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

impl Sessions {
    pub fn new(times: SessionTimes) -> Self {
        Self {
            times,
            sessions: Mutex::new(HashMap::new()),
            links: Mutex::new(HashMap::new()),
        }
    }

    pub fn times(&self) -> SessionTimes {
        self.times
    }

    /// Starts a session for `identity`: the cookie value to hand to the browser.
    pub fn start(&self, identity: &str) -> Result<PageToken, getrandom::Error> {
        let cookie = PageToken::generate()?;
        let page_token = PageToken::generate()?;
        let now = Instant::now();
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions.len() >= MAX_SESSIONS {
            let times = self.times;
            sessions.retain(|_, entry| live(entry, times, now));
            if sessions.len() >= MAX_SESSIONS
                && let Some(oldest) = sessions
                    .iter()
                    .min_by_key(|(_, entry)| entry.last_seen)
                    .map(|(key, _)| *key)
            {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(
            digest_of(cookie.as_str().as_bytes()),
            Entry {
                identity: identity.to_owned(),
                page_token,
                created: now,
                last_seen: now,
            },
        );
        Ok(cookie)
    }

    /// The live session `cookie` names (its last use now), if any; an expired one is ended.
    pub fn find(&self, cookie: &[u8]) -> Option<SessionView> {
        let key = digest_of(cookie);
        let now = Instant::now();
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = sessions.get_mut(&key)?;
        if !live(entry, self.times, now) {
            sessions.remove(&key);
            return None;
        }
        entry.last_seen = now;
        Some(SessionView {
            identity: entry.identity.clone(),
            page_token: entry.page_token.clone(),
        })
    }

    /// Ends the session `cookie` names; whether there was one.
    pub fn end(&self, cookie: &[u8]) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&digest_of(cookie))
            .is_some()
    }

    /// A one-time sign-in link secret for `identity`, valid for [`LINK_LIFETIME`].
    pub fn new_link(&self, identity: &str) -> Result<PageToken, getrandom::Error> {
        let secret = PageToken::generate()?;
        let now = Instant::now();
        let mut links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
        links.retain(|_, link| link.expires > now);
        if links.len() >= MAX_SESSIONS
            && let Some(first) = links
                .iter()
                .min_by_key(|(_, link)| link.expires)
                .map(|(key, _)| *key)
        {
            links.remove(&first);
        }
        links.insert(
            digest_of(secret.as_str().as_bytes()),
            Link {
                identity: identity.to_owned(),
                expires: now + LINK_LIFETIME,
            },
        );
        Ok(secret)
    }

    /// Uses up the link `secret`: the identity it signs in, if it is a pending link.
    pub fn redeem_link(&self, secret: &[u8]) -> Option<String> {
        let link = self
            .links
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&digest_of(secret))?;
        (link.expires > Instant::now()).then_some(link.identity)
    }
}

fn live(entry: &Entry, times: SessionTimes, now: Instant) -> bool {
    now.duration_since(entry.created) < times.lifetime
        && now.duration_since(entry.last_seen) < times.idle
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_until_it_ends_or_expires() {
        let sessions = Sessions::new(SessionTimes::default());
        let cookie = sessions.start("alice").expect("random");
        let found = sessions.find(cookie.as_str().as_bytes()).expect("live");
        assert_eq!(found.identity, "alice");
        assert!(sessions.find(b"not-a-session").is_none());
        assert!(sessions.end(cookie.as_str().as_bytes()));
        assert!(sessions.find(cookie.as_str().as_bytes()).is_none());

        let short = Sessions::new(SessionTimes {
            lifetime: Duration::from_secs(3600),
            idle: Duration::ZERO,
        });
        let cookie = short.start("bob").expect("random");
        assert!(short.find(cookie.as_str().as_bytes()).is_none());
    }

    #[test]
    fn a_link_signs_in_once() {
        let sessions = Sessions::new(SessionTimes::default());
        let link = sessions.new_link("carol").expect("random");
        assert_eq!(
            sessions.redeem_link(link.as_str().as_bytes()).as_deref(),
            Some("carol")
        );
        assert!(sessions.redeem_link(link.as_str().as_bytes()).is_none());
    }
}
