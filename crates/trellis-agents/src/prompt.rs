//! The provider-neutral prompts: the first turn of an execution and the correction turn that
//! follows a mechanically rejected reply.

use std::path::Path;

use serde_json::Value;

use crate::contract::NodeContract;
use crate::forward::truncate;

/// What an agent is asked on a provider-failure retry when its session survives.
pub const CONTINUE_PROMPT: &str = "Continue";

/// Longest validation error quoted in a correction turn.
pub const MAX_VALIDATION_ERROR_BYTES: usize = 8 * 1024;

/// The parts of an execution a prompt shows.
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    pub node: &'a str,
    pub workspace: &'a Path,
    pub instructions: Option<&'a str>,
    pub input: &'a Value,
    pub contract: &'a NodeContract,
}

const WORKER_GUIDANCE: &str = "\
- You may create, edit and delete files in the workspace to do the task; earlier nodes may have changed it already.
- If the task needs the repository's dependencies, run its usual setup yourself (install from the lockfile). Install standalone tools under $HOME/.local, never system-wide.
- Nobody will answer questions during this run: decide and proceed.";

const VERIFIER_GUIDANCE: &str = "\
- You are a verifier: inspect and judge the work. Do not create, modify or delete any file in the workspace; read files and run read-only commands and tests only.
- Do not install dependencies: other verifiers may be reading the same workspace at the same time. A missing declared dependency is a setup failure: reject, with the evidence in your diagnostic.
- Nobody will answer questions during this run: decide and proceed.";

const WORKER_VALUE_RULE: &str = "<value> is your output: a value of the contract's `output` type (for a `null` output type, reply {\"response\": null}).";

const VERIFIER_VALUE_RULE: &str = "<value> is exactly {\"output\": …, \"signals\": {…}, \"diagnostic\": …}: your output, one declared label for every signal, and your diagnostic, each matching the contract.";

/// The first prompt of an execution.
pub fn render_prompt(input: &PromptInput<'_>) -> String {
    let (guidance, value_rule) = if input.contract.is_verifier() {
        (VERIFIER_GUIDANCE, VERIFIER_VALUE_RULE)
    } else {
        (WORKER_GUIDANCE, WORKER_VALUE_RULE)
    };
    let instructions = input
        .instructions
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .unwrap_or("(none)");
    format!(
        "Execute the Trellis graph node `{node}` in the shared workspace {workspace}.\n\
         \n\
         Authored instructions:\n\
         {instructions}\n\
         \n\
         Runtime guidance:\n\
         {guidance}\n\
         \n\
         Input JSON:\n\
         {input_json}\n\
         \n\
         Runtime-owned response contract:\n\
         {contract}\n\
         \n\
         Reply rules:\n\
         - When you are done, reply with JSON only: exactly {{\"response\": <value>}}, where {value_rule}\n\
         - Never return the contract itself, and add no other fields and no prose around the JSON.\n\
         - If you cannot or will not do this task, reply with exactly {{\"refusal\": \"<reason>\"}} instead.\n",
        node = input.node,
        workspace = input.workspace.display(),
        input_json = input.input,
        contract = input.contract.describe(),
    )
}

/// The correction turn after a rejected reply.
pub fn render_correction(contract: &NodeContract, validation_error: &str) -> String {
    format!(
        "Your previous reply was rejected mechanically and was not passed on to the workflow.\n\
         \n\
         Validation error:\n\
         {error}\n\
         \n\
         Runtime-owned response contract:\n\
         {contract}\n\
         \n\
         Reply with only the corrected JSON: exactly {{\"response\": <value>}} (or \
         {{\"refusal\": \"<reason>\"}} if you cannot do the task). Do not redo the work.\n",
        error = truncate(validation_error, MAX_VALIDATION_ERROR_BYTES),
        contract = contract.describe(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use trellis_graph::{GraphNode, JsonPath, PayloadType};

    #[test]
    fn worker_prompt_sections_in_order() {
        let contract = NodeContract {
            output: PayloadType::Integer,
            verifier: None,
        };
        let prompt = render_prompt(&PromptInput {
            node: "count",
            workspace: Path::new("/ws"),
            instructions: Some("Count the files.\n"),
            input: &json!({"dir": "src", "deep": true}),
            contract: &contract,
        });
        let expected = format!(
            "Execute the Trellis graph node `count` in the shared workspace /ws.\n\n\
             Authored instructions:\nCount the files.\n\n\
             Runtime guidance:\n{WORKER_GUIDANCE}\n\n\
             Input JSON:\n{{\"dir\":\"src\",\"deep\":true}}\n\n\
             Runtime-owned response contract:\n{{\"kind\":\"worker\",\"output\":{{\"kind\":\"integer\"}}}}\n\n\
             Reply rules:\n\
             - When you are done, reply with JSON only: exactly {{\"response\": <value>}}, where {WORKER_VALUE_RULE}\n\
             - Never return the contract itself, and add no other fields and no prose around the JSON.\n\
             - If you cannot or will not do this task, reply with exactly {{\"refusal\": \"<reason>\"}} instead.\n"
        );
        assert_eq!(prompt, expected);
    }

    #[test]
    fn verifier_prompt_forbids_changes_and_asks_for_the_triple() {
        let node = GraphNode::parse(
            &json!({"kind":"verifier","name":"review","worker":"w@1","input":{"kind":"null"},
                "output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"attempts":1,
                "signals":{"verdict":["accepted","rejected"]},"diagnostic":{"kind":"string"}}),
            &JsonPath::root(),
        )
        .unwrap();
        let contract = NodeContract::of(&node).unwrap();
        let prompt = render_prompt(&PromptInput {
            node: "review",
            workspace: Path::new("/ws"),
            instructions: None,
            input: &Value::Null,
            contract: &contract,
        });
        assert!(prompt.contains("Authored instructions:\n(none)\n"));
        assert!(prompt.contains("Do not create, modify or delete any file"));
        assert!(prompt.contains("Input JSON:\nnull\n"));
        assert!(prompt.contains(
            "{\"kind\":\"verifier\",\"output\":{\"kind\":\"null\"},\"signals\":{\"verdict\":[\"accepted\",\"rejected\"]},\"diagnostic\":{\"kind\":\"string\"}}"
        ));
        assert!(prompt.contains(VERIFIER_VALUE_RULE));
        assert!(!prompt.contains(WORKER_GUIDANCE));
    }

    #[test]
    fn corrections_quote_a_bounded_error_and_the_contract() {
        let contract = NodeContract {
            output: PayloadType::Boolean,
            verifier: None,
        };
        let correction = render_correction(&contract, "response output: $ must be a boolean");
        assert_eq!(
            correction,
            "Your previous reply was rejected mechanically and was not passed on to the workflow.\n\n\
             Validation error:\nresponse output: $ must be a boolean\n\n\
             Runtime-owned response contract:\n{\"kind\":\"worker\",\"output\":{\"kind\":\"boolean\"}}\n\n\
             Reply with only the corrected JSON: exactly {\"response\": <value>} (or \
             {\"refusal\": \"<reason>\"} if you cannot do the task). Do not redo the work.\n"
        );
        let long = render_correction(&contract, &"x".repeat(20_000));
        assert!(long.len() < MAX_VALIDATION_ERROR_BYTES + 600);
    }
}
