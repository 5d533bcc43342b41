//! `trellis ui` answers only the person who started it: the real binary on loopback, asked as
//! another local account would (no data, no page token), then through its one-time launch link
//! (a session cookie, `HttpOnly` and `SameSite=Strict`; the link works once).

mod support;

use std::io::{BufRead, BufReader};
use std::process::Child;
use std::time::Duration;

use support::Sandbox;

/// A running `trellis ui`, killed when dropped.
struct Ui {
    child: Child,
    base: String,
    launch: String,
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_ui(sandbox: &Sandbox) -> Ui {
    let mut child = sandbox
        .command(&["ui", "--listen", "127.0.0.1:0"])
        .spawn()
        .expect("start trellis ui");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut base = None;
    let mut launch = None;
    while base.is_none() || launch.is_none() {
        let line = lines
            .next()
            .and_then(Result::ok)
            .expect("trellis ui prints where it serves");
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .map(str::to_owned);
        if line.starts_with("trellis ui: serving") {
            base = url.map(|url| url.trim_end_matches('/').to_owned());
        } else if line.starts_with("trellis ui: open") {
            launch = url;
        }
    }
    Ui {
        child,
        base: base.expect("base"),
        launch: launch.expect("launch link"),
    }
}

#[tokio::test]
async fn the_ui_answers_only_the_browser_that_used_its_one_time_link() {
    let sandbox = Sandbox::new();
    let ui = start_ui(&sandbox);
    assert!(ui.launch.contains("/launch/"), "{}", ui.launch);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    // Another account on this machine, without the link: no data, no page token.
    let runs = format!("{}/api/v1/runs", ui.base);
    let without = client.get(&runs).send().await.expect("answered");
    assert_eq!(without.status().as_u16(), 401);
    let page = client
        .get(format!("{}/", ui.base))
        .send()
        .await
        .expect("answered");
    assert_eq!(page.status().as_u16(), 401);
    let page = page.text().await.expect("page");
    assert!(!page.contains("trellis-token"), "{page}");

    // The link signs one browser in, once.
    let first = client.get(&ui.launch).send().await.expect("answered");
    assert_eq!(first.status().as_u16(), 200);
    let cookie = first
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a session cookie")
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().expect("name=value").to_owned();
    let again = client.get(&ui.launch).send().await.expect("answered");
    assert_eq!(again.status().as_u16(), 403, "the link works once");
    assert!(again.headers().get("set-cookie").is_none());

    let with = client
        .get(&runs)
        .header("cookie", &session)
        .send()
        .await
        .expect("answered");
    assert_eq!(with.status().as_u16(), 200);
    let page = client
        .get(format!("{}/", ui.base))
        .header("cookie", &session)
        .send()
        .await
        .expect("answered")
        .text()
        .await
        .expect("page");
    assert!(
        page.contains(r#"<meta name="trellis-token" content=""#),
        "{page}"
    );
    assert!(
        !page.contains(r#"<meta name="trellis-token" content="""#),
        "{page}"
    );
}
