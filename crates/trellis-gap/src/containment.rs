//! Where a GaP run's bodies run under `--isolation sandbox`: the Python bridge and command
//! tools rewritten to start inside the sandbox, the run's working directory the only tree
//! they write, the workflow's own files (scripts, skill bundles, tool modules) read-only.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use trellis_process::{Placement, ProcessEnd, ProcessLimits, ProcessSpec, Sandbox, run_blocking};

/// Longest the interpreter may take to say where it lives.
const INTERPRETER_PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// A contained body's `HOME`: an empty directory in the sandbox's private `/tmp`, gone with it.
const SANDBOX_HOME: &str = "/tmp/home";

/// Variables never handed into the sandbox: Trellis's own settings name its home and its
/// ledger (whose URL may carry a password).
const TRELLIS_VARIABLES: &str = "TRELLIS_";

/// How one GaP run contains the processes its bodies start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GapContainment {
    sandbox: Sandbox,
    workspace: PathBuf,
    read_only: Vec<PathBuf>,
    real_home: Option<PathBuf>,
}

impl GapContainment {
    /// Bodies run in `sandbox` with `workspace` (their working directory) as the only
    /// writable tree; `real_home` is never shown, even under a tree that is.
    pub fn new(sandbox: Sandbox, workspace: PathBuf, real_home: Option<PathBuf>) -> Self {
        Self {
            sandbox,
            workspace,
            read_only: Vec::new(),
            real_home,
        }
    }

    /// Also shows `trees` read-only (the workflow's folder, skill bundles, tool modules):
    /// never the real home itself, nothing the workspace already holds.
    pub fn reading(mut self, trees: impl IntoIterator<Item = PathBuf>) -> Self {
        for tree in trees.into_iter().map(|tree| lexical(&tree)) {
            let home = self.real_home.as_deref() == Some(tree.as_path());
            let known = tree.starts_with(&self.workspace)
                || self.read_only.iter().any(|dir| tree.starts_with(dir));
            if !home && !known && tree.is_absolute() && tree != Path::new("/") {
                self.read_only.retain(|dir| !dir.starts_with(&tree));
                self.read_only.push(tree);
            }
        }
        self
    }

    /// The directory bodies run in and write.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The trees shown read-only.
    pub fn read_only(&self) -> &[PathBuf] {
        &self.read_only
    }

    /// `spec` rewritten to run in the sandbox, in the workspace, with a private `HOME` and no
    /// Trellis variables; `also_read` are shown read-only for this process only (an
    /// interpreter's prefix).
    pub(crate) fn contain(&self, mut spec: ProcessSpec, also_read: &[PathBuf]) -> ProcessSpec {
        spec.cwd = self.workspace.clone();
        spec.env.retain(|(name, _)| {
            name != "HOME" && name != "TMPDIR" && !name.starts_with(TRELLIS_VARIABLES)
        });
        spec.env.push(("HOME".into(), SANDBOX_HOME.into()));
        let extra = Self::new(self.sandbox.clone(), self.workspace.clone(), None)
            .reading(self.read_only.iter().cloned())
            .reading(
                also_read
                    .iter()
                    .filter(|tree| Some(tree.as_path()) != self.real_home.as_deref())
                    .cloned(),
            );
        let placement = Placement {
            writable: vec![self.workspace.clone()],
            read_only: extra.read_only,
            real_home: self.real_home.clone(),
            fresh: vec![PathBuf::from(SANDBOX_HOME)],
        };
        self.sandbox.contain(spec, &placement)
    }
}

/// `path` without `.` and `..` components (`…/workspace/../flow`, as a relative workflow path
/// made absolute reads): the sandbox mounts each tree at the path it names.
fn lexical(path: &Path) -> PathBuf {
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    clean
}

/// The interpreter's own executable: the file itself when it (or what it links to) is a
/// native program, else `sys.executable` asked of it outside the sandbox — a version
/// manager's shim found on `PATH` (pyenv's, a script) needs its manager's whole tree and
/// variables, which the sandbox does not show. `None` when it cannot say (the bridge then
/// starts the name as given and reports what failed).
pub(crate) fn real_interpreter(interpreter: &Path) -> Option<PathBuf> {
    let found = if interpreter.is_absolute() {
        Some(interpreter.to_path_buf())
    } else {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(interpreter))
            .find(|candidate| candidate.is_file())
    };
    // Kept as found, not resolved: a virtual environment's interpreter finds its environment
    // from the path it was started by.
    if let Some(found) = found.filter(|file| is_native_program(file)) {
        return Some(found);
    }
    let spec = ProcessSpec {
        program: interpreter.to_string_lossy().into_owned(),
        args: vec!["-c".into(), "import sys; print(sys.executable)".into()],
        cwd: std::env::current_dir().unwrap_or_default(),
        env: std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect(),
        ..ProcessSpec::default()
    };
    let limits = ProcessLimits {
        deadline: Some(INTERPRETER_PROBE_TIMEOUT),
        max_stdout_bytes: 64 * 1024,
        ..ProcessLimits::default()
    };
    let report = run_blocking(&spec, &limits, &|| false, &mut |_, _| {});
    if report.end != (ProcessEnd::Exited { code: 0 }) {
        return None;
    }
    let text = String::from_utf8(report.stdout).ok()?;
    let path = PathBuf::from(text.trim());
    (path.is_absolute() && path.is_file()).then_some(path)
}

/// Whether `file` (followed through links) starts as an ELF program does.
fn is_native_program(file: &Path) -> bool {
    let mut magic = [0_u8; 4];
    std::fs::File::open(file)
        .and_then(|mut handle| std::io::Read::read_exact(&mut handle, &mut magic))
        .is_ok_and(|()| magic == *b"\x7fELF")
}

/// What an interpreter named by its path needs shown: its installation prefix (a virtual
/// environment or a `…/bin` prefix with its libraries), for the path given and the file it
/// links to. An interpreter found on `PATH` needs nothing more (the sandbox shows `PATH`).
pub(crate) fn interpreter_trees(interpreter: &Path) -> Vec<PathBuf> {
    if !interpreter.is_absolute() {
        return Vec::new();
    }
    let prefix = |program: &Path| {
        let dir = program.parent()?;
        if dir.file_name() == Some(OsStr::new("bin")) {
            dir.parent().map(Path::to_path_buf)
        } else {
            Some(dir.to_path_buf())
        }
    };
    let mut trees: Vec<PathBuf> = prefix(interpreter).into_iter().collect();
    if let Some(real) = interpreter
        .canonicalize()
        .ok()
        .and_then(|real| prefix(&real))
        && !trees.contains(&real)
    {
        trees.push(real);
    }
    trees
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This host's sandbox; `None` (the test says so and passes) without a usable `bwrap`.
    fn sandbox() -> Option<Sandbox> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let found = Sandbox::detect(&path, true).ok();
        if found.is_none() {
            eprintln!("skipped: no usable bubblewrap here");
        }
        found
    }

    #[test]
    fn read_only_trees_skip_the_home_the_workspace_and_what_is_shown_already() {
        let Some(sandbox) = sandbox() else { return };
        let containment = GapContainment::new(sandbox, "/w".into(), Some("/home/u".into()))
            .reading([
                PathBuf::from("/home/u"),
                PathBuf::from("/w/scripts"),
                PathBuf::from("/flows/a/tools"),
                PathBuf::from("/flows/a"),
                PathBuf::from("/flows/a/skills"),
                PathBuf::from("/w/../flows/b/./tools"),
                PathBuf::from("relative"),
                PathBuf::from("/"),
                PathBuf::from("/home/u/venv"),
            ]);
        assert_eq!(
            containment.read_only(),
            [
                PathBuf::from("/flows/a"),
                PathBuf::from("/flows/b/tools"),
                PathBuf::from("/home/u/venv")
            ]
        );
    }

    #[test]
    fn a_contained_body_runs_in_the_workspace_with_a_private_home_and_no_trellis_variables() {
        let Some(sandbox) = sandbox() else { return };
        let containment = GapContainment::new(sandbox, "/w".into(), Some("/home/u".into()));
        let spec = ProcessSpec {
            program: "python3".into(),
            cwd: "/elsewhere".into(),
            env: vec![
                ("HOME".into(), "/home/u".into()),
                ("TRELLIS_LEDGER".into(), "postgres://u:secret@db/x".into()),
                ("TRELLIS_HOME".into(), "/home/u/.local/state/trellis".into()),
                ("PATH".into(), "/usr/bin".into()),
            ],
            ..ProcessSpec::default()
        };
        let contained = containment.contain(spec, &[PathBuf::from("/home/u")]);
        assert_eq!(contained.cwd, Path::new("/w"));
        assert_eq!(
            contained.env,
            [
                ("PATH".to_owned(), "/usr/bin".to_owned()),
                ("HOME".to_owned(), SANDBOX_HOME.to_owned())
            ]
        );
        let args = contained.args.join(" ");
        assert!(args.contains("--bind /w /w"), "{args}");
        assert!(args.contains("--dir /tmp/home"), "{args}");
        assert!(args.contains("--chdir /w"), "{args}");
        assert!(!args.contains("--ro-bind /home/u "), "{args}");
    }

    #[test]
    fn a_native_interpreter_is_kept_as_found_and_a_script_is_asked() {
        let dir = std::env::temp_dir().join(format!("trellis-gap-interp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let shim = dir.join("python-shim");
        std::fs::write(&shim, "#!/bin/sh\nexec /no/such/python \"$@\"\n").unwrap();
        let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&shim, executable).unwrap();
        // A script that cannot say where its interpreter is: nothing to name instead.
        assert_eq!(real_interpreter(&shim), None);
        // A native program named through a link stays named by the link.
        let native = std::env::current_exe().unwrap();
        let link = dir.join("python-link");
        std::os::unix::fs::symlink(&native, &link).unwrap();
        assert!(is_native_program(&link));
        assert_eq!(real_interpreter(&link), Some(link.clone()));
        assert!(!is_native_program(&shim));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_interpreter_by_path_shows_its_prefix() {
        assert!(interpreter_trees(Path::new("python3")).is_empty());
        assert_eq!(
            interpreter_trees(Path::new("/opt/venv/bin/python-missing")),
            [PathBuf::from("/opt/venv")]
        );
        assert_eq!(
            interpreter_trees(Path::new("/srv/python-missing")),
            [PathBuf::from("/srv")]
        );
    }
}
