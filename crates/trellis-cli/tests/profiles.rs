//! `trellis profile` and `trellis run --profile`: a run definition saved by name (checked by
//! the one admission on save, revision-guarded), listed, run with offline command workers,
//! exported and imported, deleted — in the local state directory and on a team server, where
//! it is stored in the server's home and resolved there by a remote run.

mod support;

use serde_json::{Value, json};
use support::graph::doubling_graph;
use support::serve::Server;
use support::{Sandbox, uniform_worker_plan};

const TOKEN: &str = "trellis_profiles_canary_0a1b2c3d4e5f";

/// Writes the doubling graph, `{"value": 21}` and a uniform worker plan into the workspace;
/// returns the `profile save NAME` arguments that store them.
fn save_args(sandbox: &Sandbox, name: &str) -> Vec<String> {
    vec![
        "profile".into(),
        "save".into(),
        name.into(),
        "--graph".into(),
        sandbox.write_json("graph.json", &doubling_graph()),
        "--input".into(),
        sandbox.write_json("input.json", &json!({"value": 21})),
        "--uniform-runtime-config".into(),
        sandbox.write_json("plan.json", &uniform_worker_plan(&[])),
        "--description".into(),
        "doubles a number".into(),
    ]
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The doubling graph with the step reading a state field that does not exist.
fn broken_graph() -> Value {
    let mut graph = doubling_graph();
    graph["root"]["children"][0]["inputBindings"][0]["value"]["path"] = json!(["missing"]);
    graph
}

fn run_detached(sandbox: &Sandbox, args: &[&str]) -> String {
    let mut all = vec!["run", "--json", "--detach"];
    all.extend_from_slice(args);
    let receipt = sandbox.trellis(&all).success().json();
    receipt["runId"].as_str().expect("runId").to_owned()
}

#[test]
fn a_profile_is_saved_listed_and_run_by_name() {
    let sandbox = Sandbox::new();
    let saved = sandbox
        .trellis(&strs(&save_args(&sandbox, "double")))
        .success();
    assert!(saved.stdout.contains("revision 1"), "{saved:#?}");
    // The documents are stored, not the paths: the files can go.
    for file in ["graph.json", "input.json", "plan.json"] {
        std::fs::remove_file(sandbox.workspace.join(file)).expect("remove");
    }
    let listed = sandbox
        .trellis(&["profile", "list", "--json"])
        .success()
        .json();
    assert_eq!(
        listed["profiles"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    assert_eq!(listed["profiles"][0]["name"], "double");
    assert_eq!(listed["profiles"][0]["revision"], 1);
    assert_eq!(listed["profiles"][0]["description"], "doubles a number");
    assert!(
        sandbox.home.join("profiles/double.json").is_file(),
        "one file per profile in the home"
    );

    let run = run_detached(&sandbox, &["--profile", "double"]);
    assert_eq!(
        sandbox.wait_finished(&run),
        json!({"status": "succeeded", "output": {"result": 42}})
    );
    assert_eq!(sandbox.status(&run)["title"], "profile double");
    // Another input replaces the default one.
    let other = sandbox.write_json("other.json", &json!({"value": 5}));
    let run = run_detached(&sandbox, &["--profile", "double", "--input", &other]);
    assert_eq!(
        sandbox.wait_finished(&run),
        json!({"status": "succeeded", "output": {"result": 10}})
    );
    // --validate-only admits the profile without starting anything.
    let checked = sandbox
        .trellis(&["run", "--profile", "double", "--validate-only"])
        .success()
        .json();
    assert_eq!(checked["valid"], true);

    let missing = sandbox.trellis(&["run", "--profile", "nope", "--detach"]);
    assert_eq!(missing.code, Some(1));
    assert!(
        missing.stderr.contains("no profile named nope"),
        "{missing:#?}"
    );
    let with_graph = sandbox.trellis(&["run", "--profile", "double", "--template", "x"]);
    assert_eq!(
        with_graph.code,
        Some(2),
        "clap refuses a profile with a graph"
    );
}

#[test]
fn a_stale_or_missing_revision_is_refused_naming_both() {
    let sandbox = Sandbox::new();
    let args = save_args(&sandbox, "double");
    sandbox.trellis(&strs(&args)).success();

    let unnamed = sandbox.trellis(&strs(&args));
    assert_eq!(unnamed.code, Some(1), "{unnamed:#?}");
    assert!(
        unnamed.stderr.contains("is at revision 1") && unnamed.stderr.contains("names no revision"),
        "{}",
        unnamed.stderr
    );
    let mut replace = args.clone();
    replace.extend(["--revision".into(), "1".into(), "--json".into()]);
    let second = sandbox.trellis(&strs(&replace)).success().json();
    assert_eq!(
        (
            second["revision"].clone(),
            second["previousRevision"].clone()
        ),
        (json!(2), json!(1))
    );
    // Saved again from revision 1 by an editor who did not see revision 2.
    let stale = sandbox.trellis(&strs(&replace));
    assert_eq!(stale.code, Some(1), "{stale:#?}");
    assert_eq!(stale.json()["code"], "profile.revision_conflict");
    assert!(
        stale.stderr.contains("is at revision 2") && stale.stderr.contains("names revision 1"),
        "{}",
        stale.stderr
    );
    let mut forced = args.clone();
    forced.push("--force".into());
    assert!(
        sandbox
            .trellis(&strs(&forced))
            .success()
            .stdout
            .contains("revision 3")
    );

    // Delete names the revision too.
    let stale_delete = sandbox.trellis(&["profile", "delete", "double", "--revision", "2"]);
    assert_eq!(stale_delete.code, Some(1));
    assert!(
        stale_delete.stderr.contains("revision 3"),
        "{}",
        stale_delete.stderr
    );
    let unnamed_delete = sandbox.trellis(&["profile", "delete", "double"]);
    assert_eq!(
        unnamed_delete.code,
        Some(2),
        "clap asks for --revision or --force"
    );
    sandbox
        .trellis(&["profile", "delete", "double", "--revision", "3"])
        .success();
    let listed = sandbox
        .trellis(&["profile", "list", "--json"])
        .success()
        .json();
    assert_eq!(listed["profiles"], json!([]));
    let gone = sandbox.trellis(&["profile", "show", "double"]);
    assert_eq!(gone.code, Some(1));
    assert!(
        gone.stderr.contains("no profile named double"),
        "{}",
        gone.stderr
    );
}

#[test]
fn a_profile_that_cannot_run_is_never_saved() {
    let sandbox = Sandbox::new();
    let graph = sandbox.write_json("broken.json", &broken_graph());
    let input = sandbox.write_json("input.json", &json!({"value": 21}));
    let plan = sandbox.write_json("plan.json", &uniform_worker_plan(&[]));
    let plan_args = ["--input", &input, "--uniform-runtime-config", &plan];
    let mut save = vec!["profile", "save", "broken", "--graph", &graph];
    save.extend(plan_args);
    let refused = sandbox.trellis(&save);
    assert_eq!(refused.code, Some(1), "{refused:#?}");
    assert!(
        refused.stderr.contains("was not saved") && refused.stderr.contains("error["),
        "the admission's diagnostics: {}",
        refused.stderr
    );
    // `--json` is what `run --validate-only --json` says of the same run.
    save.push("--json");
    let as_json = sandbox.trellis(&save).json();
    let mut validate = vec!["run", &graph, "--validate-only", "--json"];
    validate.extend(plan_args);
    let validated = sandbox.trellis(&validate).json();
    assert_eq!(as_json["status"], "rejected");
    assert!(
        as_json["diagnostics"]
            .as_array()
            .is_some_and(|d| !d.is_empty())
    );
    assert_eq!(as_json, validated);
    assert!(!sandbox.home.join("profiles/broken.json").exists());

    // An input the graph does not take, a plan that does not bind it: refused by admission.
    let wrong_input = sandbox.write_json("wrong.json", &json!({"value": "text"}));
    let good_graph = sandbox.write_json("graph.json", &doubling_graph());
    let refused = sandbox.trellis(&[
        "profile",
        "save",
        "typed",
        "--graph",
        &good_graph,
        "--input",
        &wrong_input,
        "--uniform-runtime-config",
        &plan,
        "--json",
    ]);
    assert_eq!(refused.code, Some(1));
    assert_eq!(
        refused.json()["code"],
        "admission.input_mismatch",
        "{refused:#?}"
    );
    let bad_plan = sandbox.write_json("bad-plan.json", &json!({"kind": "command"}));
    let refused = sandbox.trellis(&[
        "profile",
        "save",
        "typed",
        "--graph",
        &good_graph,
        "--input",
        &input,
        "--runtime-config",
        &bad_plan,
    ]);
    assert_eq!(refused.code, Some(1));
    assert!(
        refused.stderr.contains("admission.plan"),
        "{}",
        refused.stderr
    );
    let listed = sandbox
        .trellis(&["profile", "list", "--json"])
        .success()
        .json();
    assert_eq!(listed["profiles"], json!([]));
}

#[test]
fn names_are_checked_and_exports_import_back() {
    let sandbox = Sandbox::new();
    for bad in ["Bad", "../up", ".hidden", "a b", ""] {
        let args = save_args(&sandbox, bad);
        let refused = sandbox.trellis(&strs(&args));
        assert_eq!(refused.code, Some(1), "{bad:?}: {refused:#?}");
        assert!(
            refused.stderr.contains("is not a profile name"),
            "{bad:?}: {}",
            refused.stderr
        );
    }
    sandbox
        .trellis(&strs(&save_args(&sandbox, "double")))
        .success();
    let exported = sandbox.workspace.join("double.profile.json");
    let exported_text = exported.to_str().expect("UTF-8");
    sandbox
        .trellis(&["profile", "export", "double", "--output", exported_text])
        .success();
    let document: Value =
        serde_json::from_slice(&std::fs::read(&exported).expect("exported")).expect("JSON");
    assert_eq!(document["format"], "trellis.profile/v1");
    assert_eq!(document["definition"]["input"], json!({"value": 21}));
    sandbox
        .trellis(&["profile", "save", "copy", "--from", exported_text])
        .success();
    let original = sandbox
        .trellis(&["profile", "show", "double", "--json"])
        .success()
        .json();
    let copy = sandbox
        .trellis(&["profile", "show", "copy", "--json"])
        .success()
        .json();
    assert_eq!(copy["definition"], original["definition"]);
    assert_eq!(copy["identity"], original["identity"]);
    let shown = sandbox.trellis(&["profile", "show", "copy"]).success();
    assert!(
        shown.stdout.contains("doubles a number") && shown.stdout.contains("uniform"),
        "{}",
        shown.stdout
    );
    let run = run_detached(&sandbox, &["--profile", "copy"]);
    assert_eq!(sandbox.wait_finished(&run)["output"], json!({"result": 42}));
}

#[test]
fn a_template_profile_keeps_its_task_default_and_delivery() {
    let sandbox = Sandbox::new();
    let plan = sandbox.write_json(
        "plan.json",
        &json!({"kind": "command", "command": ["true"]}),
    );
    // No task default: saved (checked with a placeholder task), and each run must give one.
    sandbox
        .trellis(&[
            "profile",
            "save",
            "change",
            "--template",
            "software-change",
            "--uniform-runtime-config",
            &plan,
        ])
        .success();
    let needs_task = sandbox.trellis(&["run", "--profile", "change", "--validate-only"]);
    assert_eq!(needs_task.code, Some(1));
    assert!(
        needs_task.stderr.contains("needs a task"),
        "{}",
        needs_task.stderr
    );
    let given = sandbox
        .trellis(&[
            "run",
            "--profile",
            "change",
            "--task",
            "Fix it",
            "--validate-only",
        ])
        .success()
        .json();
    assert_eq!(given["valid"], true);

    sandbox
        .trellis(&[
            "profile",
            "save",
            "push",
            "--template",
            "software-change",
            "--task-default",
            "Tidy up",
            "--delivery",
            "push",
            "--uniform-runtime-config",
            &plan,
        ])
        .success();
    let shown = sandbox
        .trellis(&["profile", "show", "push", "--json"])
        .success()
        .json();
    assert_eq!(
        shown["definition"]["template"],
        json!({"name": "software-change", "delivery": "push"})
    );
    assert_eq!(shown["definition"]["taskDefault"], "Tidy up");
    let checked = sandbox
        .trellis(&["run", "--profile", "push", "--validate-only"])
        .success()
        .json();
    // The push variant is another graph than the default one.
    assert_eq!(checked["identity"], shown["identity"]);
    assert_ne!(checked["identity"], given["identity"]);
    // A review template takes an input document, not a task: without one it cannot run.
    let review = sandbox.trellis(&[
        "profile",
        "save",
        "review",
        "--template",
        "issue-review",
        "--uniform-runtime-config",
        &plan,
    ]);
    assert_eq!(review.code, Some(1));
    assert!(
        review.stderr.contains("admission.template_needs_task"),
        "{}",
        review.stderr
    );
}

/// Runs `trellis --target team ARGS` against `server`.
fn remote(sandbox: &Sandbox, server: &Server, args: &[&str]) -> support::CliOutput {
    let targets = sandbox.home.with_file_name("targets.json");
    let targets = targets.to_str().expect("UTF-8 path");
    let env = [("TRELLIS_TARGETS", targets), ("TEAM_TOKEN", TOKEN)];
    if !std::path::Path::new(targets).exists() {
        sandbox
            .trellis_with_env(
                &[
                    "target",
                    "add",
                    "team",
                    &server.base,
                    "--token-env",
                    "TEAM_TOKEN",
                ],
                &env,
            )
            .success();
    }
    let mut all = vec!["--target", "team"];
    all.extend(args);
    sandbox.trellis_with_env(&all, &env)
}

#[test]
fn a_profile_on_a_team_server_lives_in_its_home_and_runs_there() {
    let sandbox = Sandbox::new();
    let server_home = sandbox.home.with_file_name("server-home");
    let server_home_text = server_home.to_str().expect("UTF-8").to_owned();
    let server = Server::start(
        &sandbox,
        TOKEN,
        None,
        &[],
        &[("TRELLIS_HOME", server_home_text.as_str())],
    );
    let saved = remote(&sandbox, &server, &strs(&save_args(&sandbox, "double"))).success();
    assert!(saved.stdout.contains("revision 1"), "{saved:#?}");
    assert!(server_home.join("profiles/double.json").is_file());
    assert!(
        !sandbox.home.join("profiles/double.json").exists(),
        "the client keeps no copy"
    );
    let listed = remote(&sandbox, &server, &["profile", "list", "--json"])
        .success()
        .json();
    assert_eq!(listed["profiles"][0]["name"], "double");
    let local = sandbox
        .trellis(&["profile", "list", "--json"])
        .success()
        .json();
    assert_eq!(local["profiles"], json!([]));

    // The same refusals as locally, from the server.
    let stale = remote(
        &sandbox,
        &server,
        &strs(
            &[
                save_args(&sandbox, "double"),
                vec!["--revision".into(), "7".into()],
            ]
            .concat(),
        ),
    );
    assert_eq!(stale.code, Some(1));
    assert!(
        stale.stderr.contains("is at revision 1") && stale.stderr.contains("names revision 7"),
        "{}",
        stale.stderr
    );
    let broken = sandbox.write_json("broken.json", &broken_graph());
    let refused = remote(
        &sandbox,
        &server,
        &[
            "profile",
            "save",
            "broken",
            "--graph",
            &broken,
            "--uniform-runtime-config",
            &sandbox.write_json("plan.json", &uniform_worker_plan(&[])),
            "--input",
            &sandbox.write_json("input.json", &json!({"value": 1})),
            "--json",
        ],
    );
    assert_eq!(refused.code, Some(1));
    assert_eq!(refused.json()["status"], "rejected", "{refused:#?}");
    assert!(refused.stderr.contains("error["), "{}", refused.stderr);

    // A remote run names the profile; the server reads and admits it.
    let followed = remote(
        &sandbox,
        &server,
        &["run", "--profile", "double", "--no-source", "--json"],
    );
    assert_eq!(followed.code, Some(0), "{followed:#?}");
    let receipt = &followed.ndjson()[0];
    let run = receipt["runId"].as_str().expect("runId");
    let status = remote(&sandbox, &server, &["status", run]).success().json();
    assert_eq!(
        status["status"]["terminalResult"],
        json!({"status": "succeeded", "output": {"result": 42}})
    );
    let other = remote(
        &sandbox,
        &server,
        &[
            "run",
            "--profile",
            "double",
            "--no-source",
            "--detach",
            "--input",
            &sandbox.write_json("other.json", &json!({"value": 4})),
        ],
    )
    .success();
    let run = other.ndjson()[0]["runId"]
        .as_str()
        .expect("runId")
        .to_owned();
    support::wait_until("the remote run to finish", support::STATE_TIMEOUT, || {
        let status = remote(&sandbox, &server, &["status", &run])
            .success()
            .json();
        (status["status"]["phase"] == "finished").then_some(())
    });
    let status = remote(&sandbox, &server, &["status", &run])
        .success()
        .json();
    assert_eq!(
        status["status"]["terminalResult"]["output"],
        json!({"result": 8})
    );

    let exported = remote(&sandbox, &server, &["profile", "export", "double"])
        .success()
        .json();
    assert_eq!(exported["revision"], 1);
    remote(
        &sandbox,
        &server,
        &["profile", "delete", "double", "--revision", "1"],
    )
    .success();
    assert!(!server_home.join("profiles/double.json").exists());
    let gone = remote(
        &sandbox,
        &server,
        &["run", "--profile", "double", "--no-source"],
    );
    assert_eq!(gone.code, Some(1));
    assert!(gone.stderr.contains("profile.not_found"), "{}", gone.stderr);
    let text = server.kill();
    assert!(!text.contains(TOKEN));
}
