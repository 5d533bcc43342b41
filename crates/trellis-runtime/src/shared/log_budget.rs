//! The log budget of one execution (or one GaP node): what a worker prints is recorded up to
//! a bounded volume, and what is dropped beyond it is said once, never lost silently.

/// Most output lines recorded per execution.
pub const MAX_EXECUTION_LOG_LINES: u64 = 20_000;
/// Most output bytes (message text) recorded per execution.
pub const MAX_EXECUTION_LOG_BYTES: u64 = 4 * 1024 * 1024;

/// Counts one execution's output lines against the budget.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LogBudget {
    kept_lines: u64,
    kept_bytes: u64,
    dropped_lines: u64,
    dropped_bytes: u64,
}

impl LogBudget {
    /// Whether a line of `bytes` bytes is still recorded; counts it either way. Once one
    /// line is dropped every later one is too, so what was kept is a prefix of the output.
    pub fn admit(&mut self, bytes: usize) -> bool {
        let bytes = bytes as u64;
        let fits = self.dropped_lines == 0
            && self.kept_lines < MAX_EXECUTION_LOG_LINES
            && self.kept_bytes.saturating_add(bytes) <= MAX_EXECUTION_LOG_BYTES;
        if fits {
            self.kept_lines += 1;
            self.kept_bytes += bytes;
        } else {
            self.dropped_lines += 1;
            self.dropped_bytes = self.dropped_bytes.saturating_add(bytes);
        }
        fits
    }

    /// The one record saying what was dropped, once anything was.
    pub fn dropped_note(&self) -> Option<String> {
        (self.dropped_lines > 0).then(|| {
            format!(
                "{} lines / {} bytes of output dropped: the log budget is {} lines / {} bytes \
                 per execution",
                self.dropped_lines,
                self.dropped_bytes,
                MAX_EXECUTION_LOG_LINES,
                MAX_EXECUTION_LOG_BYTES
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_past_the_budget_are_counted_and_reported_once() {
        let mut budget = LogBudget::default();
        assert!(budget.admit(10));
        assert_eq!(budget.dropped_note(), None);
        for _ in 1..MAX_EXECUTION_LOG_LINES {
            assert!(budget.admit(10));
        }
        assert!(!budget.admit(10));
        assert!(
            !budget.admit(5),
            "a short line after a dropped one is dropped too"
        );
        assert_eq!(
            budget.dropped_note().unwrap(),
            format!(
                "2 lines / 15 bytes of output dropped: the log budget is {MAX_EXECUTION_LOG_LINES} \
                 lines / {MAX_EXECUTION_LOG_BYTES} bytes per execution"
            )
        );
    }

    #[test]
    fn bytes_are_bounded_too() {
        let mut budget = LogBudget::default();
        let big = usize::try_from(MAX_EXECUTION_LOG_BYTES / 2).unwrap();
        assert!(budget.admit(big));
        assert!(budget.admit(big));
        assert!(!budget.admit(1));
    }
}
