//! `trellis target add`: a target never stores a credential. A ledger URL with a password is
//! refused (saying how to give it instead), `--password-env` names the variable read at each
//! use, and the targets file is readable by its owner only.

mod support;

use std::os::unix::fs::PermissionsExt;

use support::Sandbox;

#[test]
fn a_ledger_password_is_refused_and_named_by_a_variable_instead() {
    let sandbox = Sandbox::new();
    let targets = sandbox.home.with_file_name("targets.json");
    let targets_text = targets.to_str().expect("UTF-8 path").to_owned();
    let env = [("TRELLIS_TARGETS", targets_text.as_str())];
    let cli = |args: &[&str]| sandbox.trellis_with_env(args, &env);

    for url in [
        "postgres://alice:pw-canary-71@db.example/trellis",
        "postgresql://alice@db.example/trellis?sslmode=require&password=pw-canary-71",
    ] {
        let refused = cli(&["target", "add", "team", url]);
        assert_eq!(refused.code, Some(1), "{url}: {refused:?}");
        assert!(
            refused.stderr.contains("--password-env") && refused.stderr.contains("PGPASSWORD"),
            "{}",
            refused.stderr
        );
        assert!(
            !refused.stderr.contains("pw-canary-71"),
            "{}",
            refused.stderr
        );
        assert!(!targets.exists(), "nothing was written for {url}");
    }
    let bad_variable = cli(&[
        "target",
        "add",
        "team",
        "postgres://alice@db.example/trellis",
        "--password-env",
        "not a name",
    ]);
    assert_eq!(bad_variable.code, Some(1));
    let on_a_server = cli(&[
        "target",
        "add",
        "web",
        "https://trellis.example",
        "--token-env",
        "TEAM_TOKEN",
        "--password-env",
        "LEDGER_PASSWORD",
    ]);
    assert_eq!(on_a_server.code, Some(1));

    cli(&[
        "target",
        "add",
        "team",
        "postgres://alice@db.example/trellis",
        "--password-env",
        "LEDGER_PASSWORD",
    ])
    .success();
    let mode = std::fs::metadata(&targets)
        .expect("targets file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "targets file mode {mode:o}");
    let listed = cli(&["target", "list"]).success();
    let line = &listed.ndjson()[0];
    assert_eq!(line["passwordEnv"], "LEDGER_PASSWORD");
    assert_eq!(line["ledger"], "postgres://alice@db.example/trellis");

    // Used without the variable: the error names it, and nothing is attempted.
    let missing = cli(&["--target", "team", "list"]);
    assert_eq!(missing.code, Some(1));
    assert!(
        missing
            .stderr
            .contains("$LEDGER_PASSWORD, which is not set"),
        "{}",
        missing.stderr
    );
}
