//! Cancellation tokens and the latest-value slot a streaming node publishes into.

use serde_json::Value;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked while holding it; the data is still usable.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A cloneable, waitable cancellation flag.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    inner: Arc<(Mutex<bool>, Condvar)>,
}

impl CancelToken {
    /// A fresh, unset token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag and wakes every waiter.
    pub fn cancel(&self) {
        let (flag, cond) = &*self.inner;
        *lock(flag) = true;
        cond.notify_all();
    }

    /// True once [`CancelToken::cancel`] was called.
    pub fn is_set(&self) -> bool {
        *lock(&self.inner.0)
    }

    /// Waits until set or `timeout` passes; returns whether it is set.
    pub fn wait(&self, timeout: Duration) -> bool {
        let (flag, cond) = &*self.inner;
        let guard = lock(flag);
        let (guard, _) = cond
            .wait_timeout_while(guard, timeout, |set| !*set)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *guard
    }
}

/// The first publish did not arrive in time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("streaming node '{node}' did not publish a value within {seconds}s")]
pub struct StreamTimeout {
    pub node: String,
    pub seconds: f64,
}

#[derive(Debug, Default)]
struct SlotState {
    value: Option<Value>,
    published: bool,
    cancelled: bool,
}

/// Latest value published by a streaming node, plus the node's cancel token.
#[derive(Debug)]
pub struct StreamSlot {
    node: String,
    state: Mutex<SlotState>,
    changed: Condvar,
    cancel: CancelToken,
}

impl StreamSlot {
    /// A slot for streaming node `node` (its full id, for messages).
    pub fn new(node: impl Into<String>) -> Self {
        StreamSlot {
            node: node.into(),
            state: Mutex::new(SlotState::default()),
            changed: Condvar::new(),
            cancel: CancelToken::new(),
        }
    }

    /// Stores `value` as the latest and releases first-publish waiters.
    pub fn publish(&self, value: Value) {
        let mut state = lock(&self.state);
        state.value = Some(value);
        state.published = true;
        self.changed.notify_all();
    }

    /// The latest value, waiting up to `timeout` for the first publish; a cancelled slot returns what it holds.
    pub fn latest(&self, timeout: Duration) -> Result<Value, StreamTimeout> {
        let deadline = Instant::now() + timeout;
        let mut state = lock(&self.state);
        while !state.published && !state.cancelled {
            let now = Instant::now();
            if now >= deadline {
                return Err(StreamTimeout {
                    node: self.node.clone(),
                    seconds: timeout.as_secs_f64(),
                });
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
        Ok(state.value.clone().unwrap_or(Value::Null))
    }

    /// Fires the node's cancel token and releases readers.
    pub fn cancel(&self) {
        self.cancel.cancel();
        let mut state = lock(&self.state);
        state.cancelled = true;
        self.changed.notify_all();
    }

    /// The token the node body polls.
    pub fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }

    /// The node's full id.
    pub fn node(&self) -> &str {
        &self.node
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn latest_times_out_then_sees_publish() {
        let slot = Arc::new(StreamSlot::new("tracker"));
        let err = slot.latest(Duration::from_millis(20)).unwrap_err();
        assert!(err.to_string().contains("did not publish"));
        let writer = Arc::clone(&slot);
        let handle = std::thread::spawn(move || writer.publish(json!({"tick": 1})));
        assert_eq!(
            slot.latest(Duration::from_secs(5)).unwrap(),
            json!({"tick": 1})
        );
        handle.join().unwrap();
    }

    #[test]
    fn cancel_releases_waiters_with_null() {
        let slot = StreamSlot::new("s");
        slot.cancel();
        assert!(slot.cancel_token().is_set());
        assert_eq!(slot.latest(Duration::from_secs(5)).unwrap(), Value::Null);
    }
}
