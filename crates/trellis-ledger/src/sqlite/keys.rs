//! Row keys of the per-run tables: the run's row id in the high bits and the event sequence or
//! execution number in the low 32, so that a run's rows are one contiguous range of a single
//! rowid b-tree and a new row lands at the end of it (SQLite then splits pages cheaply).

use crate::error::LedgerError;

/// The largest sequence or execution number a key can hold.
pub(super) const MAX_KEYED_NUMBER: u64 = u32::MAX as u64;

/// The largest run row id a key can hold.
const MAX_KEYED_RUN: i64 = i32::MAX as i64;

/// The key of row `number` of run `run`.
pub(super) fn row_key(run: i64, number: u64) -> Result<i64, LedgerError> {
    if !(1..=MAX_KEYED_RUN).contains(&run) {
        return Err(LedgerError::Internal {
            detail: format!("run row {run} is outside the keyed range"),
        });
    }
    if number > MAX_KEYED_NUMBER {
        return Err(LedgerError::InvalidEvent {
            index: 0,
            reason: format!("a run holds at most {MAX_KEYED_NUMBER} events and executions"),
        });
    }
    Ok((run << 32) | number as i64)
}

/// Every key of run `run`, as an inclusive `(low, high)` range.
pub(super) fn run_keys(run: i64) -> Result<(i64, i64), LedgerError> {
    Ok((row_key(run, 0)?, row_key(run, MAX_KEYED_NUMBER)?))
}

/// The keys of run `run` strictly after `after`, as an inclusive `(low, high)` range.
pub(super) fn keys_after(run: i64, after: u64) -> Result<(i64, i64), LedgerError> {
    let low = row_key(run, after)?;
    let high = row_key(run, MAX_KEYED_NUMBER)?;
    Ok((low.saturating_add(1), high))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_run_are_contiguous_and_ordered_and_runs_do_not_overlap() {
        let run_1_last = row_key(1, MAX_KEYED_NUMBER).unwrap();
        let run_2_first = row_key(2, 0).unwrap();
        assert_eq!(run_1_last + 1, run_2_first);
        assert!(row_key(1, 5).unwrap() < row_key(1, 6).unwrap());
        assert_eq!(
            keys_after(2, 0).unwrap(),
            (run_2_first + 1, row_key(2, MAX_KEYED_NUMBER).unwrap())
        );
        assert_eq!(
            run_keys(2).unwrap(),
            (run_2_first, row_key(2, MAX_KEYED_NUMBER).unwrap())
        );
        assert!(row_key(0, 1).is_err());
        assert!(row_key(1, MAX_KEYED_NUMBER + 1).is_err());
        assert!(row_key(MAX_KEYED_RUN + 1, 1).is_err());
        assert!(row_key(MAX_KEYED_RUN, MAX_KEYED_NUMBER).is_ok());
    }
}
