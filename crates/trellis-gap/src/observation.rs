//! The observation stream: a background poller of the connector at a fixed rate whose last good
//! observation every reader sees (stale-tolerant); it stops as soon as the run ends.

use crate::connector::Connector;
use crate::sample::Sample;
use crate::stream::CancelToken;
use serde_json::{Value, json};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Rate when neither the workflow nor the environment sets one.
pub const DEFAULT_OBSERVATION_HZ: f64 = 10.0;
/// Period used for a rate of zero or less (as the reference).
const FALLBACK_PERIOD: Duration = Duration::from_millis(100);
/// First and largest pause after a failed poll.
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Fastest polling accepted (1 kHz).
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The value a stream input carries inside JSON values; script nodes receive a handle instead.
pub const STREAM_MARKER_KEY: &str = "__trellis_observation_stream__";

/// The in-value stand-in for the live stream (what `in.observation_stream` resolves to).
pub fn stream_marker() -> Value {
    json!({ STREAM_MARKER_KEY: true })
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn epoch_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// No good observation arrived in time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("StreamUnavailable: no observation within {seconds}s{}", last_error.as_deref().map(|e| format!(" (last poll error: {e})")).unwrap_or_default())]
pub struct StreamUnavailable {
    pub seconds: f64,
    pub last_error: Option<String>,
}

#[derive(Default)]
struct State {
    latest: Option<(Value, Instant, f64)>,
    last_error: Option<String>,
}

/// A running poller; [`ObservationStream::stop`] ends it (also on drop).
pub struct ObservationStream {
    state: Arc<(Mutex<State>, Condvar)>,
    stop: CancelToken,
    poller: Mutex<Option<JoinHandle<()>>>,
}

impl ObservationStream {
    /// Starts polling `connector` `hz` times a second.
    pub fn start(connector: Arc<dyn Connector>, hz: f64) -> ObservationStream {
        let period = if hz.is_finite() && hz > 0.0 {
            Duration::from_secs_f64(1.0 / hz).max(MIN_PERIOD)
        } else {
            FALLBACK_PERIOD
        };
        let state: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let stop = CancelToken::new();
        let poller = {
            let state = Arc::clone(&state);
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("gap-observation".into())
                .spawn(move || poll(&*connector, &state, &stop, period))
                .ok()
        };
        ObservationStream {
            state,
            stop,
            poller: Mutex::new(poller),
        }
    }

    /// The last good observation, waiting up to `timeout` for the first one.
    pub fn latest(&self, timeout: Duration) -> Result<Sample, StreamUnavailable> {
        let (mutex, changed) = &*self.state;
        let deadline = Instant::now() + timeout;
        let mut state = lock(mutex);
        loop {
            if let Some((value, at, epoch)) = &state.latest {
                return Ok(Sample {
                    value: value.clone(),
                    sampled_at: *epoch,
                    age_s: at.elapsed().as_secs_f64(),
                });
            }
            let now = Instant::now();
            if now >= deadline || self.stop.is_set() {
                return Err(StreamUnavailable {
                    seconds: timeout.as_secs_f64(),
                    last_error: state.last_error.clone(),
                });
            }
            state = changed
                .wait_timeout(state, deadline - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Stops polling and waits for the poller to finish its current call (idempotent).
    pub fn stop(&self) {
        self.stop.cancel();
        self.state.1.notify_all();
        if let Some(handle) = lock(&self.poller).take() {
            let _ = handle.join();
        }
    }
}

impl Drop for ObservationStream {
    fn drop(&mut self) {
        self.stop();
    }
}

fn poll(
    connector: &dyn Connector,
    state: &(Mutex<State>, Condvar),
    stop: &CancelToken,
    period: Duration,
) {
    let mut backoff = BACKOFF_START;
    while !stop.is_set() {
        let pause = match connector.get_observation() {
            Ok(value) => {
                let mut guard = lock(&state.0);
                guard.latest = Some((value, Instant::now(), epoch_seconds()));
                state.1.notify_all();
                backoff = BACKOFF_START;
                period
            }
            Err(error) => {
                lock(&state.0).last_error = Some(error);
                let pause = backoff;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                pause
            }
        };
        stop.wait(pause);
    }
}

/// The polling rate: `meta.observation_stream_hz`, else `$GAP_OBSERVATION_STREAM_HZ`, else
/// `fallback`; an unparseable value falls back.
pub fn observation_hz(meta: &serde_json::Map<String, Value>, fallback: f64) -> f64 {
    let parse = |value: &Value| match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    match meta.get("observation_stream_hz") {
        Some(value) => parse(value).unwrap_or(fallback),
        None => std::env::var("GAP_OBSERVATION_STREAM_HZ")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(fallback),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Counter {
        polls: AtomicU64,
        fail_first: u64,
    }

    impl Connector for Counter {
        fn get_observation(&self) -> Result<Value, String> {
            let n = self.polls.fetch_add(1, Ordering::SeqCst);
            if n < self.fail_first {
                return Err(format!("camera warming up ({n})"));
            }
            Ok(json!({"tick": n}))
        }
        fn world_snapshot(&self) -> Result<Option<Value>, String> {
            Ok(None)
        }
    }

    #[test]
    fn unavailable_until_the_first_good_poll_then_stale_tolerant() {
        let connector = Arc::new(Counter {
            polls: AtomicU64::new(0),
            fail_first: 1,
        });
        let stream = ObservationStream::start(connector.clone(), 100.0);
        let early = stream.latest(Duration::from_millis(20)).unwrap_err();
        assert!(
            early.to_string().contains("camera warming up (0)"),
            "{early}"
        );
        let sample = stream.latest(Duration::from_secs(5)).unwrap();
        assert!(sample.value["tick"].as_u64().unwrap() >= 1);
        stream.stop();
        stream.stop();
        let polls = connector.polls.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            connector.polls.load(Ordering::SeqCst),
            polls,
            "no poll after stop"
        );
        // The last good value stays readable after the stream stopped.
        assert!(stream.latest(Duration::ZERO).is_ok());
    }

    #[test]
    fn rate_comes_from_meta_then_the_fallback() {
        let mut meta = serde_json::Map::new();
        meta.insert("observation_stream_hz".into(), json!("25"));
        assert_eq!(observation_hz(&meta, 10.0), 25.0);
        meta.insert("observation_stream_hz".into(), json!("fast"));
        assert_eq!(observation_hz(&meta, 10.0), 10.0);
    }
}
