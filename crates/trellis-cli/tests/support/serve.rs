//! One `trellis serve` process on loopback for the subprocess tests: started with a bearer
//! token from an environment variable, its workspaces beside the sandbox's state, its output kept.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Child;

use serde_json::Value;

use super::Sandbox;

/// The environment variable the server reads its bearer token from.
pub const TOKEN_ENV: &str = "TEAM_TOKEN";

/// A running `trellis serve`, killed (SIGKILL) when dropped.
pub struct Server {
    child: Option<Child>,
    /// `http://ADDRESS` it listens on.
    pub base: String,
    /// The first line it printed (`{"listening": …, "tokens": […]}`).
    pub listening: Value,
    output: Option<std::thread::JoinHandle<String>>,
}

/// The directory the server keeps submitted runs' workspaces in.
pub fn served_workspaces(sandbox: &Sandbox) -> PathBuf {
    sandbox.home.with_file_name("served")
}

impl Server {
    /// `trellis serve` on an ephemeral port with `token`, on `ledger` (else the sandbox's
    /// SQLite), `extra` arguments and `env`; `TRELLIS_DISPATCH` is cleared unless `env` sets it.
    pub fn start(
        sandbox: &Sandbox,
        token: &str,
        ledger: Option<&str>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let workspaces = served_workspaces(sandbox);
        let mut args = vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-env",
            TOKEN_ENV,
            "--workspaces",
            workspaces.to_str().expect("UTF-8 path"),
        ];
        if let Some(ledger) = ledger {
            args.extend(["--ledger", ledger]);
        }
        args.extend(extra);
        // The python test worker's script lies outside every workspace, which a sandbox (serve's
        // default) does not show: these servers run as before unless a test asks for one.
        if !extra.contains(&"--isolation") {
            args.extend(["--isolation", "none"]);
        }
        let mut command = sandbox.command(&args);
        command
            .env(TOKEN_ENV, token)
            .env_remove("TRELLIS_DISPATCH")
            .envs(env.iter().copied());
        let mut child = command.spawn().expect("start trellis serve");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stdout).lines();
        let first = lines
            .next()
            .and_then(Result::ok)
            .expect("trellis serve says where it listens");
        let listening: Value = serde_json::from_str(&first).expect("a JSON line");
        let address = listening["listening"].as_str().expect("address").to_owned();
        let output = std::thread::spawn(move || {
            let mut text = lines.map_while(Result::ok).collect::<Vec<_>>().join("\n");
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut rest);
            text.push_str(&rest);
            text
        });
        Self {
            child: Some(child),
            base: format!("http://{address}"),
            listening,
            output: Some(output),
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Kills the server (SIGKILL) and returns everything it printed.
    pub fn kill(mut self) -> String {
        self.stop();
        self.output
            .take()
            .map(|output| output.join().expect("output reader"))
            .unwrap_or_default()
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
