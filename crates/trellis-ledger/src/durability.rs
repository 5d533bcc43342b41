//! How hard a backend's commits work to survive power loss, chosen in either backend's options.

/// How hard a commit works to survive power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous = FULL`: every commit is on disk before `append` returns. The default,
    /// because a dispatch must be durable before its worker starts.
    Full,
    /// `synchronous = NORMAL`: commits survive a process crash but the last few may be lost
    /// on power failure. Faster; for tests and throwaway state.
    Normal,
}
