//! The log budgets of a run: what a worker prints is recorded up to a bounded volume per
//! execution (or GaP node) and per run, and what is dropped beyond either is said once per
//! execution, never lost silently.

/// Most output lines recorded per execution.
pub const MAX_EXECUTION_LOG_LINES: u64 = 20_000;
/// Most output bytes (message text) recorded per execution.
pub const MAX_EXECUTION_LOG_BYTES: u64 = 4 * 1024 * 1024;
/// Most output lines recorded per run, all its executions together.
pub const MAX_RUN_LOG_LINES: u64 = 200_000;
/// Most output bytes recorded per run: a run of many chatty steps stays a bounded ledger.
pub const MAX_RUN_LOG_BYTES: u64 = 32 * 1024 * 1024;

/// What one budget has kept so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Kept {
    lines: u64,
    bytes: u64,
}

impl Kept {
    fn fits(&self, bytes: u64, max_lines: u64, max_bytes: u64) -> bool {
        self.lines < max_lines && self.bytes.saturating_add(bytes) <= max_bytes
    }

    fn add(&mut self, bytes: u64) {
        self.lines += 1;
        self.bytes = self.bytes.saturating_add(bytes);
    }
}

/// What a whole run has kept of its executions' output (one per controller).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RunLogBudget {
    kept: Kept,
}

/// Counts one execution's output lines against its budget (and its run's).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LogBudget {
    kept: Kept,
    dropped_lines: u64,
    dropped_bytes: u64,
    /// Whether the run's budget, not this execution's, was what ran out.
    run_spent: bool,
}

impl LogBudget {
    /// Whether a line of `bytes` bytes is still recorded, by this execution's budget alone
    /// (a worker host, which sees one execution); counts it either way.
    pub fn admit(&mut self, bytes: usize) -> bool {
        self.admit_within(&mut RunLogBudget::default(), bytes)
    }

    /// Whether a line of `bytes` bytes is still recorded, within this execution's budget and
    /// its run's; counts it either way. Once one line is dropped every later one is too, so
    /// what was kept is a prefix of the output.
    pub fn admit_within(&mut self, run: &mut RunLogBudget, bytes: usize) -> bool {
        let bytes = bytes as u64;
        let execution_fits = self.dropped_lines == 0
            && self
                .kept
                .fits(bytes, MAX_EXECUTION_LOG_LINES, MAX_EXECUTION_LOG_BYTES);
        let run_fits = run.kept.fits(bytes, MAX_RUN_LOG_LINES, MAX_RUN_LOG_BYTES);
        if execution_fits && run_fits {
            self.kept.add(bytes);
            run.kept.add(bytes);
            return true;
        }
        if self.dropped_lines == 0 && execution_fits {
            self.run_spent = true;
        }
        self.dropped_lines += 1;
        self.dropped_bytes = self.dropped_bytes.saturating_add(bytes);
        false
    }

    /// The one record saying what was dropped, once anything was.
    pub fn dropped_note(&self) -> Option<String> {
        (self.dropped_lines > 0).then(|| {
            let (scope, lines, bytes) = if self.run_spent {
                ("run", MAX_RUN_LOG_LINES, MAX_RUN_LOG_BYTES)
            } else {
                (
                    "execution",
                    MAX_EXECUTION_LOG_LINES,
                    MAX_EXECUTION_LOG_BYTES,
                )
            };
            format!(
                "{} lines / {} bytes of output dropped: the log budget is {lines} lines / \
                 {bytes} bytes per {scope}",
                self.dropped_lines, self.dropped_bytes,
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

    #[test]
    fn the_run_budget_bounds_many_executions_together() {
        let mut run = RunLogBudget::default();
        let line = usize::try_from(MAX_EXECUTION_LOG_BYTES / 4).unwrap();
        let per_run = MAX_RUN_LOG_BYTES / (MAX_EXECUTION_LOG_BYTES / 4);
        let mut executions = vec![LogBudget::default(); 20];
        let kept = executions
            .iter_mut()
            .flat_map(|budget| {
                (0..4)
                    .map(|_| budget.admit_within(&mut run, line))
                    .collect::<Vec<_>>()
            })
            .filter(|kept| *kept)
            .count();
        assert_eq!(kept as u64, per_run, "the run keeps exactly its budget");
        let first_cut = &executions[usize::try_from(per_run / 4).unwrap()];
        assert_eq!(
            first_cut.dropped_note().unwrap(),
            format!(
                "4 lines / {} bytes of output dropped: the log budget is {MAX_RUN_LOG_LINES} \
                 lines / {MAX_RUN_LOG_BYTES} bytes per run",
                4 * line
            )
        );
        assert_eq!(executions[0].dropped_note(), None);
    }
}
