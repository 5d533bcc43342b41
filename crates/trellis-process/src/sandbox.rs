//! Contained steps: a child rewritten to run inside a bubblewrap (`bwrap`) sandbox whose only
//! writable trees are the step's own, with a read-only system, a private `HOME` and `/tmp`,
//! its own PID namespace and, unless the policy says otherwise, the network.
//!
//! What the sandbox sees, in mount order (later mounts cover earlier ones):
//! - the system read-only: `/usr`, `/etc`, `/opt`, the `/bin`, `/sbin` and `/lib*` links or
//!   directories, the resolver's runtime directory; fresh `/proc` and `/dev`;
//! - a private `/tmp` and `/var/tmp` (empty tmpfs);
//! - every directory on the child's `PATH` read-only, a `…/bin` directory with its prefix (an
//!   npm or Python prefix keeps its packages beside `bin`), but never the real home itself;
//! - [`Placement::read_only`] read-only, then [`Placement::writable`] (the workspace, an
//!   agent's private home and scratch directory) read-write, each at its own path, and
//!   [`Placement::fresh`] directories made in the private `/tmp` (a command's home).
//!
//! Nothing else exists inside: not the real home, not the Trellis home, not other runs'
//! workspaces. All capabilities are dropped (a root host keeps none inside), the sandbox dies
//! with the runner (`--die-with-parent`), and killing the step's process group kills the
//! namespace's init and with it every process inside.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::spec::ProcessSpec;

/// The sandbox tool's executable name.
pub const BWRAP_PROGRAM: &str = "bwrap";

/// What to install, said in every refusal.
const INSTALL_ADVICE: &str = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; \
     Fedora: dnf install bubblewrap; Arch: pacman -S bubblewrap) or pass --isolation none";

/// System trees every program needs, mounted read-only when present.
const SYSTEM_TREES: [&str; 11] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
    "/run/systemd/resolve",
];

/// Why no sandbox can be built on this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "--isolation sandbox needs bubblewrap (`bwrap`), which is not on PATH: {INSTALL_ADVICE}"
    )]
    NotInstalled,
    #[error(
        "bubblewrap ({path}) cannot build a sandbox on this host ({reason}); user namespaces \
         may be disabled (sysctl kernel.unprivileged_userns_clone=1) — or pass --isolation none"
    )]
    Unusable { path: String, reason: String },
}

/// A working sandbox tool and the policy every contained step shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    bwrap: PathBuf,
    network: bool,
    /// Trees never shown, even under a tree that is (the Trellis home under a `PATH` prefix).
    hidden: Vec<PathBuf>,
}

/// Where one step may write and what else it may read.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// Trees the step writes (its workspace or verifier copy, its private home, its scratch).
    pub writable: Vec<PathBuf>,
    /// Trees the step reads but never writes (git objects a verifier copy borrows).
    pub read_only: Vec<PathBuf>,
    /// The real home, never shown even when a `PATH` entry lies in it.
    pub real_home: Option<PathBuf>,
    /// Empty directories made inside the sandbox's private `/tmp` (a home that lives and dies
    /// with the step).
    pub fresh: Vec<PathBuf>,
}

impl Sandbox {
    /// Finds `bwrap` on `path_env` and proves it can build a sandbox here by starting `true`
    /// in one; `network` says whether contained steps keep the network.
    pub fn detect(path_env: &OsStr, network: bool) -> Result<Self, SandboxError> {
        let bwrap = which::which_in(BWRAP_PROGRAM, Some(path_env), "/")
            .map_err(|_| SandboxError::NotInstalled)?;
        let sandbox = Self {
            bwrap,
            network,
            hidden: Vec::new(),
        };
        sandbox.trial()?;
        Ok(sandbox)
    }

    /// Also hides `trees` (the Trellis home) from every step, wherever a shown tree holds them;
    /// a step's own directories inside them are still shown.
    pub fn hiding(mut self, trees: impl IntoIterator<Item = PathBuf>) -> Self {
        self.hidden.extend(trees);
        self
    }

    /// The `bwrap` this sandbox runs.
    pub fn program(&self) -> &Path {
        &self.bwrap
    }

    /// Whether contained steps keep the network.
    pub fn network(&self) -> bool {
        self.network
    }

    fn trial(&self) -> Result<(), SandboxError> {
        let unusable = |reason: String| SandboxError::Unusable {
            path: self.bwrap.display().to_string(),
            reason,
        };
        let mut args = self.namespace_args();
        args.extend(["--ro-bind", "/", "/", "--", "true"].map(String::from));
        let output = Command::new(&self.bwrap)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| unusable(e.to_string()))?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(unusable(
            stderr
                .lines()
                .last()
                .unwrap_or("it failed without a message")
                .to_owned(),
        ))
    }

    fn namespace_args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--cap-drop",
            "ALL",
        ]
        .map(String::from)
        .to_vec();
        if !self.network {
            args.push("--unshare-net".into());
        }
        args
    }

    /// `spec` rewritten to run inside the sandbox: the program becomes `bwrap` with the mounts
    /// of `placement`, the working directory stays the same path inside, and the environment,
    /// stdin and redaction are unchanged (`bwrap` hands its environment to the program, which
    /// it looks up on that environment's `PATH`).
    pub fn contain(&self, spec: ProcessSpec, placement: &Placement) -> ProcessSpec {
        let mut args = self.namespace_args();
        let system = SYSTEM_TREES.map(Path::new);
        for tree in system {
            match std::fs::read_link(tree) {
                // Merged-/usr systems link /bin to usr/bin: the same link inside.
                Ok(target) => push(&mut args, &["--symlink", &text(&target), &text(tree)]),
                Err(_) if tree.is_dir() => {
                    push(&mut args, &["--ro-bind", &text(tree), &text(tree)])
                }
                Err(_) => {}
            }
        }
        // The private `/tmp` goes first: a `PATH` prefix or a tree of the step's below `/tmp`
        // (a checkout in a temporary directory) is then shown over it, not hidden by it.
        push(
            &mut args,
            &[
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp",
            ],
        );
        let path_env = spec
            .env
            .iter()
            .rev()
            .find(|(name, _)| name == "PATH")
            .map_or("", |(_, value)| value.as_str());
        // Shown trees and hidden ones, shallow first: a deeper mount covers a shallower one, so
        // a hidden home under a shown prefix is masked, and a `PATH` prefix inside the home
        // (`~/.local`) is shown again over that mask — with the Trellis home inside it masked.
        let shown = path_trees(path_env, placement.real_home.as_deref());
        let mut layers: Vec<(&Path, bool)> =
            shown.iter().map(|dir| (dir.as_path(), true)).collect();
        for hidden in self.hidden.iter().chain(&placement.real_home) {
            let covered = shown
                .iter()
                .map(PathBuf::as_path)
                .chain(system)
                .any(|tree| hidden.starts_with(tree) && hidden != tree);
            if covered {
                layers.push((hidden.as_path(), false));
            }
        }
        layers.sort_by_key(|(dir, _)| dir.components().count());
        for (dir, show) in layers {
            if show {
                push(&mut args, &["--ro-bind", &text(dir), &text(dir)]);
            } else {
                push(&mut args, &["--tmpfs", &text(dir)]);
            }
        }
        // A program named by its path is shown read-only, wherever it lies (never its
        // directory: a command's own file is all it is given).
        let program = Path::new(&spec.program);
        if program.is_absolute() && program.exists() {
            push(&mut args, &["--ro-bind", &spec.program, &spec.program]);
        }
        for dir in placement.read_only.iter().filter(|dir| dir.exists()) {
            push(&mut args, &["--ro-bind", &text(dir), &text(dir)]);
        }
        for dir in &placement.writable {
            push(&mut args, &["--bind", &text(dir), &text(dir)]);
        }
        for dir in &placement.fresh {
            push(&mut args, &["--dir", &text(dir)]);
        }
        if !spec.cwd.as_os_str().is_empty() {
            push(&mut args, &["--chdir", &text(&spec.cwd)]);
        }
        push(&mut args, &["--", &spec.program]);
        args.extend(spec.args.iter().cloned());
        ProcessSpec {
            program: text(&self.bwrap),
            args,
            ..spec
        }
    }
}

fn push(args: &mut Vec<String>, words: &[&str]) {
    args.extend(words.iter().map(|word| (*word).to_owned()));
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// The read-only trees `PATH` needs: each existing directory, and for `…/bin` its prefix
/// (unless the prefix is the real home, whose other contents stay hidden).
fn path_trees(path_env: &str, real_home: Option<&Path>) -> Vec<PathBuf> {
    let mut trees: Vec<PathBuf> = Vec::new();
    for dir in std::env::split_paths(path_env) {
        if !dir.is_absolute() {
            continue;
        }
        // `/bin` on a merged-/usr system is `/usr/bin`, which the system trees show already; a
        // missing directory shows nothing. Others are shown at the path `PATH` names.
        let Ok(real) = dir.canonicalize() else {
            continue;
        };
        if !real.is_dir() || SYSTEM_TREES.iter().any(|tree| real.starts_with(tree)) {
            continue;
        }
        let tree = match dir.parent() {
            Some(prefix)
                if dir.file_name() == Some(OsStr::new("bin"))
                    && prefix != Path::new("/")
                    && Some(prefix) != real_home =>
            {
                prefix.to_path_buf()
            }
            _ => dir,
        };
        if Some(tree.as_path()) == real_home {
            continue;
        }
        if !trees.iter().any(|known| tree.starts_with(known)) {
            trees.retain(|known| !known.starts_with(&tree));
            trees.push(tree);
        }
    }
    trees
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_directories_are_shown_with_their_prefix_but_never_the_home() {
        let root =
            std::env::temp_dir().join(format!("trellis-sandbox-paths-{}", std::process::id()));
        let npm_bin = root.join("npm/bin");
        let home = root.join("home");
        let home_bin = home.join("bin");
        let local_bin = home.join(".local/bin");
        for dir in [&npm_bin, &home_bin, &local_bin] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let path = std::env::join_paths([
            npm_bin.as_path(),
            home_bin.as_path(),
            local_bin.as_path(),
            Path::new("relative/bin"),
            // Already shown as the system: never a second mount.
            Path::new("/usr/bin"),
            Path::new("/bin"),
            root.join("missing/bin").as_path(),
        ])
        .unwrap();
        let trees = path_trees(path.to_str().unwrap(), Some(&home));
        assert_eq!(
            trees,
            [root.join("npm"), home_bin, home.join(".local")],
            "an npm prefix keeps its packages; the home itself is never shown"
        );
        assert!(path_trees("", None).is_empty());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_hidden_tree_under_a_shown_prefix_is_masked_after_it_and_the_step_shown_last() {
        let root =
            std::env::temp_dir().join(format!("trellis-sandbox-layers-{}", std::process::id()));
        let home = root.join("home");
        let local_bin = home.join(".local/bin");
        let state = home.join(".local/state/trellis");
        let workspace = state.join("serve-workspaces/run");
        for dir in [&local_bin, &workspace] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let sandbox = Sandbox {
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            network: false,
            hidden: vec![state.clone()],
        };
        let spec = ProcessSpec {
            program: "worker".into(),
            args: vec!["--flag".into()],
            cwd: workspace.clone(),
            env: vec![("PATH".into(), format!("{}:/usr/bin", local_bin.display()))],
            ..ProcessSpec::default()
        };
        let placement = Placement {
            writable: vec![workspace.clone()],
            real_home: Some(home.clone()),
            ..Placement::default()
        };
        let contained = sandbox.contain(spec, &placement);
        assert_eq!(contained.program, "/usr/bin/bwrap");
        let args = contained.args;
        let at = |words: &[&str]| {
            args.windows(words.len())
                .position(|window| window.iter().zip(words).all(|(a, b)| a == b))
                .unwrap_or_else(|| panic!("{words:?} in {args:?}"))
        };
        let local = home.join(".local").display().to_string();
        let state = state.display().to_string();
        let workspace = workspace.display().to_string();
        let shown = at(&["--ro-bind", &local, &local]);
        let masked = at(&["--tmpfs", &state]);
        let step = at(&["--bind", &workspace, &workspace]);
        assert!(shown < masked && masked < step, "{args:?}");
        assert!(args.contains(&"--unshare-net".to_owned()));
        assert!(args.contains(&"--unshare-pid".to_owned()));
        // The home itself is under no shown tree: never mounted, nothing to mask.
        let home = home.display().to_string();
        assert!(!args.iter().any(|word| word == &home), "{args:?}");
        assert_eq!(&args[args.len() - 3..], ["--", "worker", "--flag"]);
        std::fs::remove_dir_all(root).unwrap();
    }
}
