//! Property: whatever a worker does after a checkpoint (write, delete, change modes, replace
//! files by directories or links), restoring the checkpoint gives back exactly its files.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use support::{Entry, checkpoints, picture, repository, set_mode};

const PATHS: [&str; 7] = [
    "a.txt",
    "b",
    "b/c.txt",
    "b/d.bin",
    "e/f/g.txt",
    "src/lib.rs",
    "README.md",
];

#[derive(Debug, Clone)]
enum Op {
    Write(usize, Vec<u8>),
    Delete(usize),
    Executable(usize, bool),
    Link(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let path = 0..PATHS.len();
    prop_oneof![
        3 => (path.clone(), proptest::collection::vec(any::<u8>(), 0..64))
            .prop_map(|(p, bytes)| Op::Write(p, bytes)),
        2 => path.clone().prop_map(Op::Delete),
        1 => (path.clone(), any::<bool>()).prop_map(|(p, x)| Op::Executable(p, x)),
        1 => (path.clone(), path).prop_map(|(p, t)| Op::Link(p, t)),
    ]
}

/// Makes room for a file at `relative`: ancestors that are not directories and a directory
/// at the path itself go.
fn make_room(root: &Path, relative: &str) {
    let path = root.join(relative);
    let mut ancestor = root.to_path_buf();
    for part in Path::new(relative)
        .parent()
        .into_iter()
        .flat_map(Path::components)
    {
        ancestor.push(part);
        if let Ok(m) = std::fs::symlink_metadata(&ancestor)
            && !m.is_dir()
        {
            std::fs::remove_file(&ancestor).unwrap();
        }
    }
    if let Ok(m) = std::fs::symlink_metadata(&path) {
        if m.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
}

fn apply(root: &Path, op: &Op) {
    match op {
        Op::Write(p, bytes) => {
            make_room(root, PATHS[*p]);
            std::fs::write(root.join(PATHS[*p]), bytes).unwrap();
        }
        Op::Delete(p) => {
            let path = root.join(PATHS[*p]);
            if let Ok(m) = std::fs::symlink_metadata(&path) {
                if m.is_dir() {
                    std::fs::remove_dir_all(&path).unwrap();
                } else {
                    std::fs::remove_file(&path).unwrap();
                }
            }
        }
        Op::Executable(p, executable) => {
            let path = root.join(PATHS[*p]);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                set_mode(&path, if *executable { 0o755 } else { 0o644 });
            }
        }
        Op::Link(p, target) => {
            make_room(root, PATHS[*p]);
            std::os::unix::fs::symlink(PATHS[*target], root.join(PATHS[*p])).unwrap();
        }
    }
}

/// Files and links only: git records no empty directory, so none is compared.
fn files(root: &Path) -> BTreeMap<String, Entry> {
    picture(root)
        .into_iter()
        .filter(|(_, entry)| !matches!(entry, Entry::Dir))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn restore_gives_back_exactly_the_checkpointed_files(
        before in proptest::collection::vec(op(), 0..8),
        after in proptest::collection::vec(op(), 1..10),
    ) {
        let repo = repository();
        let root = repo.path();
        let state = tempfile::tempdir().unwrap();
        for op in &before {
            apply(root, op);
        }
        let run = checkpoints(root, "prop", state.path());
        let checkpoint = run.take(1, "before work").unwrap();
        let expected = files(root);
        for op in &after {
            apply(root, op);
        }
        run.restore(&checkpoint.tree, None).unwrap();
        prop_assert_eq!(files(root), expected);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Later checkpoints of a run are written from what `git add` reports changed since the
    /// previous one; each must hold exactly what a fresh, full staging of the working tree
    /// gives, and restore to exactly the files it saw.
    #[test]
    fn each_later_checkpoint_equals_a_full_snapshot_and_restores_exactly(
        rounds in proptest::collection::vec(proptest::collection::vec(op(), 1..6), 1..4),
    ) {
        let repo = repository();
        let root = repo.path();
        let state = tempfile::tempdir().unwrap();
        let run = checkpoints(root, "chain", state.path());
        run.take(1, "first").unwrap();
        let mut taken = Vec::new();
        for (round, ops) in rounds.iter().enumerate() {
            for op in ops {
                apply(root, op);
            }
            let number = u32::try_from(round).unwrap() + 2;
            let checkpoint = run.take(number, "later").unwrap();
            let fresh = checkpoints(root, &format!("fresh{number}"), state.path());
            prop_assert_eq!(&checkpoint.tree, &fresh.snapshot().unwrap());
            taken.push((checkpoint.tree, files(root)));
        }
        for (tree, expected) in taken.iter().rev() {
            run.restore(tree, None).unwrap();
            prop_assert_eq!(&files(root), expected);
        }
    }
}
