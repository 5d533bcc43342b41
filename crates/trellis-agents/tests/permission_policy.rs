//! Outside a Trellis sandbox the user's own agent permission policy is respected instead of
//! bypassed: Claude Code's `permissions` (here the workspace's `.claude/settings.json`) and the
//! `sandbox_mode` of the user's Codex `config.toml`; without one, the bypass and Trellis's own
//! Codex sandbox settings apply as before (issue 33).

mod support;

use support::*;
use trellis_agents::{HarnessKind, LogStream, Provider};
use trellis_graph::WorkerOutcome;

#[tokio::test]
async fn claude_runs_under_the_permissions_the_user_authored() {
    let fake = Fake::new(HarnessKind::Claude);
    fake.turns(&["reply"]);
    let (result, _) = run(&fake.harness(), fake.request(1)).await;
    assert!(matches!(result.outcome, WorkerOutcome::Verified { .. }));
    assert!(
        fake.argv(1)
            .contains(&"--dangerously-skip-permissions".to_owned()),
        "no policy authored: the bypass"
    );

    let settings = fake.path("ws").join(".claude");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("settings.json"),
        r#"{"permissions": {"deny": ["Bash(curl:*)"]}}"#,
    )
    .unwrap();
    fake.turns(&["reply"]);
    let (result, events) = run(&fake.harness(), fake.request(2)).await;
    assert!(
        matches!(result.outcome, WorkerOutcome::Verified { .. }),
        "{events:?}"
    );
    let argv = fake.argv(2);
    assert!(
        !argv.contains(&"--dangerously-skip-permissions".to_owned()),
        "{argv:?}"
    );
    let mode = argv.iter().position(|a| a == "--permission-mode");
    assert_eq!(
        mode.and_then(|i| argv.get(i + 1)).map(String::as_str),
        Some("acceptEdits"),
        "{argv:?}"
    );
    assert!(!fake.env(2).contains_key("IS_SANDBOX"));
    assert!(has_log(
        &events,
        LogStream::System,
        "respecting the Claude Code permissions"
    ));
}

#[tokio::test]
async fn codex_keeps_the_sandbox_mode_of_the_users_configuration() {
    let fake = Fake::new(HarnessKind::Codex);
    let codex_home = fake.path("home").join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let native = |execution| {
        let mut request = fake.request(execution);
        set_binding(&mut request, |b| b.connections.clear());
        request
    };
    fake.turns(&["reply"]);
    let (result, events) = run(&fake.harness_on(Provider::Openai), native(1)).await;
    assert!(
        matches!(result.outcome, WorkerOutcome::Verified { .. }),
        "{events:?}"
    );
    assert!(
        fake.argv(1)
            .contains(&"sandbox_mode=\"workspace-write\"".to_owned()),
        "{:?}",
        fake.argv(1)
    );

    std::fs::write(
        codex_home.join("config.toml"),
        "sandbox_mode = \"read-only\"\n[profiles.x]\napproval_policy = \"on-request\"\n",
    )
    .unwrap();
    fake.turns(&["reply"]);
    let (result, events) = run(&fake.harness_on(Provider::Openai), native(2)).await;
    assert!(
        matches!(result.outcome, WorkerOutcome::Verified { .. }),
        "{events:?}"
    );
    let argv = fake.argv(2);
    assert!(
        !argv.iter().any(|a| a.starts_with("sandbox_mode=")),
        "{argv:?}"
    );
    assert!(
        !argv
            .iter()
            .any(|a| a.starts_with("sandbox_workspace_write.")),
        "{argv:?}"
    );
    // Only the top level counts: the profile's approval policy is not the user's default.
    assert!(
        argv.contains(&"approval_policy=\"never\"".to_owned()),
        "{argv:?}"
    );
    assert!(has_log(
        &events,
        LogStream::System,
        "respecting sandbox_mode from your Codex configuration"
    ));
}
