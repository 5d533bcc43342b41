//! A team server used from a browser, as a browser meets it: the sign-in page, the exchange
//! of a token for a session cookie (its attributes), exact Host and Origin checks, the
//! session's page token on state changes, signing out, expiry, one-time sign-in links, the
//! throttle on failed sign-ins, the embeddable run view — with the refusals — while bearer-token clients go on as before. The
//! token is a canary: no answer may carry it.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use trellis_server::TOKEN_HEADER;
use trellis_server::signin::{SessionTimes, SignInLimit};

mod support;

use support::browser::{
    HOST, ORIGIN, TOKEN, change, code, get, meta, server, server_limited, server_with, set_cookie,
};
use support::exchange;

const VALIDATE: &str = r#"{"document": {"not": "a graph"}}"#;

#[tokio::test]
async fn a_pasted_token_becomes_an_http_only_strict_session_cookie() {
    let mut browser = server();
    let page = browser
        .send(
            Request::builder()
                .uri("/signin")
                .header(header::HOST, HOST)
                .header("sec-fetch-site", "none")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.text
            .contains(r#"<form method="post" action="/signin">"#)
    );
    assert!(page.text.contains(r#"type="password""#));
    let policy = page.headers[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .expect("text");
    assert!(policy.contains("form-action 'self'") && policy.contains("frame-ancestors 'none'"));
    // Under `no-referrer` browsers post the form with `Origin: null`, which is refused.
    assert_eq!(page.headers[header::REFERRER_POLICY], "same-origin");

    let signed_in = browser.sign_in(TOKEN).await;
    assert_eq!(signed_in.status, StatusCode::OK);
    let cookie = set_cookie(&signed_in);
    assert!(cookie.starts_with("trellis_session_8420="), "{cookie}");
    for attribute in [
        "; Path=/",
        "; HttpOnly",
        "; SameSite=Strict",
        "; Max-Age=28800",
    ] {
        assert!(cookie.contains(attribute), "{cookie} lacks {attribute}");
    }
    assert!(
        !cookie.contains("Secure"),
        "an http origin gets no Secure cookie"
    );
    assert!(signed_in.text.contains("url=/"), "moves on to the runs");

    let pair = cookie.split(';').next().expect("pair").to_owned();
    let runs = browser
        .send(
            get("/api/v1/runs", &pair)
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(runs.status, StatusCode::OK, "{}", runs.text);
    let index = browser
        .send(get("/", &pair).body(Body::empty()).expect("request"))
        .await;
    assert_eq!(index.status, StatusCode::OK);
    assert_eq!(meta(&index.text, "trellis-user").as_deref(), Some("alice"));
    let page_token = meta(&index.text, "trellis-token").expect("a page token");
    assert_eq!(page_token.len(), 64);
    browser.assert_token_never_shown();
}

#[tokio::test]
async fn an_https_origin_gets_a_secure_host_only_cookie() {
    let mut browser = server_with("https://trellis.example.com", SessionTimes::default(), &[]);
    let request = Request::builder()
        .method("POST")
        .uri("/signin")
        .header(header::HOST, "trellis.example.com")
        .header(header::ORIGIN, "https://trellis.example.com")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::CONTENT_LENGTH, TOKEN.len() + 6)
        .body(Body::from(format!("token={TOKEN}")))
        .expect("request");
    let answer = browser.send(request).await;
    assert_eq!(answer.status, StatusCode::OK);
    let cookie = set_cookie(&answer);
    assert!(cookie.starts_with("__Host-trellis_session="), "{cookie}");
    assert!(cookie.ends_with("; Secure"), "{cookie}");
    browser.assert_token_never_shown();
}

#[tokio::test]
async fn sign_in_is_refused_for_a_wrong_token_another_origin_or_another_host() {
    let mut browser = server();
    let wrong = browser.sign_in("trellis_not_the_token_canary").await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.headers.get(header::SET_COOKIE).is_none());
    assert!(wrong.text.contains("not accepted"));
    assert!(!wrong.text.contains("trellis_not_the_token_canary"));

    let form = |origin: Option<&str>, host: &str, site: Option<&str>, kind: &str| {
        let mut request = Request::builder()
            .method("POST")
            .uri("/signin")
            .header(header::HOST, host)
            .header(header::CONTENT_TYPE, kind)
            .header(header::CONTENT_LENGTH, TOKEN.len() + 6);
        if let Some(origin) = origin {
            request = request.header(header::ORIGIN, origin);
        }
        if let Some(site) = site {
            request = request.header("sec-fetch-site", site);
        }
        request
            .body(Body::from(format!("token={TOKEN}")))
            .expect("request")
    };
    let urlencoded = "application/x-www-form-urlencoded";
    let cases = [
        (
            form(None, HOST, None, urlencoded),
            StatusCode::FORBIDDEN,
            "forbidden_origin",
        ),
        (
            form(Some("http://evil.example"), HOST, None, urlencoded),
            StatusCode::FORBIDDEN,
            "forbidden_origin",
        ),
        (
            form(Some("http://localhost:8420"), HOST, None, urlencoded),
            StatusCode::FORBIDDEN,
            "forbidden_origin",
        ),
        (
            form(Some(ORIGIN), HOST, Some("cross-site"), urlencoded),
            StatusCode::FORBIDDEN,
            "forbidden_origin",
        ),
        (
            form(Some(ORIGIN), "localhost:8420", None, urlencoded),
            StatusCode::FORBIDDEN,
            "forbidden_host",
        ),
        (
            form(Some(ORIGIN), "evil.example", None, urlencoded),
            StatusCode::FORBIDDEN,
            "forbidden_host",
        ),
        (
            form(Some(ORIGIN), HOST, None, "text/plain"),
            StatusCode::BAD_REQUEST,
            "",
        ),
    ];
    for (request, status, wanted) in cases {
        let answer = browser.send(request).await;
        assert_eq!(answer.status, status, "{}", answer.text);
        assert_eq!(code(&answer), wanted, "{}", answer.text);
        assert!(answer.headers.get(header::SET_COOKIE).is_none());
    }
    // An anonymous client cannot make the server hold a large or undeclared body.
    for length in [None, Some("1000000")] {
        let mut request = Request::builder()
            .method("POST")
            .uri("/signin")
            .header(header::HOST, HOST)
            .header(header::ORIGIN, ORIGIN)
            .header(header::CONTENT_TYPE, urlencoded);
        if let Some(length) = length {
            request = request.header(header::CONTENT_LENGTH, length);
        }
        let answer = browser
            .send(
                request
                    .body(Body::from(format!("token={TOKEN}")))
                    .expect("request"),
            )
            .await;
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE, "{length:?}");
        assert_eq!(answer.headers[header::CONNECTION], "close");
    }
    browser.assert_token_never_shown();
}

#[tokio::test]
async fn a_session_acts_only_with_its_page_token_from_its_own_origin_and_host() {
    let mut browser = server();
    let cookie = browser.session().await;
    let page_token = browser.page_token(&cookie).await;

    let accepted = browser
        .send(
            change("/api/v1/validate", &cookie, &page_token)
                .body(Body::from(VALIDATE))
                .expect("request"),
        )
        .await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.text);

    let mut refusals = Vec::new();
    // No page token, another session's, the bearer token instead of it.
    let mut without = change("/api/v1/validate", &cookie, &page_token)
        .body(Body::from(VALIDATE))
        .expect("request");
    without.headers_mut().remove(TOKEN_HEADER);
    refusals.push((without, StatusCode::FORBIDDEN, "bad_token"));
    refusals.push((
        change("/api/v1/validate", &cookie, TOKEN)
            .body(Body::from(VALIDATE))
            .expect("request"),
        StatusCode::FORBIDDEN,
        "bad_token",
    ));
    // A form post (no JSON) from the same origin.
    let mut form = change("/api/v1/validate", &cookie, &page_token)
        .body(Body::from("a=b"))
        .expect("request");
    form.headers_mut().insert(
        header::CONTENT_TYPE,
        "application/x-www-form-urlencoded".parse().expect("value"),
    );
    refusals.push((form, StatusCode::UNSUPPORTED_MEDIA_TYPE, "json_required"));
    // No Origin, another Origin, a cross-site fetch, another Host.
    let mut no_origin = change("/api/v1/validate", &cookie, &page_token)
        .body(Body::from(VALIDATE))
        .expect("request");
    no_origin.headers_mut().remove(header::ORIGIN);
    refusals.push((no_origin, StatusCode::FORBIDDEN, "forbidden_origin"));
    let mut other_origin = change("/api/v1/validate", &cookie, &page_token)
        .body(Body::from(VALIDATE))
        .expect("request");
    other_origin.headers_mut().insert(
        header::ORIGIN,
        "https://127.0.0.1:8420".parse().expect("value"),
    );
    refusals.push((other_origin, StatusCode::FORBIDDEN, "forbidden_origin"));
    let mut cross_site = change("/api/v1/validate", &cookie, &page_token)
        .body(Body::from(VALIDATE))
        .expect("request");
    cross_site
        .headers_mut()
        .insert("sec-fetch-site", "cross-site".parse().expect("value"));
    refusals.push((cross_site, StatusCode::FORBIDDEN, "forbidden_origin"));
    let mut other_host = get("/api/v1/runs", &cookie)
        .body(Body::empty())
        .expect("request");
    other_host
        .headers_mut()
        .insert(header::HOST, "rebound.example:8420".parse().expect("value"));
    refusals.push((other_host, StatusCode::FORBIDDEN, "forbidden_host"));
    let mut cross_read = get("/api/v1/runs", &cookie)
        .body(Body::empty())
        .expect("request");
    cross_read
        .headers_mut()
        .insert("sec-fetch-site", "cross-site".parse().expect("value"));
    refusals.push((cross_read, StatusCode::FORBIDDEN, "forbidden_origin"));
    // A browser session may not mint sign-in links.
    refusals.push((
        change("/signin/link", &cookie, &page_token)
            .body(Body::from("{}"))
            .expect("request"),
        StatusCode::FORBIDDEN,
        "bearer_required",
    ));
    for (request, status, wanted) in refusals {
        let what = format!("{} {:?}", request.uri(), request.headers());
        let answer = browser.send(request).await;
        assert_eq!(answer.status, status, "{what}: {}", answer.text);
        assert_eq!(code(&answer), wanted, "{what}");
    }
    browser.assert_token_never_shown();
}

#[tokio::test]
async fn signing_out_ends_the_session() {
    let mut browser = server();
    let cookie = browser.session().await;
    let page_token = browser.page_token(&cookie).await;
    let out = browser
        .send(
            change("/signout", &cookie, &page_token)
                .body(Body::from("{}"))
                .expect("request"),
        )
        .await;
    assert_eq!(out.status, StatusCode::OK, "{}", out.text);
    let cleared = set_cookie(&out);
    assert!(
        cleared.starts_with("trellis_session_8420=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );

    let api = browser
        .send(
            get("/api/v1/runs", &cookie)
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    assert_eq!(code(&api), "no_session");
    let page = browser
        .send(get("/", &cookie).body(Body::empty()).expect("request"))
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.headers[header::LOCATION], "/signin");
    assert!(meta(&page.text, "trellis-token").is_none());
    let again = browser
        .send(
            change("/api/v1/validate", &cookie, &page_token)
                .body(Body::from(VALIDATE))
                .expect("request"),
        )
        .await;
    assert_eq!(again.status, StatusCode::UNAUTHORIZED);
    assert_eq!(code(&again), "no_session");
    browser.assert_token_never_shown();
}

#[tokio::test]
async fn a_session_expires() {
    let times = SessionTimes {
        lifetime: Duration::from_secs(3600),
        idle: Duration::from_millis(200),
    };
    let mut browser = server_with(ORIGIN, times, &[]);
    let cookie = browser.session().await;
    let fresh = browser
        .send(
            get("/api/v1/runs", &cookie)
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(fresh.status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let stale = browser
        .send(
            get("/api/v1/runs", &cookie)
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(stale.status, StatusCode::UNAUTHORIZED);
    assert_eq!(code(&stale), "no_session");
}

#[tokio::test]
async fn bearer_clients_are_served_as_before() {
    let mut browser = server();
    // Any Host, no Origin checks: a bearer client is not a browser.
    let bearer = Request::builder()
        .uri("/api/v1/runs")
        .header(header::HOST, "anything.internal:1")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .expect("request");
    assert_eq!(browser.send(bearer).await.status, StatusCode::OK);
    let wrong = Request::builder()
        .uri("/api/v1/runs")
        .header(header::AUTHORIZATION, "Bearer wrong")
        .body(Body::empty())
        .expect("request");
    let answer = browser.send(wrong).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert_eq!(code(&answer), "bad_token");
    let anonymous = Request::builder()
        .uri("/api/v1/runs")
        .body(Body::empty())
        .expect("request");
    let answer = browser.send(anonymous).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert_eq!(code(&answer), "unauthenticated");
    assert_eq!(answer.headers[header::WWW_AUTHENTICATE], "Bearer");
    // A bearer POST needs no page token.
    let validate = Request::builder()
        .method("POST")
        .uri("/api/v1/validate")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(VALIDATE))
        .expect("request");
    assert_eq!(browser.send(validate).await.status, StatusCode::OK);
    // Without browser sign-in, `/` is a bearer route like any other.
    let plain = support::TeamServer::new(TOKEN);
    let index = exchange(
        &plain.app,
        Request::builder()
            .uri("/")
            .header(header::HOST, HOST)
            .body(Body::empty())
            .expect("request"),
    )
    .await;
    assert_eq!(index.status, StatusCode::UNAUTHORIZED);
    let signin = exchange(&plain.app, support::request("GET", "/signin", TOKEN, None)).await;
    assert_eq!(signin.status, StatusCode::NOT_FOUND);
    browser.assert_token_never_shown();
}

#[tokio::test]
async fn a_one_time_link_signs_a_browser_in_without_the_token() {
    let mut browser = server();
    let made = browser
        .send(support::request("POST", "/signin/link", TOKEN, None))
        .await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.text);
    let made: serde_json::Value = serde_json::from_str(&made.text).expect("json");
    let url = made["url"].as_str().expect("url");
    let path = url.strip_prefix(ORIGIN).expect("at the public origin");
    assert!(path.starts_with("/launch/"));
    let open = || {
        Request::builder()
            .uri(path)
            .header(header::HOST, HOST)
            .header("sec-fetch-site", "cross-site")
            .body(Body::empty())
            .expect("request")
    };
    let first = browser.send(open()).await;
    assert_eq!(first.status, StatusCode::OK);
    let cookie = set_cookie(&first);
    let pair = cookie.split(';').next().expect("pair").to_owned();
    let runs = browser
        .send(
            get("/api/v1/runs", &pair)
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(runs.status, StatusCode::OK);
    let second = browser.send(open()).await;
    assert_eq!(second.status, StatusCode::FORBIDDEN);
    assert!(second.headers.get(header::SET_COOKIE).is_none());
    browser.assert_token_never_shown();
}

#[tokio::test]
async fn the_run_view_may_be_framed_by_the_named_origins_only() {
    let mut browser = server_with(
        ORIGIN,
        SessionTimes::default(),
        &["http://dash.127.0.0.1.nip.test:3000"],
    );
    let cookie = browser.session().await;
    let mut framed = get("/embed.html", &cookie)
        .body(Body::empty())
        .expect("request");
    framed
        .headers_mut()
        .insert("sec-fetch-site", "same-site".parse().expect("value"));
    let answer = browser.send(framed).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let policy = answer.headers[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .expect("text")
        .to_owned();
    assert!(
        policy.contains("frame-ancestors 'self' http://dash.127.0.0.1.nip.test:3000"),
        "{policy}"
    );
    assert!(answer.headers.get(header::X_FRAME_OPTIONS).is_none());
    assert_eq!(
        meta(&answer.text, "trellis-embed-origins").as_deref(),
        Some("http://dash.127.0.0.1.nip.test:3000")
    );
    assert!(meta(&answer.text, "trellis-token").is_some());
    // The app itself is never framed, nor fetched by another site.
    let mut index = get("/", &cookie).body(Body::empty()).expect("request");
    index
        .headers_mut()
        .insert("sec-fetch-site", "same-site".parse().expect("value"));
    assert_eq!(browser.send(index).await.status, StatusCode::FORBIDDEN);
    let index = browser
        .send(get("/", &cookie).body(Body::empty()).expect("request"))
        .await;
    assert_eq!(index.headers[header::X_FRAME_OPTIONS], "DENY");
}

#[tokio::test]
async fn failed_sign_ins_are_throttled_per_client_address() {
    let mut browser = server();
    let client: SocketAddr = "192.0.2.10:50000".parse().expect("address");
    let neighbour: SocketAddr = "192.0.2.11:50000".parse().expect("address");
    let wrong = "token=trellis_guess";
    let right = format!("token={TOKEN}");

    for _ in 0..4 {
        let answer = browser.post_form(wrong, Some(client)).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    }
    // A success is not held back below the limit, and is not counted.
    let signed_in = browser.post_form(&right, Some(client)).await;
    assert_eq!(signed_in.status, StatusCode::OK, "{}", signed_in.text);
    assert!(signed_in.headers.get(header::SET_COOKIE).is_some());
    let fifth = browser.post_form(wrong, Some(client)).await;
    assert_eq!(fifth.status, StatusCode::UNAUTHORIZED);

    // Five failures in the minute: the address is answered 429 without its token being looked
    // at — a right one included, so guessing on learns nothing.
    for form in [wrong, right.as_str()] {
        let throttled = browser.post_form(form, Some(client)).await;
        assert_eq!(
            throttled.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{}",
            throttled.text
        );
        let wait: u64 = throttled.headers[header::RETRY_AFTER]
            .to_str()
            .expect("text")
            .parse()
            .expect("seconds");
        assert!((1..=60).contains(&wait), "Retry-After: {wait}");
        assert!(throttled.text.contains("Too many failed sign-ins"));
        assert!(throttled.headers.get(header::SET_COOKIE).is_none());
    }
    // The same host over another connection (another port) is the same client; another
    // address is not held back.
    let other_port: SocketAddr = "192.0.2.10:50001".parse().expect("address");
    let again = browser.post_form(&right, Some(other_port)).await;
    assert_eq!(again.status, StatusCode::TOO_MANY_REQUESTS);
    let neighbour_in = browser.post_form(&right, Some(neighbour)).await;
    assert_eq!(neighbour_in.status, StatusCode::OK);
    let neighbour_wrong = browser.post_form(wrong, Some(neighbour)).await;
    assert_eq!(neighbour_wrong.status, StatusCode::UNAUTHORIZED);
    browser.assert_token_never_shown();
}

#[tokio::test]
async fn a_throttled_address_may_sign_in_again_once_its_failures_are_old() {
    let limit = SignInLimit {
        failures: 2,
        window: Duration::from_millis(300),
    };
    let mut browser = server_limited(ORIGIN, SessionTimes::default(), &[], limit);
    let client: SocketAddr = "[2001:db8::1]:40000".parse().expect("address");
    let same_prefix: SocketAddr = "[2001:db8::2]:40000".parse().expect("address");
    for _ in 0..2 {
        let answer = browser.post_form("token=trellis_guess", Some(client)).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    }
    // An IPv6 host holds its whole /64: another address in it is the same client.
    let throttled = browser
        .post_form(&format!("token={TOKEN}"), Some(same_prefix))
        .await;
    assert_eq!(throttled.status, StatusCode::TOO_MANY_REQUESTS);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let signed_in = browser
        .post_form(&format!("token={TOKEN}"), Some(client))
        .await;
    assert_eq!(signed_in.status, StatusCode::OK, "{}", signed_in.text);
    browser.assert_token_never_shown();
}
