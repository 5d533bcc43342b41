//! Retrying a delivery's forge operations through transient failures (5xx, timeouts, rate
//! limits) with bounded exponential backoff. Every operation retried here re-finds its object
//! first (the pull request by head branch, the report comment by its marker, the merge by the
//! pull request's merged state), so a write GitHub applied before failing is not made twice.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use trellis_forge::ForgeError;

/// How often and how patiently a forge operation is tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySchedule {
    /// Tries in all, the first included.
    pub attempts: u32,
    /// Pause after the first failure; each later pause doubles, up to `longest_pause`.
    pub first_pause: Duration,
    pub longest_pause: Duration,
}

impl Default for RetrySchedule {
    fn default() -> Self {
        Self {
            attempts: 5,
            first_pause: Duration::from_secs(2),
            longest_pause: Duration::from_secs(60),
        }
    }
}

impl RetrySchedule {
    /// The pause before try `attempt + 1`, or `None` when waiting cannot help: a rate limit
    /// that lifts later than the longest pause.
    fn pause(&self, attempt: u32, error: &ForgeError) -> Option<Duration> {
        let doubled = self
            .first_pause
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
            .min(self.longest_pause);
        let told = match error {
            ForgeError::RateLimited {
                retry_after: Some(seconds),
                ..
            } => Some(Duration::from_secs(*seconds)),
            ForgeError::RateLimited {
                reset_at: Some(at), ..
            } => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs();
                Some(Duration::from_secs(at.saturating_sub(now)))
            }
            _ => None,
        };
        match told {
            Some(wait) if wait > self.longest_pause => None,
            Some(wait) => Some(wait.max(doubled)),
            None => Some(doubled),
        }
    }
}

/// The error an operation ended with, and how often it was tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct GaveUp {
    pub error: ForgeError,
    pub tries: u32,
}

/// Runs `operation` until it succeeds, fails for good, or `schedule` runs out; `what` names it
/// in the log line each retry writes.
pub(super) async fn retrying<T, F, Fut>(
    schedule: &RetrySchedule,
    what: &str,
    log: &(dyn Fn(String) + Sync),
    mut operation: F,
) -> Result<T, GaveUp>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ForgeError>>,
{
    let mut attempt = 1;
    loop {
        let error = match operation().await {
            Ok(done) => return Ok(done),
            Err(error) if error.is_transient() => error,
            Err(error) => {
                return Err(GaveUp {
                    error,
                    tries: attempt,
                });
            }
        };
        let pause = (attempt < schedule.attempts)
            .then(|| schedule.pause(attempt, &error))
            .flatten();
        let Some(pause) = pause else {
            return Err(GaveUp {
                error,
                tries: attempt,
            });
        };
        log(format!(
            "delivery: {what} failed ({error}); trying again in {} ms ({} of {} tries made)",
            pause.as_millis(),
            attempt,
            schedule.attempts
        ));
        tokio::time::sleep(pause).await;
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule() -> RetrySchedule {
        RetrySchedule {
            attempts: 4,
            first_pause: Duration::from_millis(1),
            longest_pause: Duration::from_millis(10),
        }
    }

    fn unavailable() -> ForgeError {
        ForgeError::Unavailable {
            action: "open a pull request".into(),
            status: 502,
        }
    }

    #[tokio::test]
    async fn transient_failures_are_tried_again_until_the_schedule_runs_out() {
        let mut tries = 0;
        let result: Result<(), _> = retrying(&schedule(), "x", &|_| {}, || {
            tries += 1;
            async { Err(unavailable()) }
        })
        .await;
        assert_eq!(
            result,
            Err(GaveUp {
                error: unavailable(),
                tries: 4
            })
        );
        assert_eq!(tries, 4);

        let mut tries = 0;
        let result = retrying(&schedule(), "x", &|_| {}, || {
            tries += 1;
            let answer = if tries < 3 { Err(unavailable()) } else { Ok(7) };
            async move { answer }
        })
        .await;
        assert_eq!(result, Ok(7));
        assert_eq!(tries, 3);
    }

    #[tokio::test]
    async fn lasting_failures_and_far_rate_limits_are_not_tried_again() {
        let refused = ForgeError::Forbidden {
            repository: "a/b".into(),
            action: "merge".into(),
            message: "no".into(),
        };
        let far = ForgeError::RateLimited {
            reset_at: None,
            retry_after: Some(3_600),
        };
        for error in [refused, far] {
            let mut tries = 0;
            let result: Result<(), _> = retrying(&schedule(), "x", &|_| {}, || {
                tries += 1;
                let error = error.clone();
                async move { Err(error) }
            })
            .await;
            assert_eq!(result, Err(GaveUp { error, tries: 1 }));
            assert_eq!(tries, 1);
        }
    }

    #[test]
    fn pauses_double_up_to_the_longest_and_honour_retry_after() {
        let schedule = RetrySchedule {
            attempts: 9,
            first_pause: Duration::from_secs(1),
            longest_pause: Duration::from_secs(5),
        };
        let pauses: Vec<u64> = (1..=5)
            .map(|n| schedule.pause(n, &unavailable()).unwrap().as_secs())
            .collect();
        assert_eq!(pauses, [1, 2, 4, 5, 5]);
        let secondary = ForgeError::RateLimited {
            reset_at: None,
            retry_after: Some(3),
        };
        assert_eq!(schedule.pause(1, &secondary), Some(Duration::from_secs(3)));
    }
}
