//! A bound on open Server-Sent Events streams: each stream holds a slot until it ends or its
//! client goes away, and a request beyond the bound is answered 503 at once.

use std::sync::Arc;

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::problem::Problem;

/// Open streams allowed per process by default (a page uses at most three at a time).
pub const DEFAULT_MAX_STREAMS: usize = 64;

#[derive(Debug, Clone)]
pub struct StreamSlots(Arc<Semaphore>);

/// Held by a stream for as long as it is open.
#[derive(Debug)]
pub struct StreamSlot(#[allow(dead_code)] OwnedSemaphorePermit);

impl StreamSlots {
    pub fn new(limit: usize) -> Self {
        Self(Arc::new(Semaphore::new(limit)))
    }

    /// A slot, or the problem to answer when every slot is taken.
    pub fn take(&self) -> Result<StreamSlot, Problem> {
        Arc::clone(&self.0)
            .try_acquire_owned()
            .map(StreamSlot)
            .map_err(|_| {
                Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too_many_streams",
                    "too many open event streams; close a page and retry",
                )
            })
    }

    pub fn available(&self) -> usize {
        self.0.available_permits()
    }
}
