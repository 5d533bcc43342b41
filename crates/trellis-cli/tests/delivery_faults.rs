//! Transient GitHub failures during `trellis run --pr`, against the loopback fake GitHub: a
//! pull request GitHub opened before answering 502 (or before the client gave up waiting) is
//! found by its head branch on the delivery's retry, never opened twice; failures that outlast
//! the delivery's retries fail the run with their cause, and a resume once GitHub is back
//! opens exactly one pull request.

use trellis_testkit::github::Action;

mod forge_support;

use forge_support::*;

#[test]
fn a_pull_request_github_opened_before_answering_502_is_opened_once() {
    let setup = Setup::new();
    setup.github.apply_then_fail("POST", "/pulls", 502, 1);
    let out = setup.run_command("--pr").output().unwrap();
    no_secret(&out);
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(answered(&setup, "POST", "/pulls", 502), 1);
    assert_eq!(setup.pulls_opened(), 1, "the retry opened a second one");
    assert_eq!(setup.github.pull_numbers(REPO), vec![1]);
    assert_eq!(result["output"]["pullRequestId"], "1");
}

#[test]
fn a_pull_request_whose_answer_times_out_is_found_on_the_retry() {
    let setup = Setup::new();
    setup
        .github
        .apply(Action::StallNext {
            millis: 4_000,
            count: 1,
            method: Some("POST".into()),
            path_suffix: Some("/pulls".into()),
            applied: true,
        })
        .unwrap();
    let out = setup
        .run_command("--pr")
        .env("TRELLIS_DELIVERY_REQUEST_TIMEOUT_MS", "1000")
        .output()
        .unwrap();
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(setup.pulls_opened(), 1, "the retry opened a second one");
    assert_eq!(setup.github.pull_numbers(REPO), vec![1]);
}

#[test]
fn lasting_server_errors_fail_the_run_with_their_cause_and_a_resume_opens_one_pull_request() {
    let setup = Setup::new();
    setup.github.refuse_next("POST", "/pulls", 503, 1_000);
    let out = setup.run_command("--pr").output().unwrap();
    no_secret(&out);
    let run = run_id(&out);
    let result = terminal(&out);
    assert_eq!(result["status"], "failed", "{result}");
    // The delivery node tried five times, then gave up with GitHub's answer as the cause.
    assert_eq!(answered(&setup, "POST", "/pulls", 503), 5);
    let status = status_of(&setup, &run);
    let cause = status["cause"]["nodes"][0].to_string();
    assert!(
        cause.contains("GitHub failed to open a pull request (503)")
            && cause.contains("gave up after 5 tries"),
        "{status}"
    );
    assert!(setup.github.pull_numbers(REPO).is_empty());

    // GitHub is back: the resume runs the failed delivery again and opens one pull request.
    setup.github.clear_faults();
    let resumed = setup.run(&["resume", &run, "--json"]);
    no_secret(&resumed);
    let result = terminal(&resumed);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(setup.github.pull_numbers(REPO), vec![1]);
    assert_eq!(answered(&setup, "POST", "/pulls", 201), 1);
}
