//! The reference product's binary (Zeroshot 10.19.1, installed by `scripts/install-zeroshot.sh`)
//! as a test oracle: `zeroshot run --validate-only` on a graph, an input and a uniform runtime
//! plan, with an isolated `HOME`, from a scratch git repository with one commit and an
//! `origin` remote, its answer parsed into a [`Verdict`].

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The wheel version `scripts/install-zeroshot.sh` pins.
pub const REFERENCE_WHEEL_VERSION: &str = "10.19.1.post1";
/// What the pinned binary prints for `--version`.
pub const REFERENCE_BINARY_VERSION: &str = "zeroshot 10.19.1";
/// Names the binary explicitly (scripts/test exports it).
pub const REFERENCE_BINARY_ENV: &str = "TRELLIS_ZEROSHOT_BIN";

/// Why the oracle could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error(
        "the reference binary is not installed under CI: run scripts/install-zeroshot.sh or set \
         {REFERENCE_BINARY_ENV}"
    )]
    MissingUnderCi,
    #[error("{REFERENCE_BINARY_ENV} names {0}, which is not a file")]
    NotAFile(PathBuf),
    #[error("the reference binary {0} reports {1:?}, not {REFERENCE_BINARY_VERSION:?}")]
    WrongVersion(PathBuf, String),
    #[error("reference scratch set-up failed: {0}")]
    Scratch(String),
    #[error("cannot run the reference binary: {0}")]
    Spawn(#[from] std::io::Error),
    #[error("the reference did not answer within {0:?}")]
    TimedOut(std::time::Duration),
    #[error("the reference printed nothing recognizable (status {status}): {output}")]
    Unrecognized { status: String, output: String },
}

/// Where the reference stopped with a graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// The graph document did not parse (closed wire types, value rules).
    Parse,
    /// The initial input does not match `initialInput`.
    Input,
    /// Admission of the graph and plan (profile, attempts, bindings, instructions, delivery,
    /// worker reuse, loop iteration inputs).
    Admission,
    /// The production verifier's first diagnostic.
    Verification,
    /// Anything else the binary refused with.
    Other,
}

/// The reference's answer for one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Valid,
    Rejected { stage: Stage, message: String },
}

impl Verdict {
    pub fn is_valid(&self) -> bool {
        matches!(self, Verdict::Valid)
    }

    /// The first diagnostic's message (`None` when valid).
    pub fn message(&self) -> Option<&str> {
        match self {
            Verdict::Valid => None,
            Verdict::Rejected { message, .. } => Some(message),
        }
    }
}

/// One graph with the input and uniform plan to validate it with.
#[derive(Debug, Clone)]
pub struct OracleCase {
    pub graph: Value,
    pub input: Value,
    pub plan: Value,
}

/// The reference binary plus a scratch home and repository to run it in.
#[derive(Debug)]
pub struct Reference {
    binary: PathBuf,
    scratch: tempfile::TempDir,
    /// How long one validation may take before it is killed.
    deadline: std::time::Duration,
}

/// The default per-case deadline: the reference spends seconds to minutes on graphs whose
/// control checks have tens of thousands of assignments.
const DEFAULT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

impl Reference {
    /// Finds the pinned binary: `$TRELLIS_ZEROSHOT_BIN` (an error when it names no file),
    /// else the venv that `scripts/install-zeroshot.sh` makes under `<workspace>/.tools`.
    /// `Ok(None)` (with a note) when it is absent outside CI; under `CI` absence is an error,
    /// so CI never passes by skipping.
    pub fn locate(manifest_dir: &str) -> Result<Option<Self>, ReferenceError> {
        let binary = match std::env::var_os(REFERENCE_BINARY_ENV) {
            Some(path) => {
                let path = PathBuf::from(path);
                if !path.is_file() {
                    return Err(ReferenceError::NotAFile(path));
                }
                Some(path)
            }
            None => installed_binary(manifest_dir),
        };
        match binary.filter(|b| b.is_file()) {
            Some(binary) => Self::with_binary(binary).map(Some),
            None if std::env::var_os("CI").is_some() => Err(ReferenceError::MissingUnderCi),
            None => {
                eprintln!(
                    "note: reference binary not installed; skipping (run scripts/install-zeroshot.sh)"
                );
                Ok(None)
            }
        }
    }

    /// Uses `binary`, after checking its version, with a fresh scratch home and repository.
    pub fn with_binary(binary: PathBuf) -> Result<Self, ReferenceError> {
        let version = Command::new(&binary).arg("--version").output()?;
        let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
        if version != REFERENCE_BINARY_VERSION {
            return Err(ReferenceError::WrongVersion(binary, version));
        }
        let scratch = tempfile::tempdir().map_err(|e| ReferenceError::Scratch(e.to_string()))?;
        for dir in ["home", "repo", "cases"] {
            std::fs::create_dir(scratch.path().join(dir))
                .map_err(|e| ReferenceError::Scratch(e.to_string()))?;
        }
        let repo = scratch.path().join("repo");
        scratch_repository(&repo, &scratch.path().join("home")).map_err(ReferenceError::Scratch)?;
        Ok(Reference {
            binary,
            scratch,
            deadline: DEFAULT_DEADLINE,
        })
    }

    /// Sets how long one validation may take before it is killed and reported as
    /// [`ReferenceError::TimedOut`].
    pub fn with_deadline(mut self, deadline: std::time::Duration) -> Self {
        self.deadline = deadline;
        self
    }

    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// Validates one case; `slot` names the scratch files (one slot per concurrent caller).
    pub fn check(&self, case: &OracleCase, slot: usize) -> Result<Verdict, ReferenceError> {
        let dir = self.scratch.path();
        let file = |what: &str| dir.join("cases").join(format!("{slot}-{what}.json"));
        let (graph, input, plan) = (file("graph"), file("input"), file("plan"));
        for (path, value) in [
            (&graph, &case.graph),
            (&input, &case.input),
            (&plan, &case.plan),
        ] {
            std::fs::write(path, value.to_string())?;
        }
        let mut child = Command::new(&self.binary)
            .args(["run", "--validate-only", "--title", "t", "--graph"])
            .arg(&graph)
            .arg("--input")
            .arg(&input)
            .arg("--uniform-runtime-config")
            .arg(&plan)
            .current_dir(dir.join("repo"))
            .env_clear()
            .env("HOME", dir.join("home"))
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        let started = std::time::Instant::now();
        // The answer is one short line, so the pipes never fill while the child runs.
        while child.try_wait()?.is_none() {
            if started.elapsed() > self.deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ReferenceError::TimedOut(self.deadline));
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let output = child.wait_with_output()?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        parse_answer(text.trim(), &graph).ok_or_else(|| ReferenceError::Unrecognized {
            status: output.status.to_string(),
            output: text,
        })
    }

    /// Validates every case on `workers` threads; answers, each with the time the reference
    /// took, come back in case order.
    pub fn check_all(
        &self,
        cases: &[OracleCase],
        workers: usize,
    ) -> Vec<(Result<Verdict, ReferenceError>, std::time::Duration)> {
        let workers = workers.clamp(1, cases.len().max(1));
        let chunk = cases.len().div_ceil(workers).max(1);
        std::thread::scope(|scope| {
            let handles: Vec<_> = cases
                .chunks(chunk)
                .enumerate()
                .map(|(slot, part)| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|c| {
                                let started = std::time::Instant::now();
                                (self.check(c, slot), started.elapsed())
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| match h.join() {
                    Ok(answers) => answers,
                    Err(panic) => std::panic::resume_unwind(panic),
                })
                .collect()
        })
    }
}

/// The binary inside the venv `scripts/install-zeroshot.sh` makes beside the workspace root.
fn installed_binary(manifest_dir: &str) -> Option<PathBuf> {
    let venv_name = format!("zeroshot-{REFERENCE_WHEEL_VERSION}");
    let venv = Path::new(manifest_dir)
        .ancestors()
        .map(|a| a.join(".tools").join(&venv_name))
        .find(|candidate| candidate.is_dir())?;
    let lib = std::fs::read_dir(venv.join("lib")).ok()?;
    lib.filter_map(Result::ok)
        .map(|python| python.path().join("site-packages/zeroshot/_bin/zeroshot"))
        .find(|binary| binary.is_file())
}

const PREFIX: &str = "zeroshot: ";
const RUN_VALIDATION: &str = "run validation failed: ";
const VERIFICATION: &str = "graph verification rejected the graph: ";
const INPUT: &str = "initial input does not match GraphSpec.initialInput: ";
const PROFILE: &str = "Zeroshot requires graph profile ";

/// Reads what `run --validate-only` printed; `graph_file` is the path it was given (parse
/// errors name it).
fn parse_answer(text: &str, graph_file: &Path) -> Option<Verdict> {
    if serde_json::from_str::<Value>(text).ok() == Some(serde_json::json!({"valid": true})) {
        return Some(Verdict::Valid);
    }
    let rest = text.strip_prefix(PREFIX)?;
    let parse_prefix = format!("graph file {} is not valid JSON: ", graph_file.display());
    let (stage, message) = if let Some(message) = rest.strip_prefix(&parse_prefix) {
        (Stage::Parse, strip_text_location(message))
    } else if let Some(message) = rest.strip_prefix(INPUT) {
        (Stage::Input, message)
    } else if rest.starts_with(PROFILE) {
        (Stage::Admission, rest)
    } else if let Some(message) = rest.strip_prefix(RUN_VALIDATION) {
        match message.strip_prefix(VERIFICATION) {
            Some(message) => (Stage::Verification, message),
            None => (Stage::Admission, message),
        }
    } else {
        (Stage::Other, rest)
    };
    Some(Verdict::Rejected {
        stage,
        message: message.to_owned(),
    })
}

/// Drops serde's ` at line L column C` suffix from a parse error.
pub fn strip_text_location(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(at)
            if message[at + " at line ".len()..]
                .split(" column ")
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            &message[..at]
        }
        _ => message,
    }
}

/// Makes `repo` (an existing directory) a git repository with one empty commit and a
/// credential-free `origin`, git seeing `home` as its home: git delivery nodes are admitted
/// only with such a remote, and the reference refuses a local run without one; nothing ever
/// contacts it.
pub fn scratch_repository(repo: &Path, home: &Path) -> Result<(), String> {
    for args in [
        &["init", "-q"][..],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "scratch",
        ][..],
        &[
            "remote",
            "add",
            "origin",
            "https://github.com/example/scratch.git",
        ][..],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(repo)
            .env("HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .map_err(|e| format!("git: {e}"))?;
        if !status.success() {
            return Err(format!("git {args:?}: {status}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_classified_by_stage() {
        let graph = Path::new("/s/cases/0-graph.json");
        let cases = [
            ("{\"valid\":true}", Verdict::Valid),
            (
                "zeroshot: run validation failed: graph verification rejected the graph: loop exit guard is unsatisfiable",
                Verdict::Rejected {
                    stage: Stage::Verification,
                    message: "loop exit guard is unsatisfiable".into(),
                },
            ),
            (
                "zeroshot: run validation failed: executable node w uses unsupported native-v2 attempt count 3",
                Verdict::Rejected {
                    stage: Stage::Admission,
                    message: "executable node w uses unsupported native-v2 attempt count 3".into(),
                },
            ),
            (
                "zeroshot: initial input does not match GraphSpec.initialInput: $ must be a record",
                Verdict::Rejected {
                    stage: Stage::Input,
                    message: "$ must be a record".into(),
                },
            ),
            (
                "zeroshot: graph file /s/cases/0-graph.json is not valid JSON: integer must be at least 1 at line 1 column 739",
                Verdict::Rejected {
                    stage: Stage::Parse,
                    message: "integer must be at least 1".into(),
                },
            ),
            (
                "zeroshot: Zeroshot requires graph profile openengine.graph.full/v1",
                Verdict::Rejected {
                    stage: Stage::Admission,
                    message: "Zeroshot requires graph profile openengine.graph.full/v1".into(),
                },
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_answer(text, graph), Some(expected), "{text}");
        }
        assert_eq!(parse_answer("segfault", graph), None);
        assert_eq!(
            strip_text_location("x at line 1 column"),
            "x at line 1 column"
        );
    }
}
