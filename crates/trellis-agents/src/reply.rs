//! Judging an agent's final reply: unwrap the envelope, normalize the strict dialect, and run the
//! node contract's mechanical check.
//!
//! The refusal rule: an agent that cannot or will not do the task replies
//! `{"refusal": "<reason>"}` (in the strict dialect `{"response": null, "refusal": "<reason>"}`).
//! The reply schema allows exactly this alternative, and it settles the execution `refusal`.

use serde_json::Value;
use trellis_graph::WorkerOutcome;

use crate::contract::NodeContract;
use crate::forward::truncate;
use crate::schema::{SchemaDialect, normalize_strict_body};

/// What a CLI handed back as its final answer.
#[derive(Debug, Clone, PartialEq)]
pub enum RawReply {
    /// Already-parsed JSON (Claude's `structured_output`).
    Json(Value),
    /// Text that should hold the JSON envelope.
    Text(String),
}

/// The verdict on one reply.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyVerdict {
    /// The reply fits the contract.
    Accepted(WorkerOutcome),
    /// The agent declined the task, with its reason.
    Refused(String),
    /// The reply was rejected; the reason goes into the correction turn.
    Rejected(String),
}

/// Longest excerpt of a bad reply quoted back in a rejection reason.
const EXCERPT_BYTES: usize = 300;

/// Judges `reply` against `contract`.
pub fn judge_reply(
    contract: &NodeContract,
    dialect: SchemaDialect,
    reply: RawReply,
) -> ReplyVerdict {
    let envelope = match reply {
        RawReply::Json(value) => value,
        RawReply::Text(text) => match parse_json_text(&text) {
            Ok(value) => value,
            Err(reason) => return ReplyVerdict::Rejected(reason),
        },
    };
    let Value::Object(mut fields) = envelope else {
        return ReplyVerdict::Rejected(
            "the reply must be a JSON object of the form {\"response\": <value>}".to_owned(),
        );
    };
    match fields.remove("refusal") {
        None | Some(Value::Null) => {}
        Some(Value::String(reason)) if !reason.trim().is_empty() => {
            return match fields.get("response") {
                None | Some(Value::Null) if fields.len() <= 1 => ReplyVerdict::Refused(reason),
                _ => ReplyVerdict::Rejected(
                    "a refusal must not carry a response; send either {\"response\": …} or \
                     {\"refusal\": \"<reason>\"}"
                        .to_owned(),
                ),
            };
        }
        Some(_) => {
            return ReplyVerdict::Rejected(
                "refusal must be a non-empty string giving the reason".to_owned(),
            );
        }
    }
    if let Some(extra) = fields.keys().find(|k| k.as_str() != "response") {
        return ReplyVerdict::Rejected(format!(
            "the reply envelope has the undeclared field {extra}; it must be exactly \
             {{\"response\": <value>}}"
        ));
    }
    let Some(body) = fields.remove("response") else {
        return ReplyVerdict::Rejected(
            "the reply envelope is missing the field response; it must be exactly \
             {\"response\": <value>}"
                .to_owned(),
        );
    };
    let body = match dialect {
        SchemaDialect::Standard => body,
        SchemaDialect::OpenAiStrict => normalize_strict_body(contract, body),
    };
    match contract.accept(&body) {
        Ok(outcome) => ReplyVerdict::Accepted(outcome),
        Err(reason) => ReplyVerdict::Rejected(format!("response {reason}")),
    }
}

/// Parses reply text as JSON, tolerating surrounding whitespace and one Markdown code fence.
fn parse_json_text(text: &str) -> Result<Value, String> {
    let trimmed = strip_code_fence(text.trim());
    serde_json::from_str(trimmed).map_err(|error| {
        if trimmed.is_empty() {
            "the reply was empty; it must be a JSON object {\"response\": <value>}".to_owned()
        } else {
            format!(
                "the reply is not valid JSON ({error}); it began with: {}",
                truncate(trimmed, EXCERPT_BYTES)
            )
        }
    })
}

fn strip_code_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return text;
    };
    // The opening fence may name a language (```json).
    match body.split_once('\n') {
        Some((language, inner)) if !language.contains(['{', '[']) => inner.trim(),
        _ => body.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use trellis_graph::PayloadType;

    fn integer() -> NodeContract {
        NodeContract {
            output: PayloadType::Integer,
            verifier: None,
        }
    }

    fn judge(reply: RawReply) -> ReplyVerdict {
        judge_reply(&integer(), SchemaDialect::Standard, reply)
    }

    fn rejected(verdict: ReplyVerdict) -> String {
        match verdict {
            ReplyVerdict::Rejected(reason) => reason,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn envelopes_unwrap_to_the_contract_check() {
        assert_eq!(
            judge(RawReply::Text(" {\"response\": 4}\n".into())),
            ReplyVerdict::Accepted(WorkerOutcome::Verified {
                output: json!(4),
                artifacts: vec![]
            })
        );
        assert!(matches!(
            judge(RawReply::Text("```json\n{\"response\": 4}\n```".into())),
            ReplyVerdict::Accepted(_)
        ));
        assert!(rejected(judge(RawReply::Json(json!(4)))).contains("JSON object"));
        assert!(
            rejected(judge(RawReply::Json(json!({"response": 4, "x": 1}))))
                .contains("undeclared field x")
        );
        assert!(rejected(judge(RawReply::Json(json!({})))).contains("missing the field response"));
        assert_eq!(
            rejected(judge(RawReply::Json(json!({"response": "four"})))),
            "response output: $ must be a integer"
        );
        assert!(
            rejected(judge(RawReply::Text("I did it!".into()))).contains("began with: I did it!")
        );
    }

    #[test]
    fn refusals_are_recognized_only_in_their_own_envelope() {
        assert_eq!(
            judge(RawReply::Json(json!({"refusal": "no repo access"}))),
            ReplyVerdict::Refused("no repo access".into())
        );
        assert_eq!(
            judge_reply(
                &integer(),
                SchemaDialect::OpenAiStrict,
                RawReply::Json(json!({"response": null, "refusal": "cannot"}))
            ),
            ReplyVerdict::Refused("cannot".into())
        );
        assert!(matches!(
            judge_reply(
                &integer(),
                SchemaDialect::OpenAiStrict,
                RawReply::Json(json!({"response": 1, "refusal": null}))
            ),
            ReplyVerdict::Accepted(_)
        ));
        assert!(
            rejected(judge(RawReply::Json(
                json!({"response": 1, "refusal": "x"})
            )))
            .contains("must not carry")
        );
        assert!(rejected(judge(RawReply::Json(json!({"refusal": ""})))).contains("non-empty"));
    }
}
