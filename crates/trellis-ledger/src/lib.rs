//! Durable run storage: append-only events with cursors, run snapshots and idempotent submissions, SQLite by default behind a narrow storage trait.
