//! Native lanes keep the user's own agent configuration (a proxy's base URL, Claude's
//! configuration directory) from the environment the execution runs in; a declared connection
//! of the same name wins; lanes that set the endpoint themselves keep theirs.

mod support;

use std::collections::BTreeMap;

use support::*;
use trellis_agents::{HarnessKind, Provider};
use trellis_graph::WorkerOutcome;

const USER_PROXY: &str = "http://127.0.0.1:9/user-proxy";
const DECLARED_PROXY: &str = "http://127.0.0.1:9/declared-proxy";

/// A native-lane request of `fake` whose base environment holds the user's configuration;
/// `declared` adds a connection of the base-URL variable with another value.
fn native_request(
    fake: &Fake,
    provider: Provider,
    config_dir: &str,
    declared: bool,
) -> trellis_agents::ExecutionRequest {
    let mut request = fake.request(1);
    let url_variable = match provider {
        Provider::Anthropic => "ANTHROPIC_BASE_URL",
        _ => "OPENAI_BASE_URL",
    };
    set_binding(&mut request, |b| {
        b.connections = if declared {
            BTreeMap::from([("endpoint".to_owned(), vec![url_variable.to_owned()])])
        } else {
            BTreeMap::new()
        };
        b.model = String::new();
    });
    request.environment = trellis_agents::SecretEnv::new(if declared {
        BTreeMap::from([(url_variable.to_owned(), DECLARED_PROXY.to_owned())])
    } else {
        BTreeMap::new()
    });
    request.base_env.extend([
        ("ANTHROPIC_BASE_URL".to_owned(), USER_PROXY.to_owned()),
        ("OPENAI_BASE_URL".to_owned(), USER_PROXY.to_owned()),
        ("CLAUDE_CONFIG_DIR".to_owned(), config_dir.to_owned()),
    ]);
    request
}

#[tokio::test]
async fn native_lanes_keep_the_users_endpoint_and_configuration_directory() {
    for (kind, provider, url_variable) in [
        (
            HarnessKind::Claude,
            Provider::Anthropic,
            "ANTHROPIC_BASE_URL",
        ),
        (HarnessKind::Codex, Provider::Openai, "OPENAI_BASE_URL"),
    ] {
        let fake = Fake::new(kind);
        fake.turns(&["reply"]);
        let config_dir = fake.path("claude-config").display().to_string();
        let request = native_request(&fake, provider, &config_dir, false);
        let (result, events) = run(&fake.harness_on(provider), request).await;
        assert!(
            matches!(result.outcome, WorkerOutcome::Verified { .. }),
            "{kind:?}: {events:?}"
        );
        let env = fake.env(1);
        assert_eq!(env.get(url_variable).map(String::as_str), Some(USER_PROXY));
        if kind == HarnessKind::Claude {
            assert_eq!(env["CLAUDE_CONFIG_DIR"], config_dir);
        } else {
            // Another CLI's settings are not its business.
            assert!(!env.contains_key("CLAUDE_CONFIG_DIR"), "{env:?}");
            assert!(!env.contains_key("ANTHROPIC_BASE_URL"), "{env:?}");
        }
    }
}

#[tokio::test]
async fn a_declared_connection_wins_over_the_users_configuration() {
    for (kind, provider, url_variable) in [
        (
            HarnessKind::Claude,
            Provider::Anthropic,
            "ANTHROPIC_BASE_URL",
        ),
        (HarnessKind::Codex, Provider::Openai, "OPENAI_BASE_URL"),
    ] {
        let fake = Fake::new(kind);
        fake.turns(&["reply"]);
        let request = native_request(&fake, provider, "/nonexistent/config", true);
        let (result, events) = run(&fake.harness_on(provider), request).await;
        assert!(
            matches!(result.outcome, WorkerOutcome::Verified { .. }),
            "{kind:?}: {events:?}"
        );
        let env = fake.env(1);
        assert_eq!(
            env.get(url_variable).map(String::as_str),
            Some(DECLARED_PROXY),
            "{kind:?}"
        );
    }
}

#[tokio::test]
async fn the_gateway_lane_keeps_its_own_endpoint() {
    let fake = Fake::new(HarnessKind::Claude);
    fake.turns(&["reply"]);
    let mut request = fake.request(1);
    request
        .base_env
        .push(("ANTHROPIC_BASE_URL".to_owned(), USER_PROXY.to_owned()));
    let (result, events) = run(&fake.harness(), request).await;
    assert!(
        matches!(result.outcome, WorkerOutcome::Verified { .. }),
        "{events:?}"
    );
    assert_eq!(fake.env(1)["ANTHROPIC_BASE_URL"], GATEWAY_URL);
}
