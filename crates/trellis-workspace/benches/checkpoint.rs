//! What a checkpoint costs in a 10,000-file repository (every git process included): the
//! steady state (10 files changed since the previous checkpoint), a run's first checkpoint
//! (private index seeded from the user's), and a restore of 10 changed files. After the
//! criterion groups it prints the CPU time the git processes of one steady-state checkpoint
//! took (from the kernel's account of reaped children), which, unlike wall time, other
//! tenants of a shared machine do not inflate, over a run's first 60 checkpoints and over
//! checkpoints 401-500 of one run, with the packs left in the repository.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use trellis_workspace::{Git, Repository, RunCheckpoints};

const FILES: usize = 10_000;
const CHANGED: usize = 10;

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// A committed repository of `FILES` small files in 100 directories.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    git(dir.path(), &["init", "--quiet"]);
    for i in 0..FILES {
        let sub = dir.path().join(format!("dir{:03}", i % 100));
        std::fs::create_dir_all(&sub).expect("mkdir");
        let body = format!("file {i}\n{}\n", "x".repeat(60 + i % 80));
        std::fs::write(sub.join(format!("file{i:05}.txt")), body).expect("write");
    }
    git(dir.path(), &["add", "--all"]);
    git(dir.path(), &["commit", "--quiet", "-m", "10,000 files"]);
    dir
}

/// Rewrites `CHANGED` files (a different set each round) so each checkpoint has work.
fn change_files(root: &Path, round: u32) {
    for k in 0..CHANGED {
        let i = (round as usize * CHANGED + k * 997) % FILES;
        let path = root
            .join(format!("dir{:03}", i % 100))
            .join(format!("file{i:05}.txt"));
        std::fs::write(path, format!("round {round} file {i}\n")).expect("write");
    }
}

fn checkpoints(c: &mut Criterion) {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().expect("state");
    let git_runner = Git::from_environment();
    let open = |name: &str| {
        RunCheckpoints::new(
            Repository::open(root, &git_runner).expect("repository"),
            name,
            state.path().join(format!("{name}.index")),
            None,
        )
        .expect("checkpoints")
    };
    let run = open("steady");
    run.take(1, "before work").expect("first checkpoint");
    let number = AtomicU32::new(2);

    let mut group = c.benchmark_group("checkpoint_10k_files");
    group.sample_size(30);
    group.bench_function("10_changed_files", |b| {
        b.iter_batched(
            || {
                let n = number.fetch_add(1, Ordering::Relaxed);
                change_files(root, n);
                n
            },
            |n| run.take(n, "before work").expect("checkpoint"),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("first_of_a_run_10_changed_files", |b| {
        b.iter_batched(
            || {
                let n = number.fetch_add(1, Ordering::Relaxed);
                change_files(root, n);
                open(&format!("first-{n}"))
            },
            |fresh| fresh.take(1, "before work").expect("checkpoint"),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("restore_10_changed_files", |b| {
        b.iter_batched(
            || {
                let n = number.fetch_add(1, Ordering::Relaxed);
                let checkpoint = run.take(n, "before work").expect("checkpoint");
                change_files(root, n + 1_000_000);
                checkpoint.tree
            },
            |tree| run.restore(&tree, None).expect("restore"),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

/// User + system CPU of this process's reaped children so far, in milliseconds
/// (`/proc/self/stat` fields 16 and 17, in clock ticks of 10 ms).
fn children_cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("proc stat");
    let after_name = stat.rsplit_once(')').expect("stat format").1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name: state is field 3, so cutime (16) and cstime (17) are at 13 and 14.
    let ticks: f64 = fields[13].parse::<f64>().unwrap() + fields[14].parse::<f64>().unwrap();
    ticks * 10.0
}

/// The packs in the repository's pack directory.
fn pack_count(root: &Path) -> usize {
    std::fs::read_dir(root.join(".git/objects/pack"))
        .expect("pack directory")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        .count()
}

/// Git CPU and wall time per checkpoint over a run's first rounds and over its last ones
/// after hundreds in the same repository (the steady state the packs must not degrade).
fn cpu_per_checkpoint(_: &mut Criterion) {
    const FIRST: u32 = 60;
    const ROUNDS: u32 = 500;
    const LAST: u32 = 100;
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().expect("state");
    let run = RunCheckpoints::new(
        Repository::open(root, &Git::from_environment()).expect("repository"),
        "cpu",
        state.path().join("cpu.index"),
        None,
    )
    .expect("checkpoints");
    run.take(1, "before work").expect("first checkpoint");
    let mut series = Vec::new();
    let mut wall = std::time::Duration::ZERO;
    let mut cpu_start = children_cpu_ms();
    for round in 2..ROUNDS + 2 {
        let index = round - 2;
        if index == FIRST || index == ROUNDS - LAST {
            series.push((index, wall, children_cpu_ms() - cpu_start));
            wall = std::time::Duration::ZERO;
            cpu_start = children_cpu_ms();
        }
        change_files(root, round);
        let started = std::time::Instant::now();
        run.take(round, "before work").expect("checkpoint");
        wall += started.elapsed();
    }
    series.push((ROUNDS, wall, children_cpu_ms() - cpu_start));
    let [(_, first_wall, first_cpu), _, (_, last_wall, last_cpu)] = series[..] else {
        unreachable!("three series");
    };
    let per = |total: f64, n: u32| total / f64::from(n);
    println!(
        "checkpoint_10k_files/10_changed_files: checkpoints 1-{FIRST}: git CPU {:.1} ms, \
         mean wall {:.1} ms; checkpoints {}-{ROUNDS}: git CPU {:.1} ms, mean wall {:.1} ms; \
         {} packs after {ROUNDS}",
        per(first_cpu, FIRST),
        per(first_wall.as_secs_f64() * 1000.0, FIRST),
        ROUNDS - LAST + 1,
        per(last_cpu, LAST),
        per(last_wall.as_secs_f64() * 1000.0, LAST),
        pack_count(root),
    );
}

criterion_group!(benches, checkpoints, cpu_per_checkpoint);
criterion_main!(benches);
