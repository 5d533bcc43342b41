//! A worker's reply text judged against the contracts of a built-in template's executables
//! (agent workers and verifiers, in both schema dialects, and as a command's stdout): never
//! a panic, and an accepted reply's outcome fits the node's declared output.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use trellis_agents::NodeContract;
use trellis_agents::SchemaDialect;
use trellis_agents::reply::{RawReply, ReplyVerdict, judge_reply};
use trellis_graph::json::parse_strict;
use trellis_graph::{GraphSpec, WorkerOutcome};

/// The contract of every executable of the software-change template.
fn contracts() -> &'static [NodeContract] {
    static CONTRACTS: OnceLock<Vec<NodeContract>> = OnceLock::new();
    CONTRACTS.get_or_init(|| {
        let text = include_str!("../../templates/software-change.json");
        let Ok(spec) = GraphSpec::from_json_str(text) else {
            panic!("the template graph no longer parses");
        };
        let mut found = Vec::new();
        spec.root
            .walk(&mut |node| found.extend(NodeContract::of(node)));
        found
    })
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks the contract and dialect; the rest is the reply.
    let Some((&pick, reply)) = data.split_first() else {
        return;
    };
    let contracts = contracts();
    let contract = &contracts[usize::from(pick) % contracts.len()];
    let dialect = if pick & 0x80 == 0 {
        SchemaDialect::Standard
    } else {
        SchemaDialect::OpenAiStrict
    };
    let Ok(text) = std::str::from_utf8(reply) else {
        return;
    };
    let verdict = judge_reply(contract, dialect, RawReply::Text(text.to_owned()));
    if let ReplyVerdict::Accepted(outcome) = verdict {
        fits(contract, &outcome);
    }
    if let Ok(value) = parse_strict(text)
        && let Ok(outcome) = contract.accept_command_reply(&value)
    {
        fits(contract, &outcome);
    }
});

/// An accepted outcome carries an output of the declared type (and, for a verifier, a
/// diagnostic of its declared type).
fn fits(contract: &NodeContract, outcome: &WorkerOutcome) {
    match outcome {
        WorkerOutcome::Verified { output, .. } => {
            assert!(contract.output.check_value(output).is_ok(), "{output}");
        }
        WorkerOutcome::Verifier {
            output, diagnostic, ..
        } => {
            assert!(contract.output.check_value(output).is_ok(), "{output}");
            if let Some(verifier) = &contract.verifier {
                assert!(
                    verifier.diagnostic.check_value(diagnostic).is_ok(),
                    "{diagnostic}"
                );
            }
        }
        WorkerOutcome::Error { .. } => {}
    }
}
