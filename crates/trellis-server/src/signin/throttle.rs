//! Throttling of failed sign-ins ([`FailedSignIns`]): each client address may fail to sign in a
//! few times within a window; past that its sign-ins are refused without looking at the token
//! until the oldest failure leaves the window, so a token cannot be guessed at speed. Successes
//! are not counted. Kept in memory, bounded.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Default: how many failed sign-ins a client address may make within [`DEFAULT_WINDOW`].
pub const DEFAULT_FAILURES: usize = 5;
/// Default: the window failed sign-ins are counted over.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// The most client addresses remembered at once; past that the one whose last failure is
/// oldest is forgotten first.
pub const MAX_CLIENTS: usize = 10_000;

/// How many failed sign-ins a client address may make within a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignInLimit {
    pub failures: usize,
    pub window: Duration,
}

impl Default for SignInLimit {
    fn default() -> Self {
        Self {
            failures: DEFAULT_FAILURES,
            window: DEFAULT_WINDOW,
        }
    }
}

/// Whom failures are counted against: an IPv4 address, or an IPv6 /64 (one host usually holds
/// a whole /64, so counting single IPv6 addresses would not slow it down). `None`: a request
/// whose address is unknown (served without the listener), all counted together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey(Option<IpAddr>);

impl ClientKey {
    pub fn of(address: Option<IpAddr>) -> Self {
        Self(address.map(|address| match address {
            IpAddr::V4(v4) => IpAddr::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    IpAddr::V6(prefix.into())
                }
            },
        }))
    }
}

/// The recent failed sign-ins of each client address.
#[derive(Debug)]
pub struct FailedSignIns {
    limit: SignInLimit,
    failures: Mutex<HashMap<ClientKey, VecDeque<Instant>>>,
}

impl FailedSignIns {
    pub fn new(limit: SignInLimit) -> Self {
        Self {
            limit,
            failures: Mutex::new(HashMap::new()),
        }
    }

    pub fn limit(&self) -> SignInLimit {
        self.limit
    }

    /// `Err(wait)` when `client` used up its failures: how long until it may try again.
    pub fn check(&self, client: ClientKey) -> Result<(), Duration> {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(recent) = failures.get_mut(&client) else {
            return Ok(());
        };
        self.forget_old(recent, now);
        if recent.is_empty() {
            failures.remove(&client);
            return Ok(());
        }
        match recent.front() {
            Some(oldest) if recent.len() >= self.limit.failures => {
                Err((*oldest + self.limit.window).saturating_duration_since(now))
            }
            _ => Ok(()),
        }
    }

    /// Counts a failed sign-in of `client`.
    pub fn record(&self, client: ClientKey) {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        if !failures.contains_key(&client) && failures.len() >= MAX_CLIENTS {
            failures.retain(|_, recent| {
                self.forget_old(recent, now);
                !recent.is_empty()
            });
            if failures.len() >= MAX_CLIENTS {
                let stalest = failures
                    .iter()
                    .min_by_key(|(_, recent)| recent.back().copied())
                    .map(|(key, _)| *key);
                if let Some(stalest) = stalest {
                    failures.remove(&stalest);
                }
            }
        }
        let recent = failures.entry(client).or_default();
        self.forget_old(recent, now);
        recent.push_back(now);
        // Only the newest `failures` matter for the limit.
        while recent.len() > self.limit.failures.max(1) {
            recent.pop_front();
        }
    }

    fn forget_old(&self, recent: &mut VecDeque<Instant>, now: Instant) {
        while recent
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= self.limit.window)
        {
            recent.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_clients_are_counted_by_their_64_prefix_and_mapped_ipv4_as_ipv4() {
        let parse = |text: &str| ClientKey::of(Some(text.parse().expect("address")));
        assert_eq!(parse("2001:db8:1:2::1"), parse("2001:db8:1:2:ffff::9"));
        assert_ne!(parse("2001:db8:1:2::1"), parse("2001:db8:1:3::1"));
        assert_eq!(parse("::ffff:192.0.2.7"), parse("192.0.2.7"));
        assert_ne!(parse("192.0.2.7"), parse("192.0.2.8"));
    }

    #[test]
    fn a_client_past_its_failures_waits_for_the_oldest_to_leave_the_window() {
        let throttle = FailedSignIns::new(SignInLimit {
            failures: 3,
            window: Duration::from_secs(60),
        });
        let client = ClientKey::of(Some("192.0.2.1".parse().expect("address")));
        let other = ClientKey::of(Some("192.0.2.2".parse().expect("address")));
        for _ in 0..3 {
            assert_eq!(throttle.check(client), Ok(()));
            throttle.record(client);
        }
        let wait = throttle.check(client).expect_err("throttled");
        assert!(wait > Duration::from_secs(59) && wait <= Duration::from_secs(60));
        assert_eq!(throttle.check(other), Ok(()));
    }
}
