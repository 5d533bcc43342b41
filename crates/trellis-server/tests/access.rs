//! The access policy of `trellis ui` as a client meets it: Host and Origin checks, the
//! session cookie the one-time launch link sets (nothing but the bundle's assets without it),
//! the page token on state changes, bounded bodies, bounded streams, and the served page.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::routing::{get, post};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;
use trellis_server::{
    AccessPolicy, LaunchSecrets, LocalPage, MAX_BODY_BYTES, PageToken, StreamSlots, TOKEN_HEADER,
    app,
};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
const LAUNCH: &str = "1111111111111111aaaaaaaaaaaaaaaa";
const SESSION: &str = "2222222222222222bbbbbbbbbbbbbbbb";
/// The session cookie the launch link sets.
const COOKIE: &str = "trellis_ui_4173=2222222222222222bbbbbbbbbbbbbbbb";

fn secrets() -> LaunchSecrets {
    LaunchSecrets {
        page: PageToken::from_text(TOKEN),
        launch: PageToken::from_text(LAUNCH),
        session: PageToken::from_text(SESSION),
    }
}

fn address() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 4173))
}

fn server() -> Router {
    let api = Router::new()
        .route("/ping", get(|| async { "pong" }))
        .route(
            "/echo",
            post(|axum::Json(body): axum::Json<Value>| async move { axum::Json(body) })
                .put(|axum::Json(body): axum::Json<Value>| async move { axum::Json(body) })
                .delete(|| async { axum::Json(serde_json::json!({"deleted": true})) }),
        );
    let policy = LocalPage::new(address(), secrets()).expect("loopback");
    app(api, AccessPolicy::LocalPage(policy))
}

fn get_request(path: &str) -> axum::http::request::Builder {
    Request::builder()
        .method("GET")
        .uri(path)
        .header(header::HOST, "127.0.0.1:4173")
        .header(header::COOKIE, COOKIE)
}

fn post_request(path: &str) -> axum::http::request::Builder {
    Request::builder()
        .method("POST")
        .uri(path)
        .header(header::HOST, "127.0.0.1:4173")
        .header(header::COOKIE, COOKIE)
        .header(header::CONTENT_TYPE, "application/json")
        .header(TOKEN_HEADER, TOKEN)
}

async fn send(request: Request<Body>) -> (StatusCode, Value) {
    let response = server().oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, body)
}

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_request_for_its_own_host_is_served() {
    for host in ["127.0.0.1:4173", "localhost:4173", "LOCALHOST:4173"] {
        let request = Request::builder()
            .uri("/api/v1/ping")
            .header(header::HOST, host)
            .header(header::COOKIE, COOKIE)
            .body(Body::empty())
            .expect("request");
        let (status, body) = send(request).await;
        assert_eq!(status, StatusCode::OK, "{host}");
        assert_eq!(body, Value::String("pong".into()));
    }
}

#[tokio::test]
async fn other_hosts_are_refused_as_a_rebinding_page_would_send_them() {
    for host in [
        Some("evil.example:4173"),
        Some("127.0.0.1:9999"),
        Some("127.0.0.1"),
        None,
    ] {
        let mut request = Request::builder().uri("/api/v1/ping");
        if let Some(host) = host {
            request = request.header(header::HOST, host);
        }
        let (status, body) = send(request.body(Body::empty()).expect("request")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{host:?}");
        assert_eq!(code(&body), "forbidden_host");
    }
}

#[tokio::test]
async fn cross_origin_and_cross_site_requests_are_refused() {
    let cases = [
        ("origin", "http://evil.example"),
        ("origin", "null"),
        ("origin", "http://127.0.0.1:9999"),
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-site", "same-site"),
    ];
    for (name, value) in cases {
        let request = get_request("/api/v1/ping")
            .header(name, value)
            .body(Body::empty())
            .expect("request");
        let (status, body) = send(request).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{name}: {value}");
        assert_eq!(code(&body), "forbidden_origin");
    }
    let same = get_request("/api/v1/ping")
        .header(header::ORIGIN, "http://127.0.0.1:4173")
        .header("sec-fetch-site", "same-origin")
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(same).await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_state_change_needs_the_page_token_and_a_json_body() {
    let ok = post_request("/api/v1/echo")
        .body(Body::from(r#"{"a":1}"#))
        .expect("request");
    assert_eq!(
        send(ok).await,
        (StatusCode::OK, serde_json::json!({"a": 1}))
    );

    let no_token = Request::builder()
        .method("POST")
        .uri("/api/v1/echo")
        .header(header::HOST, "127.0.0.1:4173")
        .header(header::COOKIE, COOKIE)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{}"))
        .expect("request");
    let (status, body) = send(no_token).await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "bad_token"));

    let wrong_token = Request::builder()
        .method("POST")
        .uri("/api/v1/echo")
        .header(header::HOST, "127.0.0.1:4173")
        .header(header::COOKIE, COOKIE)
        .header(header::CONTENT_TYPE, "application/json")
        .header(TOKEN_HEADER, "0123456789abcdef0123456789abcdeX")
        .body(Body::from("{}"))
        .expect("request");
    assert_eq!(send(wrong_token).await.0, StatusCode::FORBIDDEN);

    // Two token headers (the builder appends) are refused even when one is right.
    let doubled = post_request("/api/v1/echo")
        .header(TOKEN_HEADER, "guess")
        .body(Body::from("{}"))
        .expect("request");
    assert_eq!(send(doubled).await.0, StatusCode::FORBIDDEN);

    // A form post (what a cross-site page can send without CORS) is refused before any handler.
    let form = Request::builder()
        .method("POST")
        .uri("/api/v1/echo")
        .header(header::HOST, "127.0.0.1:4173")
        .header(header::COOKIE, COOKIE)
        .header(header::CONTENT_TYPE, "text/plain")
        .header(TOKEN_HEADER, TOKEN)
        .body(Body::from("{}"))
        .expect("request");
    let (status, body) = send(form).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "json_required")
    );

    // DELETE and PUT are state changes too (the profile routes): the page token is needed.
    let change = |method: &str, token: Option<&str>| {
        let mut request = Request::builder()
            .method(method)
            .uri("/api/v1/echo")
            .header(header::HOST, "127.0.0.1:4173")
            .header(header::COOKIE, COOKIE)
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(token) = token {
            request = request.header(TOKEN_HEADER, token);
        }
        let body = if method == "DELETE" { "" } else { "{}" };
        request.body(Body::from(body)).expect("request")
    };
    for method in ["DELETE", "PUT"] {
        let (status, body) = send(change(method, None)).await;
        assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "bad_token"));
        assert_eq!(send(change(method, Some(TOKEN))).await.0, StatusCode::OK);
    }
    let (status, body) = send(change("PATCH", Some(TOKEN))).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
}

#[tokio::test]
async fn bodies_beyond_the_bound_are_refused() {
    let at_limit = format!(r#"{{"pad":"{}"}}"#, "x".repeat(MAX_BODY_BYTES - 16));
    let accepted = post_request("/api/v1/echo")
        .body(Body::from(at_limit))
        .expect("request");
    assert_eq!(send(accepted).await.0, StatusCode::OK);

    let over = format!(r#"{{"pad":"{}"}}"#, "x".repeat(MAX_BODY_BYTES));
    let refused = post_request("/api/v1/echo")
        .body(Body::from(over))
        .expect("request");
    assert_eq!(send(refused).await.0, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn the_page_carries_the_token_and_strict_headers() {
    let response = server()
        .oneshot(get_request("/").body(Body::empty()).expect("request"))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let csp = response
        .headers()
        .get(header::CONTENT_SECURITY_POLICY)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let page = String::from_utf8_lossy(&bytes);
    assert!(
        page.contains(&format!(
            r#"<meta name="trellis-token" content="{TOKEN}" />"#
        )),
        "{page}"
    );
    let script = page
        .split("src=\"/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page loads a script");
    let asset = server()
        .oneshot(
            get_request(&format!("/{script}"))
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(asset.status(), StatusCode::OK);
    assert_eq!(
        asset
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.as_bytes()),
        Some(&b"text/javascript; charset=utf-8"[..])
    );
}

#[tokio::test]
async fn unknown_paths_answer_problems() {
    let (status, body) = send(
        get_request("/api/v1/nothing")
            .body(Body::empty())
            .expect("request"),
    )
    .await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "not_found"));
    let (status, _) = send(
        get_request("/assets/none.js")
            .body(Body::empty())
            .expect("request"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[test]
fn a_local_page_server_refuses_to_listen_beyond_loopback() {
    assert!(LocalPage::new(SocketAddr::from(([0, 0, 0, 0], 4173)), secrets()).is_err());
    assert!(LocalPage::new(SocketAddr::from(([192, 168, 1, 2], 4173)), secrets()).is_err());
    assert!(LocalPage::new("[::1]:4173".parse().expect("addr"), secrets()).is_ok());
}

#[test]
fn stream_slots_are_bounded_and_given_back() {
    let slots = StreamSlots::new(2);
    let first = slots.take().expect("first");
    let _second = slots.take().expect("second");
    let refused = slots.take().expect_err("third is over the bound");
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    drop(first);
    assert!(slots.take().is_ok());
}

#[test]
fn generated_tokens_differ() {
    let one = PageToken::generate().expect("entropy");
    let two = PageToken::generate().expect("entropy");
    assert_ne!(one.as_str(), two.as_str());
    assert_eq!(one.as_str().len(), 64);
    assert!(!format!("{one:?}").contains(one.as_str()));
}

#[tokio::test]
async fn without_the_session_cookie_nothing_but_the_assets_is_served() {
    let bare = |path: &str| {
        Request::builder()
            .uri(path)
            .header(header::HOST, "127.0.0.1:4173")
            .body(Body::empty())
            .expect("request")
    };
    let (status, body) = send(bare("/api/v1/ping")).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNAUTHORIZED, "no_session")
    );
    // The page says how to get in and holds no token.
    let (status, body) = send(bare("/")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let page = body.as_str().unwrap_or("");
    assert!(page.contains("one-time link"), "{page}");
    assert!(
        !page.contains(TOKEN) && !page.contains("trellis-token"),
        "{page}"
    );
    // A wrong session value is no better than none; nor is a state change with the token.
    let guessed = Request::builder()
        .uri("/api/v1/ping")
        .header(header::HOST, "127.0.0.1:4173")
        .header(
            header::COOKIE,
            "trellis_ui_4173=2222222222222222bbbbbbbbbbbbbbbX",
        )
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(guessed).await.0, StatusCode::UNAUTHORIZED);
    let change = Request::builder()
        .method("POST")
        .uri("/api/v1/echo")
        .header(header::HOST, "127.0.0.1:4173")
        .header(header::CONTENT_TYPE, "application/json")
        .header(TOKEN_HEADER, TOKEN)
        .body(Body::from("{}"))
        .expect("request");
    assert_eq!(send(change).await.0, StatusCode::UNAUTHORIZED);
    // The bundle's scripts are not secret.
    let (status, body) = send(get_request("/").body(Body::empty()).expect("request")).await;
    assert_eq!(status, StatusCode::OK);
    let page = body.as_str().unwrap_or("").to_owned();
    let script = page
        .split("src=\"/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page loads a script");
    assert_eq!(send(bare(&format!("/{script}"))).await.0, StatusCode::OK);
    // Nor is the tab icon, which browsers ask for whatever the page names (issue 34: no 404).
    let (status, icon) = send(bare("/favicon.ico")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(icon.as_str().unwrap_or("").contains("<svg"), "{icon}");
}

#[tokio::test]
async fn the_launch_link_sets_the_session_cookie_once() {
    let server = server();
    let open = |path: &str, site: &str| {
        Request::builder()
            .uri(path)
            .header(header::HOST, "127.0.0.1:4173")
            // Opened from a file or a terminal: the browser calls that another site.
            .header("sec-fetch-site", site)
            .body(Body::empty())
            .expect("request")
    };
    let wrong = server
        .clone()
        .oneshot(open("/launch/1111111111111111aaaaaaaaaaaaaaaX", "none"))
        .await
        .expect("infallible");
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    assert!(wrong.headers().get(header::SET_COOKIE).is_none());

    let first = server
        .clone()
        .oneshot(open(&format!("/launch/{LAUNCH}"), "cross-site"))
        .await
        .expect("infallible");
    assert_eq!(first.status(), StatusCode::OK);
    let cookie = first
        .headers()
        .get(header::SET_COOKIE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(cookie.starts_with(&format!("{COOKIE};")), "{cookie}");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let bytes = first.into_body().collect().await.expect("body").to_bytes();
    assert!(
        String::from_utf8_lossy(&bytes).contains(r#"http-equiv="refresh" content="0; url=/""#),
        "the launch page moves on to the app"
    );

    let again = server
        .clone()
        .oneshot(open(&format!("/launch/{LAUNCH}"), "none"))
        .await
        .expect("infallible");
    assert_eq!(again.status(), StatusCode::FORBIDDEN, "the link works once");
    assert!(again.headers().get(header::SET_COOKIE).is_none());

    // The cookie it set opens the API.
    let with_cookie = server
        .oneshot(
            get_request("/api/v1/ping")
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(with_cookie.status(), StatusCode::OK);
}
