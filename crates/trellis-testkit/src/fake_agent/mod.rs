//! A deterministic stand-in for an agent CLI's judgement, shared by Trellis and the reference
//! in the runtime differential: the reply to an execution is chosen from a hash of the node's
//! instructions, its input and how many times that pair was executed before, and is built from
//! the response contract both tools print in their prompts, so both tools get the same logical
//! reply whatever their reply schemas look like.

pub mod claude;

use serde_json::{Map, Value, json};

/// What the fake agent does in one execution.
#[derive(Debug, Clone, PartialEq)]
pub enum Behaviour {
    /// Replies with this value (inside the `{"response": …}` envelope).
    Reply(Value),
    /// Replies with a value that breaks the contract, on the first turn and on every
    /// correction turn, so the execution settles `malformed`.
    Malformed,
    /// Exits non-zero after announcing its session, without a final result: `crash`.
    Crash,
}

impl Behaviour {
    /// The name written in the fake's execution log.
    pub fn name(&self) -> &'static str {
        match self {
            Behaviour::Reply(_) => "reply",
            Behaviour::Malformed => "malformed",
            Behaviour::Crash => "crash",
        }
    }
}

/// The parts of a first-turn prompt the fake's choice depends on.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptFacts {
    pub instructions: String,
    /// The input, with object keys sorted (the tools may print them in different orders).
    pub input: Value,
    pub contract: Value,
}

impl PromptFacts {
    /// Reads a first-turn prompt of either tool; `None` for anything else (a correction turn).
    pub fn parse(prompt: &str) -> Option<PromptFacts> {
        let instructions = section(prompt, "Authored instructions:")?;
        let input = serde_json::from_str(&section(prompt, "Input JSON:")?).ok()?;
        let contract =
            serde_json::from_str(&section(prompt, "Runtime-owned response contract:")?).ok()?;
        Some(PromptFacts {
            instructions,
            input: sorted(&input),
            contract,
        })
    }

    /// The node the generator's instructions name (`Do the work of NAME.`), else the
    /// instructions' first line.
    pub fn node(&self) -> String {
        let first = self.instructions.lines().next().unwrap_or_default();
        first
            .strip_prefix("Do the work of ")
            .and_then(|rest| rest.strip_suffix('.'))
            .unwrap_or(first)
            .to_owned()
    }

    /// The key executions of the same node on the same input share.
    pub fn key(&self) -> u64 {
        fnv(format!("{}\u{0}{}", self.instructions, self.input).as_bytes())
    }
}

/// The text of a prompt section: from `heading` to the next blank line (Trellis) or the next
/// heading (the reference, whose sections follow each other directly).
fn section(prompt: &str, heading: &str) -> Option<String> {
    let start = prompt.find(heading)? + heading.len();
    let body = prompt[start..].trim_start_matches([' ', '\n']);
    let end = [
        "\n\n",
        "\nRuntime-owned",
        "\nInput JSON:",
        "\nThe response contract",
    ]
    .iter()
    .filter_map(|next| body.find(next))
    .min()
    .unwrap_or(body.len());
    Some(body[..end].trim().to_owned())
}

/// `value` with every object's keys in sorted order.
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let out: Map<String, Value> = keys
                .into_iter()
                .map(|k| (k.clone(), sorted(&map[k])))
                .collect();
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// FNV-1a, 64 bits: stable across builds and platforms.
pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A small deterministic stream of choices.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Chooses what the `call`-th execution (from 1) of a node on an input does: mostly a valid
/// reply, sometimes a crash or a malformed answer. Failures are rarer on repeated executions so
/// that loops and retries usually get somewhere.
pub fn choose(facts: &PromptFacts, call: u64) -> Behaviour {
    let mut draws = Draws(facts.key() ^ call.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let roll = draws.below(100);
    let failure_odds = if call == 1 { 16 } else { 8 };
    if roll < failure_odds / 2 {
        return Behaviour::Crash;
    }
    if roll < failure_odds {
        return Behaviour::Malformed;
    }
    Behaviour::Reply(response(&facts.contract, &mut draws))
}

/// A valid response for a contract: the worker's output, or a verifier's
/// `{output, signals, diagnostic}`.
fn response(contract: &Value, draws: &mut Draws) -> Value {
    let output = value_of(&contract["output"], draws, 0);
    if contract["kind"] != "verifier" {
        return output;
    }
    let signals: Map<String, Value> = contract["signals"]
        .as_object()
        .map(|signals| {
            signals
                .iter()
                .map(|(name, labels)| {
                    let labels = labels.as_array().cloned().unwrap_or_default();
                    let pick = draws.below(labels.len() as u64) as usize;
                    (
                        name.clone(),
                        labels.get(pick).cloned().unwrap_or(Value::Null),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "output": output,
        "signals": signals,
        "diagnostic": value_of(&contract["diagnostic"], draws, 0),
    })
}

/// A value of a GraphSpec payload type.
fn value_of(ty: &Value, draws: &mut Draws, depth: usize) -> Value {
    match ty["kind"].as_str() {
        Some("integer") => json!(draws.below(5)),
        Some("number") => json!(draws.below(7) as f64 + 0.5),
        Some("string") => json!(format!("s{}", draws.below(3))),
        Some("boolean") => json!(draws.below(2) == 1),
        Some("enum") => {
            let labels = ty["values"].as_array().cloned().unwrap_or_default();
            let pick = draws.below(labels.len() as u64) as usize;
            labels.get(pick).cloned().unwrap_or(Value::Null)
        }
        Some("array") => {
            let len = if depth > 3 { 0 } else { draws.below(3) };
            Value::Array(
                (0..len)
                    .map(|_| value_of(&ty["items"], draws, depth + 1))
                    .collect(),
            )
        }
        Some("record") => {
            let mut out = Map::new();
            if let Some(fields) = ty["fields"].as_object() {
                for (name, field) in fields {
                    let required = field["required"].as_bool().unwrap_or(true);
                    if required || draws.below(2) == 1 {
                        out.insert(name.clone(), value_of(&field["type"], draws, depth + 1));
                    }
                }
            }
            Value::Object(out)
        }
        _ => Value::Null,
    }
}

/// A reply no contract accepts: the envelope's value is an object with an undeclared field
/// (a verifier's triple has none, a worker's output is never this shape).
pub fn malformed_reply() -> Value {
    json!({"response": {"fake_agent_unexpected_field": true}})
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRELLIS_PROMPT: &str = "Execute the Trellis graph node `w` in the shared workspace /x.\n\nAuthored instructions:\nDo the work of w.\n\nRuntime guidance:\nbe nice\n\nInput JSON:\n{\"b\":1,\"a\":[2]}\n\nRuntime-owned response contract:\n{\"kind\":\"verifier\",\"output\":{\"kind\":\"integer\"},\"signals\":{\"verdict\":[\"accepted\",\"rejected\"]},\"diagnostic\":{\"kind\":\"null\"}}\n\nReply rules:\n- JSON\n";
    const REFERENCE_PROMPT: &str = "Execute this graph node using the shared workspace.\nAuthored instructions:\nDo the work of w.\nRuntime-owned verifier guidance:\nVerify.\nInput JSON:\n{\"a\":[2],\"b\":1}\nRuntime-owned response contract:\n{\"kind\":\"verifier\",\"output\":{\"kind\":\"integer\"},\"signals\":{\"verdict\":[\"accepted\",\"rejected\"]},\"diagnostic\":{\"kind\":\"null\"}}\nThe response contract describes the required type.";

    #[test]
    fn both_tools_prompts_give_the_same_facts_and_choices() {
        let ours = PromptFacts::parse(TRELLIS_PROMPT).unwrap();
        let theirs = PromptFacts::parse(REFERENCE_PROMPT).unwrap();
        assert_eq!(ours, theirs);
        assert_eq!(ours.node(), "w");
        assert_eq!(ours.input, json!({"a": [2], "b": 1}));
        let mut kinds = std::collections::BTreeSet::new();
        for call in 1..=200 {
            let behaviour = choose(&ours, call);
            assert_eq!(behaviour, choose(&theirs, call));
            if let Behaviour::Reply(reply) = &behaviour {
                assert!(reply["output"].is_u64());
                assert!(
                    ["accepted", "rejected"]
                        .contains(&reply["signals"]["verdict"].as_str().unwrap())
                );
                assert_eq!(reply["diagnostic"], Value::Null);
            }
            kinds.insert(behaviour.name());
        }
        assert_eq!(kinds.len(), 3, "every behaviour occurs: {kinds:?}");
        assert!(PromptFacts::parse("Your previous reply was rejected mechanically").is_none());
    }
}
