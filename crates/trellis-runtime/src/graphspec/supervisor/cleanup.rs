//! What the supervisor does last before it records how the run ended: whatever its
//! controller handed it to clean up (the services the run's environment left running), so a
//! run reported finished has left nothing behind.

use super::Supervisor;

impl Supervisor {
    /// Hands the supervisor `cleanup`, called once right before the terminal record.
    pub(crate) fn before_terminal(mut self, cleanup: Box<dyn FnOnce() + Send>) -> Self {
        self.before_terminal = Some(cleanup);
        self
    }

    pub(super) fn clean_up_before_terminal(&mut self) {
        if let Some(cleanup) = self.before_terminal.take() {
            cleanup();
        }
    }
}
