//! `trellis prune`: removes the saved state failed and stopped runs leave behind (checkpoint
//! references, workspace states a forced restore kept, worktrees of old failed runs).

use clap::Args;
use trellis_runtime::{PruneOptions, PruneReason, PrunedKind, Runtime};

/// Milliseconds in one unit of `--older-than`.
const UNITS: [(&str, u64); 5] = [
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
    ("w", 604_800_000),
];

#[derive(Debug, Args)]
#[command(
    after_help = "What goes, across every git repository a run of this ledger worked in:\n\
  - the checkpoints (refs/trellis/checkpoints/RUN/*) of a finished run that a successor\n    \
    resumed, once the whole chain has ended (the successor took over from them);\n\
  - the checkpoints of the latest run of a chain that ended more than --older-than ago;\n\
  - workspace states a forced restore kept (refs/trellis/saved/RUN/*) older than that;\n\
  - the worktree a failed `--workspace worktree` run kept, when it ended longer ago;\n\
  - the verifier copies (in /dev/shm or the run directory) of any ended run, whatever its\n    \
  age: only a controller that died leaves them. A run whose controller is gone is first\n    \
  ended `runtime_lost`, as `list` does (not with --dry-run, which changes nothing).\n\
A run that is still going, or whose successor is, keeps everything; references outside\n\
refs/trellis/ and those of runs this ledger does not know are never touched. A succeeded\n\
run prunes its own checkpoints (and its predecessors') when it ends. The commits go with\n\
git's next garbage collection."
)]
pub struct PruneArgs {
    /// Age after which the latest run's checkpoints, saved states and failed worktrees go:
    /// a number with s, m, h, d or w (`0s` takes everything that is not live).
    #[arg(long, value_name = "DURATION", default_value = "7d", value_parser = parse_age)]
    pub older_than: u64,
    /// Only show what would be removed.
    #[arg(long)]
    pub dry_run: bool,
    /// One JSON document: `{"dryRun", "olderThanMs", "pruned": […], "liveRunsSkipped"}`.
    #[arg(long)]
    pub json: bool,
}

/// Reads `30s`, `15m`, `12h`, `7d`, `2w` as milliseconds.
pub fn parse_age(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 30s, 12h or 7d"))?;
    let Some((_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
        return Err(format!("{text:?}: the unit must be one of s, m, h, d, w"));
    };
    number
        .checked_mul(*scale)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// Prunes, then says what went (or would go).
pub fn prune(runtime: &Runtime, args: &PruneArgs) -> anyhow::Result<u8> {
    let report = runtime.prune(PruneOptions {
        older_than_ms: args.older_than,
        dry_run: args.dry_run,
    })?;
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
        return Ok(0);
    }
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    if report.pruned.is_empty() {
        outln!("nothing to prune");
    }
    for item in &report.pruned {
        let what = match item.kind {
            PrunedKind::Checkpoints => format!("{} checkpoint reference(s)", item.references.len()),
            PrunedKind::Saved => format!("saved state {}", item.references.join(" ")),
            PrunedKind::Worktree => "worktree".to_owned(),
            PrunedKind::Copies => "verifier copies".to_owned(),
            PrunedKind::Remote => format!(
                "{} worker-host transfer reference(s)",
                item.references.len()
            ),
        };
        let why = match item.reason {
            PruneReason::Superseded => "resumed by a successor",
            PruneReason::OlderThan => "older than the cutoff",
            PruneReason::Ended => "the run has ended",
        };
        outln!(
            "{verb} {what} of run {} in {} ({why})",
            item.run_id,
            item.path.display()
        );
    }
    if !report.live_runs_skipped.is_empty() {
        outln!(
            "left alone (still going, or a successor is): {}",
            report.live_runs_skipped.join(", ")
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_with_their_unit() {
        assert_eq!(parse_age("0s"), Ok(0));
        assert_eq!(parse_age("90s"), Ok(90_000));
        assert_eq!(parse_age("15m"), Ok(900_000));
        assert_eq!(parse_age("7d"), Ok(604_800_000));
        assert_eq!(parse_age("2w"), Ok(1_209_600_000));
        for bad in ["", "7", "d", "7y", "-1d", "1.5h", "99999999999999999999w"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }
}
