//! Wire-level tests of the model server with a raw HTTP/1.1 client (no CLIs needed).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use trellis_testkit::{Api, Block, Conversation, Hang, ModelServer, Outcome, Script, Turn, Usage};

struct Reply {
    status: u16,
    head: String,
    body: String,
}

/// Sends one request with `Connection: close` and reads the whole answer.
async fn send(
    server: &ModelServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .expect("server answered in time")
        .unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Reply {
        status,
        head: head.to_owned(),
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

/// Parses an SSE body into (event name, data) pairs, checking each name matches `data.type`.
fn sse(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let name = frame
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap()
                .to_owned();
            let data: Value = serde_json::from_str(
                frame
                    .lines()
                    .find_map(|l| l.strip_prefix("data: "))
                    .unwrap(),
            )
            .unwrap();
            assert_eq!(data["type"], name.as_str());
            (name, data)
        })
        .collect()
}

fn anthropic_body(prompt: &str) -> String {
    json!({
        "model": "claude-test", "stream": true, "max_tokens": 100,
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        "tools": [{"name": "Write", "input_schema": {"type": "object"}},
                  {"name": "StructuredOutput", "input_schema": {"type": "object", "required": ["response"]}}]
    })
    .to_string()
}

fn openai_body(prompt: &str, stream: bool) -> String {
    json!({
        "model": "gpt-test", "stream": stream,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}],
        "tools": [{"type": "function", "name": "exec_command"}, {"type": "custom", "name": "apply_patch"}]
    })
    .to_string()
}

#[tokio::test]
async fn anthropic_stream_carries_tool_use_and_usage() {
    let script = Script::new(vec![
        Conversation::new("a").on_api(Api::Anthropic).turn(
            Turn::reply(vec![
                Block::text("ok"),
                Block::tool_call("Write", json!({"file_path": "/x", "content": "y"})),
            ])
            .with_usage(Usage {
                cache_read_tokens: 3,
                ..Usage::new(12, 34)
            }),
        ),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let headers = [
        ("x-claude-code-session-id", "sess-1"),
        ("content-type", "application/json"),
    ];
    let reply = send(
        &server,
        "POST",
        "/v1/messages?beta=true",
        &headers,
        &anthropic_body("hello"),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply
            .head
            .to_ascii_lowercase()
            .contains("content-type: text/event-stream")
    );
    let events = sse(&reply.body);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], 12);
    assert_eq!(
        events[0].1["message"]["usage"]["cache_read_input_tokens"],
        3
    );
    let tool_start = events
        .iter()
        .find(|(_, d)| d["content_block"]["type"] == "tool_use")
        .unwrap();
    assert_eq!(tool_start.1["content_block"]["name"], "Write");
    let partial: String = events
        .iter()
        .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        json!({"file_path": "/x", "content": "y"})
    );
    let delta = events.iter().find(|(n, _)| n == "message_delta").unwrap();
    assert_eq!(delta.1["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta.1["usage"]["output_tokens"], 34);

    let recorded = server.model_requests();
    assert_eq!(recorded.len(), 1);
    let request = &recorded[0];
    assert_eq!(request.path, "/v1/messages?beta=true");
    assert_eq!(request.session.as_deref(), Some("sess-1"));
    assert_eq!(request.conversation.as_deref(), Some("a"));
    assert!(request.user_text.contains("hello"));
    assert!(request.offers_tool("StructuredOutput"));
    assert_eq!(
        request.reply_schema,
        Some(json!({"type": "object", "required": ["response"]}))
    );
    assert_eq!(request.outcome, Outcome::Replied);
    assert!(server.script_finished());
}

#[tokio::test]
async fn openai_stream_and_whole_response() {
    let script = Script::new(vec![
        Conversation::new("o")
            .on_api(Api::Openai)
            .turn(Turn::reply(vec![Block::write_file("f.txt", "x\n")]).with_usage(Usage::new(5, 6)))
            .turn(
                Turn::reply(vec![Block::structured(json!({"response": 1}))]).expecting("Success"),
            ),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let headers = [("session-id", "thread-9")];
    let reply = send(
        &server,
        "POST",
        "/v1/responses",
        &headers,
        &openai_body("go", true),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let events = sse(&reply.body);
    assert_eq!(events[0].0, "response.created");
    let done = events
        .iter()
        .find(|(n, _)| n == "response.output_item.done")
        .unwrap();
    assert_eq!(done.1["item"]["type"], "custom_tool_call");
    assert_eq!(done.1["item"]["name"], "apply_patch");
    assert_eq!(
        done.1["item"]["input"],
        "*** Begin Patch\n*** Add File: f.txt\n+x\n*** End Patch\n"
    );
    let completed = &events.last().unwrap().1;
    assert_eq!(completed["type"], "response.completed");
    assert_eq!(completed["response"]["usage"]["output_tokens"], 6);

    // The second turn only answers once the tool output is in the newest input.
    let follow_up = json!({
        "model": "gpt-test", "stream": false,
        "input": [{"type": "message", "role": "user", "content": "go"},
                  {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "p"},
                  {"type": "custom_tool_call_output", "call_id": "c", "output": "Success. Updated"}]
    });
    let reply = send(
        &server,
        "POST",
        "/v1/responses",
        &headers,
        &follow_up.to_string(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let whole: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(whole["output"][0]["content"][0]["text"], "{\"response\":1}");
    assert_eq!(server.requests_for("o").len(), 2);
}

#[tokio::test]
async fn unscripted_requests_are_refused_loudly() {
    let script = Script::new(vec![
        Conversation::new("only")
            .matching("NODE=only")
            .turn(Turn::reply(vec![Block::text("x")]).expecting("never sent")),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let reply = send(
        &server,
        "POST",
        "/v1/messages",
        &[],
        &anthropic_body("NODE=other"),
    )
    .await;
    assert_eq!(reply.status, 400);
    let body: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no scripted conversation")
    );
    let reply = send(
        &server,
        "POST",
        "/v1/messages",
        &[],
        &anthropic_body("NODE=only"),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert!(reply.body.contains("expects"), "{}", reply.body);
    let refused = server.refused();
    assert_eq!(refused.len(), 2);
    assert_eq!(refused[1].conversation.as_deref(), Some("only"));
    assert_eq!(server.remaining_turns(), [("only".to_owned(), 1)]);
}

#[tokio::test]
async fn probes_get_harmless_answers() {
    let server = ModelServer::start(Script::default()).await.unwrap();
    assert_eq!(
        send(&server, "HEAD", "/api/hello", &[], "").await.status,
        200
    );
    let models = send(&server, "GET", "/v1/models", &[], "").await;
    assert_eq!(models.status, 200);
    assert!(models.body.contains("\"data\""));
    let count = send(
        &server,
        "POST",
        "/v1/messages/count_tokens",
        &[],
        &anthropic_body("abc"),
    )
    .await;
    assert_eq!(count.status, 200);
    assert!(
        serde_json::from_str::<Value>(&count.body).unwrap()["input_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    let upgrade = [
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    assert_eq!(
        send(&server, "GET", "/v1/responses", &upgrade, "")
            .await
            .status,
        426
    );
    assert_eq!(send(&server, "GET", "/nope", &[], "").await.status, 404);
    let outcomes: Vec<Outcome> = server.requests().into_iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes[..4],
        [
            Outcome::Probe,
            Outcome::Probe,
            Outcome::Probe,
            Outcome::Probe
        ]
    );
    assert_eq!(outcomes[4], Outcome::Unknown);
    assert!(server.model_requests().is_empty());
}

#[tokio::test]
async fn hangs_and_http_errors() {
    let script = Script::new(vec![
        Conversation::new("silent")
            .matching("NODE=silent")
            .turn(Turn::hang(Hang::NoResponse)),
        Conversation::new("stall")
            .matching("NODE=stall")
            .turn(Turn::hang(Hang::MidStream)),
        Conversation::new("busy")
            .matching("NODE=busy")
            .turn(Turn::http_error(529, "overloaded")),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let busy = send(
        &server,
        "POST",
        "/v1/messages",
        &[],
        &anthropic_body("NODE=busy"),
    )
    .await;
    assert_eq!(busy.status, 529);
    assert!(busy.body.contains("overloaded_error"));

    for (marker, expect_bytes) in [("NODE=silent", false), ("NODE=stall", true)] {
        let mut stream = TcpStream::connect(server.addr()).await.unwrap();
        let body = anthropic_body(marker);
        let request = format!(
            "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut buffer = vec![0_u8; 65536];
        let mut received = String::new();
        // Read whatever arrives within 700 ms; the response must never complete.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(700);
        while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            if n == 0 {
                break;
            }
            received.push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
        assert_eq!(!received.is_empty(), expect_bytes, "{marker}: {received}");
        if expect_bytes {
            assert!(received.contains("message_start") && !received.contains("message_stop"));
        }
    }
    assert!(
        server
            .wait_for_model_requests(3, Duration::from_secs(1))
            .await
    );
    let hung = server
        .requests()
        .into_iter()
        .filter(|r| r.outcome == Outcome::Hung)
        .count();
    assert_eq!(hung, 2);
    // Shutdown releases the hanging handlers instead of waiting for them forever.
    tokio::time::timeout(Duration::from_secs(5), server.shutdown())
        .await
        .unwrap();
}

#[tokio::test]
async fn concurrent_sessions_follow_their_markers() {
    let mut conversations = Vec::new();
    for node in 0..4 {
        conversations.push(
            Conversation::new(format!("node{node}"))
                .matching(format!("NODE=node{node}"))
                .turn(Turn::reply(vec![Block::text(format!("first {node}"))]).with_delay_ms(20))
                .turn(Turn::reply(vec![Block::text(format!("second {node}"))])),
        );
    }
    let server = ModelServer::start(Script::new(conversations))
        .await
        .unwrap();
    let server = std::sync::Arc::new(server);
    let mut tasks = Vec::new();
    for node in (0..4).rev() {
        let server = server.clone();
        tasks.push(tokio::spawn(async move {
            let session = format!("s{node}");
            let headers = [("x-claude-code-session-id", session.as_str())];
            let mut texts = Vec::new();
            for prompt in [format!("NODE=node{node}"), "continue".to_owned()] {
                let reply = send(
                    &server,
                    "POST",
                    "/v1/messages",
                    &headers,
                    &anthropic_body(&prompt),
                )
                .await;
                let text: String = sse(&reply.body)
                    .iter()
                    .filter_map(|(_, d)| d["delta"]["text"].as_str().map(str::to_owned))
                    .collect();
                texts.push(text);
            }
            (node, texts)
        }));
    }
    for task in tasks {
        let (node, texts) = task.await.unwrap();
        assert_eq!(texts, [format!("first {node}"), format!("second {node}")]);
    }
    assert!(server.script_finished());
    assert!(server.refused().is_empty());
}

#[test]
fn blocking_server_works_without_an_async_test() {
    let script = Script::new(vec![
        Conversation::new("a").turn(Turn::reply(vec![Block::text("x")])),
    ]);
    let server = ModelServer::start_blocking(script).unwrap();
    let mut stream = std::net::TcpStream::connect(server.addr()).unwrap();
    use std::io::{Read as _, Write as _};
    let body = openai_body("hi", false);
    write!(stream, "POST /v1/responses HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"output_text\""));
    assert_eq!(server.model_requests().len(), 1);
}
