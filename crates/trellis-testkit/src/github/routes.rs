//! Request handling of the fake GitHub: authentication, GitHub's REST paths for the endpoints
//! Trellis uses, pagination, GitHub-like errors, the control endpoints, and the call record.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use super::answer::{
    Answer, created, fail, injected, invalid, not_found, ok, paged, plain, redirect,
};
use super::extras::{render_protection, render_rules};
use super::faults::FaultKind;
use super::pulls::{create_pull, list_pulls, merge_pull, update_pull, with_pull};
use super::render::{Links, combined_state};
use super::world::{Action, Issue, Pull, Repo, World, is_pull, repo, repo_key};

/// Largest request body the fake reads.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How a request authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Auth {
    /// No `Authorization` header.
    Missing,
    /// A `Bearer`/`token` credential equal to the configured token.
    Accepted,
    /// Some other credential (or another scheme).
    Rejected,
}

/// One API call as the fake saw it. The credential itself is never kept.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    /// Arrival order, from 0.
    pub seq: u64,
    pub method: String,
    /// The path without the query and without a GitHub Enterprise `/api/v3` prefix.
    pub path: String,
    pub query: Option<String>,
    pub auth: Auth,
    /// The status code answered.
    pub status: u16,
    /// The JSON body sent (null when empty or not JSON).
    pub body: Value,
}

pub(crate) struct Shared {
    pub world: Mutex<World>,
    pub calls: Mutex<Vec<Call>>,
    pub token: String,
    pub links: Links,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn authenticate(shared: &Shared, request: &Request) -> Auth {
    let Some(value) = request.headers().get(header::AUTHORIZATION) else {
        return Auth::Missing;
    };
    let value = String::from_utf8_lossy(value.as_bytes());
    let credential = value.split_once(' ').and_then(|(scheme, credential)| {
        let scheme = scheme.to_ascii_lowercase();
        (scheme == "bearer" || scheme == "token").then(|| credential.trim())
    });
    if credential == Some(shared.token.as_str()) {
        Auth::Accepted
    } else {
        Auth::Rejected
    }
}

pub(crate) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let auth = authenticate(&shared, &request);
    let query_map = Query::<BTreeMap<String, String>>::try_from_uri(request.uri())
        .map(|q| q.0)
        .unwrap_or_default();
    let (parts, body) = request.into_parts();
    let raw_path = parts.uri.path();
    let path = raw_path
        .strip_prefix("/api/v3")
        .unwrap_or(raw_path)
        .to_owned();
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);

    if let Some(control) = path.strip_prefix("/__fake/") {
        return self::control(&shared, &parts.method, control, body).into_response();
    }
    // GitHub Enterprise Server serves GraphQL at /api/graphql, github.com at /graphql.
    let path = if raw_path == "/api/graphql" {
        "/graphql".to_owned()
    } else {
        path
    };
    let mut hold = None;
    let answer = match auth {
        // Download URLs are signed: they take no credential (clients must not send one).
        _ if path.starts_with("/_blobs/") => blob(&lock(&shared.world), &path),
        Auth::Missing => fail(StatusCode::UNAUTHORIZED, "Requires authentication"),
        Auth::Rejected => fail(StatusCode::UNAUTHORIZED, "Bad credentials"),
        Auth::Accepted => {
            let segments: Vec<String> = path
                .trim_matches('/')
                .split('/')
                .map(percent_decode)
                .collect();
            let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
            let mut world = lock(&shared.world);
            hold = world
                .holds
                .iter()
                .find(|(m, suffix, _)| *m == parts.method.as_str() && path.ends_with(suffix))
                .map(|(_, _, millis)| std::time::Duration::from_millis(*millis));
            let serve = |world: &mut World| {
                if path == "/graphql" && parts.method == Method::POST {
                    super::graphql::answer(world, &body)
                } else {
                    route(
                        world,
                        &shared.links,
                        &parts.method,
                        &segments,
                        &query_map,
                        &body,
                    )
                }
            };
            match world.faults.take(parts.method.as_str(), &path) {
                None => serve(&mut world),
                Some(FaultKind::Refuse {
                    status,
                    rate_limited,
                    retry_after,
                }) => injected(status, rate_limited, retry_after),
                Some(FaultKind::ApplyThenFail { status }) => {
                    serve(&mut world);
                    injected(status, false, None)
                }
                Some(FaultKind::Stall { millis, applied }) => {
                    hold = Some(std::time::Duration::from_millis(millis));
                    if applied {
                        serve(&mut world)
                    } else {
                        injected(504, false, None)
                    }
                }
            }
        }
    };
    {
        let mut calls = lock(&shared.calls);
        let seq = calls.len() as u64;
        calls.push(Call {
            seq,
            method: parts.method.to_string(),
            path: path.clone(),
            query: parts.uri.query().map(str::to_owned),
            auth,
            status: answer.status.as_u16(),
            body,
        });
    }
    if let Some(hold) = hold {
        tokio::time::sleep(hold).await;
    }
    let mut response = match answer.text {
        Some(text) => (
            answer.status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            text,
        )
            .into_response(),
        None if answer.status == StatusCode::FOUND => answer.status.into_response(),
        None => (answer.status, axum::Json(answer.body)).into_response(),
    };
    if let Some(location) = answer.location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    // Pages link with absolute URLs, as GitHub's do.
    let link = answer
        .link
        .map(|next| next.replacen("<?", &format!("<{}{raw_path}?", shared.links.api), 1));
    if let Some(link) = link.and_then(|l| HeaderValue::from_str(&l).ok()) {
        response.headers_mut().insert(header::LINK, link);
    }
    if let Some(seconds) = answer.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    if answer.rate_limited {
        let headers = response.headers_mut();
        headers.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        headers.insert("x-ratelimit-reset", HeaderValue::from_static("1767225600"));
    }
    response
}

fn control(shared: &Shared, method: &Method, path: &str, body: Value) -> Response {
    match (method.as_str(), path) {
        ("POST", "actions") => {
            let actions: Result<Vec<Action>, _> = if body.is_array() {
                serde_json::from_value(body)
            } else {
                serde_json::from_value(body).map(|one| vec![one])
            };
            let actions = match actions {
                Ok(actions) => actions,
                Err(error) => {
                    let body = json!({"message": format!("bad action: {error}")});
                    return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
                }
            };
            let mut world = lock(&shared.world);
            let mut answers = Vec::new();
            for action in actions {
                match world.apply(action) {
                    Ok(answer) => answers.push(answer),
                    Err(message) => {
                        let body = json!({"message": message});
                        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
                    }
                }
            }
            axum::Json(Value::Array(answers)).into_response()
        }
        ("GET", "calls") => axum::Json(json!(*lock(&shared.calls))).into_response(),
        _ => (
            StatusCode::NOT_FOUND,
            Body::from("unknown control endpoint"),
        )
            .into_response(),
    }
}

fn route(
    world: &mut World,
    links: &Links,
    method: &Method,
    segments: &[&str],
    query: &BTreeMap<String, String>,
    body: &Value,
) -> Answer {
    let ["repos", owner, name, rest @ ..] = segments else {
        return not_found();
    };
    let full = format!("{owner}/{name}");
    if world.repo(&full).is_none() {
        return not_found();
    }
    let number = |s: &str| s.parse::<u64>().ok();
    match (method.as_str(), rest) {
        ("GET", []) => ok(links.repository(repo(world, &full))),
        ("GET", ["branches", branch @ .., "protection"]) if !branch.is_empty() => {
            let branch = branch.join("/");
            let repo = repo(world, &full);
            match repo.extras.protection.get(&branch) {
                Some(p) if !p.readable => fail(
                    StatusCode::FORBIDDEN,
                    "Resource not accessible by personal access token",
                ),
                Some(p) => ok(render_protection(
                    &format!("{}/repos/{full}", links.api),
                    &branch,
                    p,
                )),
                None => fail(StatusCode::NOT_FOUND, "Branch not protected"),
            }
        }
        ("GET", ["rules", "branches", branch @ ..]) if !branch.is_empty() => {
            paged(render_rules(repo(world, &full), &branch.join("/")), query)
        }
        ("GET", ["actions", "jobs", id, "logs"]) => {
            let log = number(id).and_then(|id| repo(world, &full).extras.job_logs.get(&id));
            match (log, number(id)) {
                // Like GitHub's download host, the blob is on another origin (`localhost`
                // rather than `127.0.0.1`), so clients drop the credential on the redirect.
                (Some(log), Some(id)) if log.status == 200 => redirect(format!(
                    "{}/_blobs/job-logs/{full}/{id}?sig=fake-signature",
                    links.api.replacen("127.0.0.1", "localhost", 1)
                )),
                (Some(log), _) => {
                    let status = StatusCode::from_u16(log.status).unwrap_or(StatusCode::GONE);
                    fail(status, status.canonical_reason().unwrap_or("Gone"))
                }
                _ => not_found(),
            }
        }
        ("GET", ["branches", branch @ ..]) if !branch.is_empty() => {
            let branch = branch.join("/");
            match world.branch_sha(&full, &branch) {
                Some(sha) => {
                    ok(json!({"name": branch, "commit": {"sha": sha}, "protected": false}))
                }
                None => fail(StatusCode::NOT_FOUND, "Branch not found"),
            }
        }
        ("GET", ["pulls"]) => list_pulls(world, links, &full, query),
        ("POST", ["pulls"]) => create_pull(world, links, &full, body),
        ("GET", ["pulls", n]) => match number(n) {
            Some(n) => with_pull(world, links, &full, n, |_, _| None),
            None => not_found(),
        },
        ("PATCH", ["pulls", n]) => match number(n) {
            Some(n) => update_pull(world, links, &full, n, body),
            None => not_found(),
        },
        ("PUT", ["pulls", n, "merge"]) => match number(n) {
            Some(n) => merge_pull(world, &full, n, body),
            None => not_found(),
        },
        ("GET", ["pulls", n, "merge"]) => {
            let merged = number(n)
                .and_then(|n| repo(world, &full).issues.get(&n))
                .and_then(|i| i.pull.as_ref())
                .is_some_and(Pull::merged);
            if merged {
                Answer {
                    status: StatusCode::NO_CONTENT,
                    ..ok(Value::Null)
                }
            } else {
                not_found()
            }
        }
        ("GET", ["pulls", n, "reviews"]) => match number(n).filter(|n| is_pull(world, &full, *n)) {
            Some(n) => {
                let repo = repo(world, &full);
                let items = repo.reviews.iter().filter(|r| r.number == n);
                paged(items.map(|r| links.review(repo, r)).collect(), query)
            }
            None => not_found(),
        },
        ("GET", ["pulls", n, "comments"]) => {
            match number(n).filter(|n| is_pull(world, &full, *n)) {
                Some(n) => {
                    let repo = repo(world, &full);
                    let items = repo.review_comments.iter().filter(|c| c.number == n);
                    paged(
                        items.map(|c| links.review_comment(repo, c)).collect(),
                        query,
                    )
                }
                None => not_found(),
            }
        }
        ("GET", ["issues", "comments", id]) => {
            let repo = repo(world, &full);
            match repo.comments.iter().find(|c| Some(c.id) == number(id)) {
                Some(c) => ok(links.comment(repo, c)),
                None => not_found(),
            }
        }
        ("PATCH", ["issues", "comments", id]) => {
            update_comment(world, links, &full, number(id), body)
        }
        ("GET", ["issues", n]) => {
            let repo = repo(world, &full);
            match number(n).and_then(|n| repo.issues.get(&n)) {
                Some(issue) => ok(links.issue(repo, issue, comment_count(repo, issue))),
                None => not_found(),
            }
        }
        ("GET", ["issues", n, "comments"]) => {
            let repo = repo(world, &full);
            match number(n).filter(|n| repo.issues.contains_key(n)) {
                Some(n) => {
                    let items = repo.comments.iter().filter(|c| c.number == n);
                    paged(items.map(|c| links.comment(repo, c)).collect(), query)
                }
                None => not_found(),
            }
        }
        ("POST", ["issues", n, "comments"]) => {
            let Some(text) = body.get("body").and_then(Value::as_str) else {
                return invalid("body", "missing_field", None);
            };
            let Some(n) = number(n) else {
                return not_found();
            };
            match world.add_comment(&full, n, text.to_owned(), "trellis-bot[bot]".into()) {
                Ok(id) => {
                    let repo = repo(world, &full);
                    let comment = repo.comments.iter().find(|c| c.id == id);
                    created(comment.map(|c| links.comment(repo, c)).unwrap_or_default())
                }
                Err(_) => not_found(),
            }
        }
        ("GET", ["commits", reference, "check-runs"]) => {
            let sha = world
                .branch_sha(&full, reference)
                .unwrap_or_else(|| (*reference).to_owned());
            let repo = repo(world, &full);
            let runs: Vec<Value> = repo
                .runs_on(&sha)
                .iter()
                .map(|r| links.check_run(repo, r))
                .collect();
            ok(json!({"total_count": runs.len(), "check_runs": runs}))
        }
        ("GET", ["commits", reference, "status"]) => {
            let sha = world
                .branch_sha(&full, reference)
                .unwrap_or_else(|| (*reference).to_owned());
            let statuses: Vec<_> = repo(world, &full)
                .statuses
                .iter()
                .filter(|s| s.sha == sha)
                .collect();
            ok(json!({
                "state": combined_state(&statuses),
                "sha": sha,
                "total_count": statuses.len(),
                "statuses": statuses.iter().map(|s| links.status(s)).collect::<Vec<_>>(),
            }))
        }
        _ => not_found(),
    }
}

fn comment_count(repo: &Repo, issue: &Issue) -> usize {
    repo.comments
        .iter()
        .filter(|c| c.number == issue.number)
        .count()
}

fn update_comment(
    world: &mut World,
    links: &Links,
    full: &str,
    id: Option<u64>,
    body: &Value,
) -> Answer {
    let Some(text) = body.get("body").and_then(Value::as_str) else {
        return invalid("body", "missing_field", None);
    };
    let at = world.now();
    let Some(repo) = world.repos.get_mut(&repo_key(full)) else {
        return not_found();
    };
    let Some(comment) = repo.comments.iter_mut().find(|c| Some(c.id) == id) else {
        return not_found();
    };
    comment.body = text.to_owned();
    comment.updated_at = at;
    let repo = &*repo;
    repo.comments
        .iter()
        .find(|c| Some(c.id) == id)
        .map_or_else(not_found, |c| ok(links.comment(repo, c)))
}

/// A signed download: `/_blobs/job-logs/{owner}/{repo}/{job id}` serves the job's log text.
fn blob(world: &World, path: &str) -> Answer {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let ["_blobs", "job-logs", owner, name, id] = parts.as_slice() else {
        return not_found();
    };
    let log = id.parse::<u64>().ok().and_then(|id| {
        world
            .repo(&format!("{owner}/{name}"))
            .and_then(|r| r.extras.job_logs.get(&id))
    });
    match log {
        Some(log) => plain(log.text.clone()),
        None => not_found(),
    }
}
