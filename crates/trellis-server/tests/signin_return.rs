//! The way back after signing in to a team server in a browser: the web UI sends a browser
//! whose session ended to `/signin?next=ROUTE`, and signing in brings it back to that page of
//! the server — never to another site, nor through markup.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};

mod support;

use support::browser::{HOST, TOKEN, server};

#[tokio::test]
async fn a_sign_in_brings_the_browser_back_to_the_page_it_was_sent_from() {
    let mut browser = server();
    let form = browser
        .send(
            Request::builder()
                .uri("/signin?next=%2F%23%2Fprofiles%2Fgreeter")
                .header(header::HOST, HOST)
                .header("sec-fetch-site", "same-origin")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(form.status, StatusCode::OK);
    assert!(
        form.text
            .contains(r#"<input type="hidden" name="next" value="/#/profiles/greeter" />"#),
        "{}",
        form.text
    );

    assert!(
        form.text
            .contains(r#"<a href="/#/profiles/greeter">Already signed in? Go back</a>"#)
    );

    // A refused token keeps the way back; an accepted one takes it.
    let refused = browser
        .post_form("token=trellis_wrong&next=%2F%23%2Fprofiles%2Fgreeter", None)
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(
        refused
            .text
            .contains(r#"name="next" value="/#/profiles/greeter""#)
    );
    let signed_in = browser
        .post_form(
            &format!("token={TOKEN}&next=%2F%23%2Fprofiles%2Fgreeter"),
            None,
        )
        .await;
    assert_eq!(signed_in.status, StatusCode::OK, "{}", signed_in.text);
    assert!(signed_in.headers.get(header::SET_COOKIE).is_some());
    assert!(
        signed_in
            .text
            .contains(r#"content="0; url=/#/profiles/greeter""#),
        "{}",
        signed_in.text
    );

    // Never to another site, nor through markup: those go to the runs.
    for next in [
        "%2F%2Fevil.example%2F",
        "https%3A%2F%2Fevil.example%2F",
        "%2F%22%3E%3Cscript%3E",
    ] {
        let page = browser
            .send(
                Request::builder()
                    .uri(format!("/signin?next={next}"))
                    .header(header::HOST, HOST)
                    .header("sec-fetch-site", "same-origin")
                    .body(Body::empty())
                    .expect("request"),
            )
            .await;
        assert!(
            !page.text.contains(r#"name="next""#),
            "{next}: {}",
            page.text
        );
        let signed_in = browser
            .post_form(&format!("token={TOKEN}&next={next}"), None)
            .await;
        assert_eq!(signed_in.status, StatusCode::OK);
        assert!(
            signed_in.text.contains(r#"content="0; url=/""#),
            "{next}: {}",
            signed_in.text
        );
        assert!(!signed_in.text.contains("evil") && !signed_in.text.contains("<script"));
    }
    browser.assert_token_never_shown();
}
