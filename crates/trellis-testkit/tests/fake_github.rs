//! The fake GitHub as a client sees it: GitHub's paths and shapes, token checks with GitHub's
//! 401s, 404/405/409/422 answers, pagination, the call record, and the subprocess binary.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use trellis_testkit::git::git;
use trellis_testkit::github::{Auth, FakeGitHub};

const TOKEN: &str = "ghs_canary_7d1f0a";
const SHA: &str = "1111111111111111111111111111111111111111";
const HEAD_SHA: &str = "2222222222222222222222222222222222222222";

/// One HTTP/1.1 exchange: status, headers (lowercased names) and the JSON body.
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<&Value>,
) -> (u16, String, Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, payload) = answer.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    let payload = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(payload)
    } else {
        payload.to_owned()
    };
    let value = serde_json::from_str(&payload).unwrap_or(Value::Null);
    (status, head.to_ascii_lowercase(), value)
}

fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        text = &rest[size + 2..];
    }
    out
}

fn bearer() -> Option<String> {
    Some(format!("Bearer {TOKEN}"))
}

fn seeded() -> FakeGitHub {
    let fake = FakeGitHub::start_blocking(TOKEN).unwrap();
    fake.add_repository("acme/app", "main", SHA);
    fake.set_branch("acme/app", "feature", HEAD_SHA);
    fake
}

#[test]
fn checks_the_token_like_github() {
    let fake = seeded();
    let addr = fake.addr();
    let (status, _, body) = http(addr, "GET", "/repos/acme/app", None, None);
    assert_eq!(
        (status, body["message"].as_str()),
        (401, Some("Requires authentication"))
    );
    let (status, _, body) = http(addr, "GET", "/repos/acme/app", Some("Bearer wrong"), None);
    assert_eq!(
        (status, body["message"].as_str()),
        (401, Some("Bad credentials"))
    );
    let (status, _, body) = http(
        addr,
        "GET",
        "/repos/acme/app",
        Some(&format!("token {TOKEN}")),
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(body["full_name"], "acme/app");
    assert_eq!(body["default_branch"], "main");
    // GitHub Enterprise Server lays the same API out under /api/v3.
    let (status, _, _) = http(
        addr,
        "GET",
        "/api/v3/repos/ACME/App",
        bearer().as_deref(),
        None,
    );
    assert_eq!(status, 200);
    let (status, _, _) = http(addr, "GET", "/repos/acme/other", bearer().as_deref(), None);
    assert_eq!(status, 404);

    let calls = fake.calls();
    let auths: Vec<Auth> = calls.iter().map(|c| c.auth).collect();
    assert_eq!(
        auths,
        [
            Auth::Missing,
            Auth::Rejected,
            Auth::Accepted,
            Auth::Accepted,
            Auth::Accepted
        ]
    );
    assert_eq!(calls[3].path, "/repos/ACME/App");
    let recorded = serde_json::to_string(&calls).unwrap();
    assert!(
        !recorded.contains("canary"),
        "the record holds no credential"
    );
}

#[test]
fn pull_requests_open_once_per_head_and_merge_only_when_green() {
    let fake = seeded();
    let addr = fake.addr();
    let auth = bearer();
    let draft = json!({"title": "Add --json", "head": "feature", "base": "main", "body": "b"});
    let (status, _, pull) = http(
        addr,
        "POST",
        "/repos/acme/app/pulls",
        auth.as_deref(),
        Some(&draft),
    );
    assert_eq!(status, 201, "{pull}");
    assert_eq!(pull["number"], 1);
    assert_eq!(pull["head"]["sha"], HEAD_SHA);
    assert_eq!(pull["head"]["label"], "acme:feature");
    assert_eq!(pull["html_url"], "https://github.com/acme/app/pull/1");
    let (status, _, refusal) = http(
        addr,
        "POST",
        "/repos/acme/app/pulls",
        auth.as_deref(),
        Some(&draft),
    );
    assert_eq!(status, 422);
    assert_eq!(
        refusal["errors"][0]["message"],
        "A pull request already exists for acme:feature."
    );
    let (_, _, listed) = http(
        addr,
        "GET",
        "/repos/acme/app/pulls?head=acme:feature&state=open",
        auth.as_deref(),
        None,
    );
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let (_, _, none) = http(
        addr,
        "GET",
        "/repos/acme/app/pulls?head=acme:other",
        auth.as_deref(),
        None,
    );
    assert_eq!(none, json!([]));

    fake.set_check_run("acme/app", 1, "ci", Some("failure"));
    let merge = json!({"sha": HEAD_SHA, "merge_method": "squash"});
    let (status, _, body) = http(
        addr,
        "PUT",
        "/repos/acme/app/pulls/1/merge",
        auth.as_deref(),
        Some(&merge),
    );
    assert_eq!(status, 405, "{body}");
    fake.set_check_run("acme/app", 1, "ci", Some("success"));
    let stale = json!({"sha": SHA});
    let (status, _, _) = http(
        addr,
        "PUT",
        "/repos/acme/app/pulls/1/merge",
        auth.as_deref(),
        Some(&stale),
    );
    assert_eq!(status, 409);
    fake.set_mergeable("acme/app", 1, Some(false));
    let (status, _, _) = http(
        addr,
        "PUT",
        "/repos/acme/app/pulls/1/merge",
        auth.as_deref(),
        Some(&merge),
    );
    assert_eq!(status, 405);
    fake.set_mergeable("acme/app", 1, Some(true));
    let (status, _, merged) = http(
        addr,
        "PUT",
        "/repos/acme/app/pulls/1/merge",
        auth.as_deref(),
        Some(&merge),
    );
    assert_eq!((status, &merged["merged"]), (200, &json!(true)));
    assert!(fake.is_merged("acme/app", 1));
    let (_, _, pull) = http(
        addr,
        "GET",
        "/repos/acme/app/pulls/1",
        auth.as_deref(),
        None,
    );
    assert_eq!(
        (pull["state"].as_str(), pull["merged"].as_bool()),
        (Some("closed"), Some(true))
    );
    assert_eq!(pull["merge_commit_sha"], merged["sha"]);
    assert!(pull["merged_at"].is_string());
    // Lists answer GitHub's "pull request simple" items: `merged_at`, never `merged`.
    let (_, _, listed) = http(
        addr,
        "GET",
        "/repos/acme/app/pulls?state=closed",
        auth.as_deref(),
        None,
    );
    let item = &listed[0];
    assert_eq!(item["number"], json!(1));
    assert_eq!(item["merged_at"], pull["merged_at"]);
    for absent in ["merged", "mergeable", "mergeable_state"] {
        assert!(
            item.get(absent).is_none(),
            "{absent} in a list item: {item}"
        );
    }
}

#[test]
fn reviews_comments_checks_and_statuses_have_githubs_shapes() {
    let fake = seeded();
    let addr = fake.addr();
    let auth = bearer();
    let number = fake.add_pull("acme/app", "Change", "Fixes #9", "feature", "main");
    fake.add_review(
        "acme/app",
        number,
        "alice",
        "CHANGES_REQUESTED",
        "Needs tests",
    );
    fake.add_review_comment("acme/app", number, "src/lib.rs", 12, "Use a constant");
    fake.set_check_run("acme/app", number, "build", None);
    let (_, _, reviews) = http(
        addr,
        "GET",
        &format!("/repos/acme/app/pulls/{number}/reviews"),
        auth.as_deref(),
        None,
    );
    assert_eq!(reviews[0]["state"], "CHANGES_REQUESTED");
    assert_eq!(reviews[0]["user"]["login"], "alice");
    let (_, _, comments) = http(
        addr,
        "GET",
        &format!("/repos/acme/app/pulls/{number}/comments"),
        auth.as_deref(),
        None,
    );
    assert_eq!(
        (&comments[0]["path"], &comments[0]["line"]),
        (&json!("src/lib.rs"), &json!(12))
    );
    let (_, _, runs) = http(
        addr,
        "GET",
        &format!("/repos/acme/app/commits/{HEAD_SHA}/check-runs"),
        auth.as_deref(),
        None,
    );
    assert_eq!(runs["total_count"], 1);
    assert_eq!(runs["check_runs"][0]["status"], "in_progress");
    let (_, _, pull) = http(
        addr,
        "GET",
        &format!("/repos/acme/app/pulls/{number}"),
        auth.as_deref(),
        None,
    );
    assert_eq!(pull["mergeable_state"], "blocked");
    fake.apply_json(
        &json!({"action": "setStatus", "repository": "acme/app", "pull": number,
                            "context": "legacy-ci", "state": "error"}),
    )
    .unwrap();
    let (_, _, status) = http(
        addr,
        "GET",
        "/repos/acme/app/commits/feature/status",
        auth.as_deref(),
        None,
    );
    assert_eq!(
        (status["state"].as_str(), status["sha"].as_str()),
        (Some("failure"), Some(HEAD_SHA))
    );
    // A pull request is an issue too.
    let (_, _, issue) = http(
        addr,
        "GET",
        &format!("/repos/acme/app/issues/{number}"),
        auth.as_deref(),
        None,
    );
    assert!(issue["pull_request"]["html_url"].is_string());
}

#[test]
fn comments_are_listed_in_pages_and_edited_in_place() {
    let fake = seeded();
    let addr = fake.addr();
    let auth = bearer();
    let issue = fake.add_issue("acme/app", "Crash on start", "Steps…", &["bug"]);
    for i in 0..3 {
        let (status, _, _) = http(
            addr,
            "POST",
            &format!("/repos/acme/app/issues/{issue}/comments"),
            auth.as_deref(),
            Some(&json!({"body": format!("c{i}")})),
        );
        assert_eq!(status, 201);
    }
    let (_, head, page) = http(
        addr,
        "GET",
        &format!("/repos/acme/app/issues/{issue}/comments?per_page=2"),
        auth.as_deref(),
        None,
    );
    assert_eq!(page.as_array().unwrap().len(), 2);
    assert!(head.contains("rel=\"next\""), "{head}");
    let (_, head, last) = http(
        addr,
        "GET",
        &format!("/repos/acme/app/issues/{issue}/comments?per_page=2&page=2"),
        auth.as_deref(),
        None,
    );
    assert_eq!(last[0]["body"], "c2");
    assert!(!head.contains("rel=\"next\""));
    let id = last[0]["id"].as_u64().unwrap();
    let (status, _, edited) = http(
        addr,
        "PATCH",
        &format!("/repos/acme/app/issues/comments/{id}"),
        auth.as_deref(),
        Some(&json!({"body": "c2 edited"})),
    );
    assert_eq!((status, &edited["body"]), (200, &json!("c2 edited")));
    assert_eq!(
        fake.comment_bodies("acme/app", issue),
        ["c0", "c1", "c2 edited"]
    );
    let (_, _, issue_json) = http(
        addr,
        "GET",
        &format!("/repos/acme/app/issues/{issue}"),
        auth.as_deref(),
        None,
    );
    assert_eq!(issue_json["labels"][0]["name"], "bug");
    assert_eq!(issue_json["comments"], 3);
    assert_eq!(fake.calls_to("POST", "/comments").len(), 3);
}

/// Kills the binary when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_binary_serves_a_seed_and_takes_actions_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("seed.json");
    std::fs::write(
        &seed,
        json!([
            {"action": "addRepository", "repository": "acme/app"},
            {"action": "setBranch", "repository": "acme/app", "branch": "main", "sha": SHA},
            {"action": "addIssue", "repository": "acme/app", "title": "Crash", "labels": ["bug"]}
        ])
        .to_string(),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_trellis-fake-github"))
        .args(["--token-env", "FAKE_GH_TOKEN", "--seed"])
        .arg(&seed)
        .env("FAKE_GH_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let line = BufReader::new(server.0.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap()
        .unwrap();
    let url = line.strip_prefix("GITHUB_API_URL=http://").unwrap();
    let addr: SocketAddr = url.parse().unwrap();

    let (status, _, issue) = http(
        addr,
        "GET",
        "/repos/acme/app/issues/1",
        bearer().as_deref(),
        None,
    );
    assert_eq!((status, &issue["title"]), (200, &json!("Crash")));
    let action = json!({"action": "addIssueComment", "repository": "acme/app", "number": 1, "body": "me too"});
    let (status, _, answer) = http(addr, "POST", "/__fake/actions", None, Some(&action));
    assert_eq!((status, &answer[0]["id"].is_u64()), (200, &true));
    let bad =
        json!({"action": "addIssueComment", "repository": "acme/app", "number": 99, "body": "x"});
    let (status, _, _) = http(addr, "POST", "/__fake/actions", None, Some(&bad));
    assert_eq!(status, 400);
    let (_, _, comments) = http(
        addr,
        "GET",
        "/repos/acme/app/issues/1/comments",
        bearer().as_deref(),
        None,
    );
    assert_eq!(comments[0]["body"], "me too");
    let (_, _, calls) = http(addr, "GET", "/__fake/calls", None, None);
    let paths: Vec<&str> = calls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "/repos/acme/app/issues/1",
            "/repos/acme/app/issues/1/comments"
        ]
    );
}

#[test]
fn branches_pushed_to_a_bare_repository_are_seen_and_move_pull_heads() {
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("origin.git");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(
        dir.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["commit", "-q", "--allow-empty", "-m", "init"]);
    git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
    git(
        &work,
        &[
            "push",
            "-q",
            "origin",
            "main",
            "main:refs/heads/trellis/abc",
        ],
    );

    let fake = FakeGitHub::start_blocking(TOKEN).unwrap();
    fake.apply_json(&json!({"action": "addRepository", "repository": "acme/app", "gitDir": bare}))
        .unwrap();
    let addr = fake.addr();
    let auth = bearer();
    let first = git(&work, &["rev-parse", "HEAD"]);
    let (status, _, branch) = http(
        addr,
        "GET",
        "/repos/acme/app/branches/trellis/abc",
        auth.as_deref(),
        None,
    );
    assert_eq!((status, &branch["commit"]["sha"]), (200, &json!(first)));
    let draft = json!({"title": "t", "head": "trellis/abc", "base": "main"});
    let (status, _, pull) = http(
        addr,
        "POST",
        "/repos/acme/app/pulls",
        auth.as_deref(),
        Some(&draft),
    );
    assert_eq!((status, &pull["head"]["sha"]), (201, &json!(first)));

    git(&work, &["commit", "-q", "--allow-empty", "-m", "repair"]);
    git(
        &work,
        &["push", "-q", "origin", "HEAD:refs/heads/trellis/abc"],
    );
    let second = git(&work, &["rev-parse", "HEAD"]);
    let (_, _, pull) = http(
        addr,
        "GET",
        "/repos/acme/app/pulls/1",
        auth.as_deref(),
        None,
    );
    assert_eq!(pull["head"]["sha"], json!(second));
    let (status, _, _) = http(
        addr,
        "GET",
        "/repos/acme/app/branches/nope",
        auth.as_deref(),
        None,
    );
    assert_eq!(status, 404);
}
