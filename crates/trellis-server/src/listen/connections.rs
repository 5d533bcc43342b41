//! The connections a server holds open, capped: each is registered when accepted and marked
//! trusted once one of its requests passes the access policy; at the cap, the oldest connection
//! that never carried a trusted request is closed to make room, so half-sent or idle
//! unauthenticated connections cannot keep an authenticated client out.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

/// What one accepted connection shares with the registry and with its requests (each request
/// carries it as an extension, so the access policy can mark it trusted).
#[derive(Debug, Default)]
pub struct Connection {
    trusted: AtomicBool,
    started: AtomicBool,
    evicted: Notify,
}

impl Connection {
    /// One of its requests passed the access policy: it is no longer closed to make room.
    pub fn mark_trusted(&self) {
        self.trusted.store(true, Ordering::Release);
    }

    pub fn is_trusted(&self) -> bool {
        self.trusted.load(Ordering::Acquire)
    }

    /// The head of its first request arrived.
    pub(super) fn mark_started(&self) {
        self.started.store(true, Ordering::Release);
    }

    pub(super) fn has_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Completes when the registry closed this connection to make room.
    pub(super) async fn evicted(&self) {
        self.evicted.notified().await;
    }
}

/// The open connections, in the order they were accepted.
#[derive(Debug)]
pub(super) struct Registry {
    capacity: usize,
    state: Mutex<Open>,
    freed: Notify,
}

#[derive(Debug, Default)]
struct Open {
    next: u64,
    /// By accept order; an evicted connection leaves the map at once (its task ends soon).
    live: BTreeMap<u64, Arc<Connection>>,
    /// Evicted but not yet closed: they still hold a descriptor, so they still count.
    closing: usize,
}

/// A registered connection; dropping it frees its place.
pub(super) struct Registration {
    registry: Arc<Registry>,
    id: u64,
    pub(super) connection: Arc<Connection>,
}

impl Registry {
    pub(super) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            capacity: capacity.max(1),
            state: Mutex::new(Open::default()),
            freed: Notify::new(),
        })
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many connections are open (closing ones included).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        let open = self.open();
        open.live.len() + open.closing
    }

    /// Waits until a new connection may be served: below the cap at once; at the cap, after
    /// closing the oldest untrusted connection, or (when every one is trusted) until one ends.
    pub(super) async fn make_room(&self) {
        loop {
            let freed = self.freed.notified();
            {
                let mut open = self.open();
                if open.live.len() + open.closing < self.capacity {
                    return;
                }
                // One at a time: while an evicted connection is closing, its place is coming.
                let victim = (open.closing == 0)
                    .then(|| {
                        open.live
                            .iter()
                            .find(|(_, connection)| !connection.is_trusted())
                            .map(|(id, _)| *id)
                    })
                    .flatten();
                if let Some(id) = victim
                    && let Some(connection) = open.live.remove(&id)
                {
                    open.closing += 1;
                    connection.evicted.notify_one();
                }
            }
            freed.await;
        }
    }

    /// Registers a just-accepted connection.
    pub(super) fn register(self: &Arc<Self>) -> Registration {
        let connection = Arc::new(Connection::default());
        let mut open = self.open();
        let id = open.next;
        open.next += 1;
        open.live.insert(id, Arc::clone(&connection));
        Registration {
            registry: Arc::clone(self),
            id,
            connection,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        {
            let mut open = self.registry.open();
            if open.live.remove(&self.id).is_none() {
                open.closing = open.closing.saturating_sub(1);
            }
        }
        self.registry.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_the_cap_the_oldest_untrusted_connection_makes_room() {
        let registry = Registry::new(3);
        let first = registry.register();
        let second = registry.register();
        let third = registry.register();
        first.connection.mark_trusted();
        let evicted = Arc::clone(&second.connection);
        let waiter = tokio::spawn(async move { evicted.evicted().await });
        let room = {
            let registry = Arc::clone(&registry);
            tokio::spawn(async move { registry.make_room().await })
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the oldest untrusted connection is told to close")
            .expect("waiter");
        assert!(!room.is_finished() || registry.len() < 3);
        drop(second);
        tokio::time::timeout(std::time::Duration::from_secs(5), room)
            .await
            .expect("room is made once it closed")
            .expect("room");
        assert_eq!(registry.len(), 2);
        drop((first, third));
        assert_eq!(registry.len(), 0);
    }
}
