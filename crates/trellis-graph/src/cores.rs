//! Whether work can be handed to a second thread that actually runs alongside the caller.

use std::sync::OnceLock;

/// Whether more than one CPU is available to this process (its affinity mask and, in a
/// container, its CPU quota). With a single CPU a second thread only adds switching and the
/// bookkeeping of splitting the work, so the parser and the verifier stay on one thread.
/// Read once: it costs a system call and, in containers, a few file reads.
pub fn second_core() -> bool {
    static SECOND_CORE: OnceLock<bool> = OnceLock::new();
    *SECOND_CORE.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

#[cfg(test)]
mod tests {
    /// The cached answer is the standard library's, and stays the same.
    #[test]
    fn second_core_follows_available_parallelism() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(super::second_core(), cpus > 1);
        assert_eq!(super::second_core(), cpus > 1);
    }
}
