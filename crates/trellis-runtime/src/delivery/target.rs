//! Bringing the target branch into the run branch: fetch it, merge it into the candidate with
//! `git merge-tree` (no index, HEAD or branch of the user's moves), and reflect the result in
//! the work tree — a clean merge becomes the candidate (sent back through the worker's round
//! and the reviewers first when it changed what they judged), a conflict is left in the files (with
//! conflict markers) for the next round's worker to resolve, and the commit that resolves it
//! gets the target as a second parent.

use std::path::Path;

use trellis_process::ProcessEnd;

use super::git::{DeliveryFailure, Git, crash, record_pending_merge};

/// What merging the target into the candidate did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TargetMerge {
    /// The candidate already contains the target's tip (or the target was not merged).
    UpToDate,
    /// The target merged cleanly: the merge commit (the new candidate), the target's tip, and
    /// the paths the merge changed in the candidate.
    Merged {
        commit: String,
        target: String,
        changed: Vec<String>,
    },
    /// The merge conflicts: the target's tip and the conflicted paths, which the work tree now
    /// holds with conflict markers.
    Conflicted { target: String, paths: Vec<String> },
    /// The candidate itself still holds conflict markers (a resolution left unfinished) in
    /// these paths; the target was not merged again.
    Unresolved { paths: Vec<String> },
}

/// Where a target is merged: the candidate commit (the work tree's content as committed), the
/// run branch, the reference that records the last delivered commit, and the execution that
/// merges (named in a pending merge, see [`drop_pending_merges_from`]).
pub(super) struct MergeInto<'a> {
    pub candidate: &'a str,
    pub branch: &'a str,
    pub delivered_ref: &'a str,
    pub run_id: &'a str,
    pub execution: u64,
}

/// Fetches `target_branch` from `remote` and merges it into the candidate, updating the work
/// tree to the merged (or conflicted) result; a clean merge commit is recorded as the last
/// delivered one.
pub(super) async fn merge_target(
    git: &Git<'_>,
    remote: &str,
    target_branch: &str,
    into: MergeInto<'_>,
    log: &(dyn Fn(String) + Sync),
) -> Result<TargetMerge, DeliveryFailure> {
    let MergeInto {
        candidate,
        branch,
        delivered_ref,
        ..
    } = into;
    let tracking = format!("refs/remotes/{remote}/{target_branch}");
    log(format!(
        "delivery: fetching {target_branch} from {remote} to merge it into the run branch"
    ));
    git.run(&[
        "fetch",
        "--quiet",
        "--no-tags",
        remote,
        &format!("+refs/heads/{target_branch}:{tracking}"),
    ])
    .await?;
    let target = git
        .run(&["rev-parse", "--verify", &format!("{tracking}^{{commit}}")])
        .await?;
    if git
        .succeeds(&["merge-base", "--is-ancestor", &target, candidate])
        .await?
    {
        return Ok(TargetMerge::UpToDate);
    }
    let label = format!("{remote}/{target_branch}");
    let (end, stdout, stderr) = git
        .call(&[
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            candidate,
            &target,
        ])
        .await?;
    // merge-tree exits 0 for a clean merge and 1 for conflicts; anything else is a failure.
    let conflicted = match end {
        ProcessEnd::Exited { code: 0 } => false,
        ProcessEnd::Exited { code: 1 } => true,
        _ => {
            return Err(crash(format!(
                "git merge-tree failed ({}): {}",
                end.describe(),
                stderr.trim()
            )));
        }
    };
    let mut lines = stdout.lines();
    let merged_tree = lines.next().unwrap_or_default().trim().to_owned();
    if merged_tree.is_empty() {
        return Err(crash("git merge-tree wrote no tree".into()));
    }
    let candidate_tree = git
        .run(&["rev-parse", &format!("{candidate}^{{tree}}")])
        .await?;
    update_work_tree(git, branch, &candidate_tree, &merged_tree).await?;
    if conflicted {
        let paths: Vec<String> = lines
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        record_pending_merge(git, branch, &target, (into.run_id, into.execution)).await?;
        log(format!(
            "delivery: merging {label} conflicts in {}; the conflicts are left in the work tree",
            paths.join(", ")
        ));
        return Ok(TargetMerge::Conflicted { target, paths });
    }
    let changed = git
        .run(&["diff", "--name-only", &candidate_tree, &merged_tree])
        .await?
        .lines()
        .map(str::to_owned)
        .collect();
    let message = format!("Merge {label} into {branch}");
    let commit = git
        .run(&[
            "commit-tree",
            &merged_tree,
            "-p",
            candidate,
            "-p",
            &target,
            "-m",
            &message,
        ])
        .await?;
    git.run(&["update-ref", delivered_ref, &commit]).await?;
    log(format!("delivery: merged {label} ({target}) cleanly"));
    Ok(TargetMerge::Merged {
        commit,
        target,
        changed,
    })
}

/// Moves the work tree from `from` (its content now) to `to` through a private index: changed
/// files are rewritten, removed ones deleted; the user's index is not read or written.
async fn update_work_tree(
    git: &Git<'_>,
    branch: &str,
    from: &str,
    to: &str,
) -> Result<(), DeliveryFailure> {
    let short = branch.strip_prefix("trellis/").unwrap_or(branch);
    let private = git
        .run(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-path",
            &format!("trellis-merge-{short}.index"),
        ])
        .await?;
    let private = Path::new(&private);
    let _ = std::fs::remove_file(private);
    let _ = std::fs::remove_file(format!("{}.lock", private.display()));
    let result = async {
        git.run_with(&["read-tree", from], Some(private)).await?;
        // Fresh entries carry no stat data: refresh them so read-tree sees a clean tree (the
        // exit status only says some needed it).
        git.call_with(&["update-index", "-q", "--refresh"], Some(private))
            .await?;
        git.run_with(&["read-tree", "-m", "-u", from, to], Some(private))
            .await
    }
    .await;
    let _ = std::fs::remove_file(private);
    result.map(|_| ())
}

/// The paths in which `head` adds conflict-marker lines compared with `base` (what `git diff
/// --check` calls a leftover conflict marker), in order, each once — except files exactly as
/// the target branch (`remote`/`target_branch`, as last fetched) has them: markers the target
/// itself holds (a test fixture, say) are not the run's.
pub(super) async fn leftover_markers(
    git: &Git<'_>,
    (base, head): (&str, &str),
    remote: &str,
    target_branch: &str,
) -> Result<Vec<String>, DeliveryFailure> {
    // Exit status 2 only says that something was found (whitespace errors count too).
    let (_, stdout, _) = git
        .call(&["diff", "--check", "--no-color", base, head])
        .await?;
    let mut paths: Vec<String> = Vec::new();
    for line in stdout.lines() {
        let Some(place) = line.strip_suffix(": leftover conflict marker") else {
            continue;
        };
        let Some((path, _line)) = place.rsplit_once(':') else {
            continue;
        };
        if !paths.iter().any(|p| p == path) {
            paths.push(path.to_owned());
        }
    }
    if paths.is_empty() {
        return Ok(paths);
    }
    // A lone `=======` line is also a Markdown heading underline: count only files that hold
    // both an opening and a closing marker.
    let mut args = vec![
        "grep",
        "-l",
        "--all-match",
        "-e",
        "^<<<<<<<",
        "-e",
        "^>>>>>>>",
        head,
        "--",
    ];
    args.extend(paths.iter().map(String::as_str));
    let (_, listed, _) = git.call(&args).await?;
    let prefix = format!("{head}:");
    let marked: Vec<&str> = listed
        .lines()
        .map(|l| l.strip_prefix(&prefix).unwrap_or(l))
        .collect();
    paths.retain(|p| marked.contains(&p.as_str()));
    let tracking = format!("refs/remotes/{remote}/{target_branch}");
    let mut ours = Vec::new();
    for path in paths {
        let at_head = blob_at(git, head, &path).await;
        if at_head != blob_at(git, &tracking, &path).await {
            ours.push(path);
        }
    }
    Ok(ours)
}

/// The blob of `path` in `commit`, if it has one.
async fn blob_at(git: &Git<'_>, commit: &str, path: &str) -> Option<String> {
    git.run(&[
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{commit}:{path}"),
    ])
    .await
    .ok()
}

/// The diagnostic of a resolution that left conflict markers behind.
pub(super) fn unresolved_message(paths: &[String]) -> String {
    format!(
        "These files still hold conflict markers (<<<<<<<, =======, >>>>>>>): {}. Finish \
         resolving them keeping the intent of both sides, and remove all markers.",
        paths.join(", ")
    )
}

/// The diagnostic of a target merged cleanly into the work tree that changed what the
/// reviewers judged: the next round builds and tests it and the reviewers judge it again.
pub(super) fn merged_message(target_branch: &str, target: &str, changed: &[String]) -> String {
    let short: String = target.chars().take(12).collect();
    format!(
        "{target_branch} moved (now at {short}) and was merged into the workspace cleanly, \
         changing {}. The merged result has not been reviewed: build it and run its tests, fix \
         anything the merge broke, and change nothing else.",
        changed.join(", ")
    )
}

/// Whether a target merge changed the candidate the reviewers judged, so that what would be
/// pushed has to be reviewed again first.
pub(super) fn needs_review_again(merge: &TargetMerge) -> bool {
    matches!(merge, TargetMerge::Merged { changed, .. } if !changed.is_empty())
}

/// The diagnostic of a conflict left in the work tree.
pub(super) fn conflict_message(target_branch: &str, target: &str, paths: &[String]) -> String {
    let short: String = target.chars().take(12).collect();
    format!(
        "The change conflicts with {target_branch} (at {short}). {target_branch} was merged into \
         the workspace and these files now hold conflict markers (<<<<<<<, =======, >>>>>>>): \
         {}. Resolve every conflict keeping the intent of both sides, and remove all markers.",
        paths.join(", ")
    )
}
