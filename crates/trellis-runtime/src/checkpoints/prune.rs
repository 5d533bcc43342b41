//! Pruning what failed and stopped runs leave behind: checkpoint references of runs a
//! successor superseded or that ended long ago, `refs/trellis/saved/*` older than the cutoff,
//! the `refs/trellis/remote/*` transfers of worker hosts an ended run still has, the worktrees
//! of old failed runs, and the verifier copies of ended runs whose controller died. Runs still going, and runs whose successor is, are never touched, nor are references
//! outside Trellis's namespaces or of runs the ledger does not know.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

use serde::Serialize;
use trellis_ledger::{RunFilter, RunHead, RunStore, TerminalResult};
use trellis_workspace::{
    CHECKPOINT_NAMESPACE, Git, ObjectId, REMOTE_NAMESPACE, Repository, SAVED_NAMESPACE,
    TrellisReference, delete_references, trellis_references,
};

use super::copy_places::CopyPlaces;
use super::operations::{CheckpointOps, retained_workspace, submission_of};
use super::workspace::CHECKPOINT_INDEX;
use crate::shared::error::RuntimeError;

/// How old what `prune` removes by age must be, unless the caller says otherwise: a week.
pub const DEFAULT_PRUNE_AGE_MS: u64 = 7 * 24 * 60 * 60 * 1000;

/// What to prune.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneOptions {
    /// Checkpoints of a chain's latest run, saved states and worktrees are removed once they
    /// are at least this old (checkpoints of superseded runs go at any age).
    pub older_than_ms: u64,
    /// Only report what would be removed.
    pub dry_run: bool,
}

impl Default for PruneOptions {
    fn default() -> Self {
        Self {
            older_than_ms: DEFAULT_PRUNE_AGE_MS,
            dry_run: false,
        }
    }
}

/// What kind of saved state one pruned item was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PrunedKind {
    /// A run's checkpoint references (and its end state and private index).
    Checkpoints,
    /// A workspace state a forced restore kept under `refs/trellis/saved/`.
    Saved,
    /// The worktree a failed `--workspace worktree` run kept.
    Worktree,
    /// Verifier copies a run's controller left when it died (in memory or on disk).
    Copies,
    /// The start and result commits of executions on worker hosts without this host's files
    /// (`refs/trellis/remote/`), left when the run ended before they settled.
    Remote,
}

/// Why it was pruned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PruneReason {
    /// A successor resumed the run, and the whole chain has ended.
    Superseded,
    /// It is older than the cutoff.
    OlderThan,
    /// Its run has ended: nothing uses it again, whatever its age.
    Ended,
}

/// One thing pruned (or, in a dry run, that would be).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrunedItem {
    pub kind: PrunedKind,
    pub run_id: String,
    /// The repository (or, for a worktree, the worktree) it was in.
    pub path: PathBuf,
    /// The references deleted (none for a worktree).
    pub references: Vec<String>,
    pub reason: PruneReason,
}

/// What `prune` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneReport {
    pub dry_run: bool,
    pub older_than_ms: u64,
    pub pruned: Vec<PrunedItem>,
    /// Runs with saved state left alone because they, or a successor, are still going.
    pub live_runs_skipped: Vec<String>,
}

/// Every run the ledger lists, by id.
fn all_heads(store: &dyn RunStore) -> Result<HashMap<String, RunHead>, RuntimeError> {
    let mut heads = HashMap::new();
    let mut filter = RunFilter {
        limit: trellis_ledger::limits::MAX_LISTED_RUNS,
        ..RunFilter::default()
    };
    loop {
        let page = store.list_runs(&filter)?;
        let Some(last) = page.iter().rev().find_map(|run| run.as_ref().ok()) else {
            return Ok(heads);
        };
        filter.after_run = Some(last.run_id.clone());
        let full = page.len() >= filter.effective_limit();
        for head in page.into_iter().flatten() {
            heads.insert(head.run_id.as_str().to_owned(), head);
        }
        if !full {
            return Ok(heads);
        }
    }
}

/// The ledger's view of runs and their chains.
struct Chains {
    heads: HashMap<String, RunHead>,
}

impl Chains {
    /// The run and its successors, in order (a cycle, which the ledger never makes, stops).
    fn chain_from<'a>(&'a self, run: &'a RunHead) -> Vec<&'a RunHead> {
        let mut chain = vec![run];
        let mut seen = HashSet::from([run.run_id.as_str()]);
        let mut current = run;
        while let Some(next) = current
            .successor
            .as_ref()
            .and_then(|id| self.heads.get(id.as_str()))
        {
            if !seen.insert(next.run_id.as_str()) {
                break;
            }
            chain.push(next);
            current = next;
        }
        chain
    }

    /// Whether the run or a successor of it has not finished.
    fn live(&self, run: &RunHead) -> bool {
        self.chain_from(run).iter().any(|r| !r.is_finished())
    }
}

/// The report's item for copies of the ended run `head` at `path`.
fn copies_item(head: &RunHead, path: PathBuf) -> PrunedItem {
    PrunedItem {
        kind: PrunedKind::Copies,
        run_id: head.run_id.as_str().to_owned(),
        path,
        references: Vec::new(),
        reason: PruneReason::Ended,
    }
}

/// The run a Trellis reference belongs to: the path segment after the namespace.
fn run_of<'a>(reference: &'a str, namespace: &str) -> Option<&'a str> {
    let rest = reference.strip_prefix(namespace)?.strip_prefix('/')?;
    rest.split('/').next().filter(|run| !run.is_empty())
}

/// References to delete, by repository (its common git directory).
type Deletions = BTreeMap<PathBuf, Vec<(String, ObjectId)>>;

impl CheckpointOps<'_> {
    /// Removes the checkpoints, saved states and worktrees that no run will use again (see
    /// [`PruneOptions`]), across every repository a run of this ledger worked in.
    pub(crate) fn prune(&self, options: PruneOptions) -> Result<PruneReport, RuntimeError> {
        let cutoff = trellis_ledger::store::now_ms().saturating_sub(options.older_than_ms);
        let git = Git::from_environment();
        let mut report = PruneReport {
            dry_run: options.dry_run,
            older_than_ms: options.older_than_ms,
            pruned: Vec::new(),
            live_runs_skipped: Vec::new(),
        };
        let mut heads = all_heads(self.store)?;
        if !options.dry_run {
            self.end_lost_runs(&mut heads, &mut report)?;
        }
        let chains = Chains { heads };
        // The repositories runs worked in, by their common git directory (a worktree shares
        // its origin's references), and the old failed worktrees.
        let mut repositories: BTreeMap<PathBuf, Repository> = BTreeMap::new();
        let mut worktrees = Vec::new();
        let mut ids: Vec<&String> = chains.heads.keys().collect();
        ids.sort();
        for id in ids {
            let Some(head) = chains.heads.get(id) else {
                continue;
            };
            let record = self.store.record(&head.run_id)?;
            let Some(submission) = submission_of(&record) else {
                continue;
            };
            let places = [
                Some(submission.workspace.clone()),
                submission.handling.worktree_of.clone(),
            ];
            // A workspace that is gone, or on another host, has nothing to prune here.
            if let Some(repo) = places
                .into_iter()
                .flatten()
                .find_map(|place| Repository::discover(&place, &git).ok().flatten())
            {
                let key = repo.common_dir().to_path_buf();
                repositories.entry(key).or_insert(repo);
            }
            if head.is_finished() {
                self.prune_copies(head, options.dry_run, &mut report)?;
            }
            let failed = matches!(head.progress.terminal, Some(TerminalResult::Failed { .. }));
            let old = head.progress.finished_at_ms.is_some_and(|at| at <= cutoff);
            if head.successor.is_none()
                && head.is_finished()
                && failed
                && old
                && let Some(retained) = retained_workspace(&record).filter(|r| r.exists)
            {
                worktrees.push((head.run_id.clone(), retained.path));
            }
        }
        let mut live = BTreeSet::new();
        let mut deletions = Deletions::new();
        for (path, repo) in &repositories {
            let references = trellis_references(repo)?;
            let found = Found {
                chains: &chains,
                cutoff,
                path,
            };
            found.decide(references, &mut report, &mut live, &mut deletions);
        }
        report.live_runs_skipped = live.into_iter().collect();
        if !options.dry_run {
            self.delete_pruned(&repositories, &deletions, &report)?;
        }
        // Worktrees last: removing one is the step most likely to be refused (a lease held),
        // and the references above are gone by then either way.
        for (run_id, path) in worktrees {
            if !options.dry_run {
                self.discard_workspace(&run_id)?;
            }
            report.pruned.push(PrunedItem {
                kind: PrunedKind::Worktree,
                run_id: run_id.as_str().to_owned(),
                path,
                references: Vec::new(),
                reason: PruneReason::OlderThan,
            });
        }
        Ok(report)
    }

    /// Ends `runtime_lost` every listed run whose controller is gone (as `list` does), so it
    /// counts as ended below; the copies that ending removes are reported. A dry run changes
    /// nothing, so there such a run counts as live until something looks at it.
    fn end_lost_runs(
        &self,
        heads: &mut HashMap<String, RunHead>,
        report: &mut PruneReport,
    ) -> Result<(), RuntimeError> {
        for head in heads.values_mut().filter(|head| !head.is_finished()) {
            let copies = CopyPlaces::of_existing_run(self.home, head.run_id.as_str())
                .map(|places| places.existing())
                .unwrap_or_default();
            if !(self.end_if_lost)(self.store, self.home, &head.run_id)? {
                continue;
            }
            *head = self.store.head(&head.run_id)?;
            report.pruned.extend(
                copies
                    .into_iter()
                    .filter(|place| std::fs::symlink_metadata(place).is_err())
                    .map(|path| copies_item(head, path)),
            );
        }
        Ok(())
    }

    /// Removes (or, in a dry run, lists) the verifier copies an ended run still has: only a
    /// controller that died leaves any, and in memory they would stay until a restart.
    fn prune_copies(
        &self,
        head: &RunHead,
        dry_run: bool,
        report: &mut PruneReport,
    ) -> Result<(), RuntimeError> {
        let Some(places) = CopyPlaces::of_existing_run(self.home, head.run_id.as_str()) else {
            return Ok(());
        };
        let existing = places.existing();
        if existing.is_empty() {
            return Ok(());
        }
        if !dry_run {
            places.remove_all()?;
        }
        report
            .pruned
            .extend(existing.into_iter().map(|path| copies_item(head, path)));
        Ok(())
    }

    /// Deletes the references chosen, and the private index of every run whose checkpoints
    /// went.
    fn delete_pruned(
        &self,
        repositories: &BTreeMap<PathBuf, Repository>,
        deletions: &Deletions,
        report: &PruneReport,
    ) -> Result<(), RuntimeError> {
        for (path, references) in deletions {
            if let Some(repo) = repositories.get(path) {
                delete_references(repo, references)?;
            }
        }
        for item in &report.pruned {
            if item.kind == PrunedKind::Checkpoints {
                let index = self.home.run_path(&item.run_id).join(CHECKPOINT_INDEX);
                match std::fs::remove_file(&index) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(RuntimeError::io("cannot remove a checkpoint index", e));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// One repository's Trellis references, judged against the ledger.
struct Found<'a> {
    chains: &'a Chains,
    cutoff: u64,
    path: &'a PathBuf,
}

impl Found<'_> {
    /// Decides which references go: into `report` and `deletions`; runs left alone because
    /// they are going on into `live`.
    fn decide(
        &self,
        references: Vec<TrellisReference>,
        report: &mut PruneReport,
        live: &mut BTreeSet<String>,
        deletions: &mut Deletions,
    ) {
        let mut checkpoints: BTreeMap<String, Vec<(String, ObjectId)>> = BTreeMap::new();
        let mut remote: BTreeMap<String, Vec<(String, ObjectId)>> = BTreeMap::new();
        let mut saved = Vec::new();
        for reference in references {
            let namespace = [SAVED_NAMESPACE, REMOTE_NAMESPACE, CHECKPOINT_NAMESPACE]
                .into_iter()
                .find(|namespace| run_of(&reference.name, namespace).is_some());
            let Some((namespace, run)) =
                namespace.and_then(|ns| Some((ns, run_of(&reference.name, ns)?)))
            else {
                continue;
            };
            // A run this ledger does not know may belong to another ledger, still going.
            let Some(head) = self.chains.heads.get(run) else {
                continue;
            };
            if self.chains.live(head) {
                live.insert(run.to_owned());
                continue;
            }
            match namespace {
                SAVED_NAMESPACE if reference.committed_ms <= self.cutoff => {
                    saved.push((run.to_owned(), reference));
                }
                SAVED_NAMESPACE => {}
                // In transit only while the execution runs: an ended run uses none again.
                REMOTE_NAMESPACE => remote
                    .entry(run.to_owned())
                    .or_default()
                    .push((reference.name, reference.object)),
                _ => checkpoints
                    .entry(run.to_owned())
                    .or_default()
                    .push((reference.name, reference.object)),
            }
        }
        let chosen = deletions.entry(self.path.clone()).or_default();
        for (run, references) in checkpoints {
            let Some(head) = self.chains.heads.get(&run) else {
                continue;
            };
            let old = head
                .progress
                .finished_at_ms
                .is_some_and(|at| at <= self.cutoff);
            let reason = match (&head.successor, old) {
                (Some(_), _) => PruneReason::Superseded,
                (None, true) => PruneReason::OlderThan,
                (None, false) => continue,
            };
            report.pruned.push(PrunedItem {
                kind: PrunedKind::Checkpoints,
                run_id: run,
                path: self.path.clone(),
                references: references.iter().map(|(name, _)| name.clone()).collect(),
                reason,
            });
            chosen.extend(references);
        }
        for (run, references) in remote {
            report.pruned.push(PrunedItem {
                kind: PrunedKind::Remote,
                run_id: run,
                path: self.path.clone(),
                references: references.iter().map(|(name, _)| name.clone()).collect(),
                reason: PruneReason::Ended,
            });
            chosen.extend(references);
        }
        for (run, reference) in saved {
            report.pruned.push(PrunedItem {
                kind: PrunedKind::Saved,
                run_id: run,
                path: self.path.clone(),
                references: vec![reference.name.clone()],
                reason: PruneReason::OlderThan,
            });
            chosen.push((reference.name, reference.object));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_names_its_run_only_inside_the_namespace() {
        let ns = CHECKPOINT_NAMESPACE;
        assert_eq!(run_of(&format!("{ns}/run-1/3"), ns), Some("run-1"));
        assert_eq!(run_of(&format!("{ns}/run-1/end"), ns), Some("run-1"));
        assert_eq!(run_of(&format!("{ns}x/run-1/3"), ns), None);
        assert_eq!(run_of("refs/heads/main", ns), None);
        assert_eq!(run_of(&format!("{ns}//3"), ns), None);
        let remote = REMOTE_NAMESPACE;
        assert_eq!(
            run_of(&format!("{remote}/run-1/4/start"), remote),
            Some("run-1")
        );
        assert_eq!(run_of(&format!("{remote}/run-1/4/start"), ns), None);
    }
}
