//! `trellis serve` for people in a browser, through the real binary: it names its public
//! origin, `trellis --target NAME ui` hands out a one-time sign-in link made with the target's
//! token (which it never prints), the link signs one browser in once, and `--no-browser` or a
//! malformed `--public-origin` turn the browser side off or are refused, and failed sign-ins
//! from one address are throttled.

mod support;

use support::Sandbox;
use support::serve::Server;

const TOKEN: &str = "trellis_browser_cli_canary_0a9b8c7d6e5f";

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

#[tokio::test(flavor = "multi_thread")]
async fn ui_target_opens_the_team_server_through_a_one_time_link() {
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, TOKEN, None, &[], &[]);
    assert_eq!(server.listening["publicOrigin"], server.base.as_str());
    let targets = sandbox.home.with_file_name("targets.json");
    let targets = targets.to_str().expect("UTF-8 path").to_owned();
    let env = [("TRELLIS_TARGETS", targets.as_str()), ("TEAM_TOKEN", TOKEN)];
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
    let opened = sandbox
        .trellis_with_env(&["--target", "team", "ui"], &env)
        .success();
    assert!(!opened.stdout.contains(TOKEN) && !opened.stderr.contains(TOKEN));
    let link = opened
        .stdout
        .split_whitespace()
        .find(|word| word.starts_with(&format!("{}/launch/", server.base)))
        .unwrap_or_else(|| panic!("a sign-in link in {:?}", opened.stdout))
        .to_owned();

    let first = client().get(&link).send().await.expect("request");
    assert_eq!(first.status(), 200);
    let cookie = first
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|value| value.to_str().ok())
        .expect("a session cookie")
        .to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    assert!(!cookie.contains(TOKEN));
    let pair = cookie.split(';').next().expect("pair").to_owned();
    let runs = client()
        .get(format!("{}/api/v1/runs", server.base))
        .header(reqwest::header::COOKIE, &pair)
        .send()
        .await
        .expect("request");
    assert_eq!(runs.status(), 200);
    let page = client()
        .get(format!("{}/", server.base))
        .header(reqwest::header::COOKIE, &pair)
        .send()
        .await
        .expect("request")
        .text()
        .await
        .expect("page");
    assert!(page.contains(r#"<meta name="trellis-user" content="env:TEAM_TOKEN" />"#));
    assert!(!page.contains(TOKEN));
    let again = client().get(&link).send().await.expect("request");
    assert_eq!(again.status(), 403, "a link works once");

    let output = server.kill();
    assert!(!output.contains(TOKEN), "the server printed its token");
    assert!(
        output.contains("/signin"),
        "it says where people sign in: {output}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_browser_side_can_be_off_and_a_bad_origin_is_refused() {
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, TOKEN, None, &["--no-browser"], &[]);
    assert!(server.listening["publicOrigin"].is_null());
    let signin = client()
        .get(format!("{}/signin", server.base))
        .send()
        .await
        .expect("request");
    assert_eq!(signin.status(), 401, "only bearer clients are served");
    drop(server);

    let refused = sandbox.trellis(&[
        "serve",
        "--public-origin",
        "trellis.example.com/path",
        "--token-env",
        "X",
    ]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(
        refused.stderr.contains("is not an origin"),
        "{}",
        refused.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_sign_ins_from_one_address_are_throttled_by_the_real_listener() {
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, TOKEN, None, &[], &[]);
    // Each request on a connection of its own from `address` (all of 127/8 is this host's
    // loopback): the count follows the client's address, not the socket.
    let sign_in = |token: &str, address: [u8; 4]| {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .local_address(std::net::IpAddr::from(address))
            .build()
            .expect("client")
            .post(format!("{}/signin", server.base))
            .header(reqwest::header::ORIGIN, server.base.as_str())
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(format!("token={token}"))
            .send()
    };
    for _ in 0..5 {
        let refused = sign_in("trellis_guess", [127, 0, 0, 1])
            .await
            .expect("request");
        assert_eq!(refused.status(), 401);
    }
    let throttled = sign_in(TOKEN, [127, 0, 0, 1]).await.expect("request");
    assert_eq!(throttled.status(), 429);
    let wait = throttled
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok())
        .expect("Retry-After in seconds");
    assert!((1..=60).contains(&wait), "Retry-After: {wait}");
    assert!(
        throttled
            .headers()
            .get(reqwest::header::SET_COOKIE)
            .is_none()
    );
    // Another address is not held back.
    let other = sign_in(TOKEN, [127, 0, 0, 2]).await.expect("request");
    assert_eq!(other.status(), 200);
    assert!(other.headers().get(reqwest::header::SET_COOKIE).is_some());
    let output = server.kill();
    assert!(!output.contains(TOKEN), "the server printed its token");
}
