//! Chooses which scripted turn answers a request: binds client sessions to conversations and
//! walks each conversation's turns in order.

use std::collections::HashMap;

use crate::request::RequestView;
use crate::script::{Api, Script, Turn};

/// The answer chosen for one request.
#[derive(Debug, Clone)]
pub(crate) struct Chosen {
    pub conversation: String,
    pub index: usize,
    pub turn: Turn,
}

/// Why no turn could be chosen, with the conversation if one was identified.
#[derive(Debug, Clone)]
pub(crate) struct NoTurn {
    pub conversation: Option<String>,
    pub reason: String,
}

#[derive(Debug)]
struct ConversationState {
    next_turn: usize,
    sessions: usize,
}

/// Mutable matching state over an immutable script.
#[derive(Debug)]
pub(crate) struct Matcher {
    script: Script,
    states: Vec<ConversationState>,
    bindings: HashMap<String, usize>,
}

impl Matcher {
    pub(crate) fn new(script: Script) -> Self {
        let states = script
            .conversations
            .iter()
            .map(|_| ConversationState {
                next_turn: 0,
                sessions: 0,
            })
            .collect();
        Matcher {
            script,
            states,
            bindings: HashMap::new(),
        }
    }

    /// Picks the next turn for a request and advances that conversation.
    ///
    /// A session seen before stays with its conversation. A new session (or a request without
    /// a session id) goes to the first conversation, in script order, that serves this protocol,
    /// has turns left and whose marker occurs in the user text; failing that, to the first such
    /// conversation without a marker that no session has claimed yet.
    pub(crate) fn choose(&mut self, api: Api, view: &RequestView) -> Result<Chosen, NoTurn> {
        let bound = view
            .session
            .as_ref()
            .and_then(|session| self.bindings.get(session).copied());
        let index = match bound {
            Some(index) => index,
            None => {
                let index = self.find_new(api, view).ok_or_else(|| NoTurn {
                    conversation: None,
                    reason: self.no_match_reason(api, view),
                })?;
                if let Some(session) = &view.session {
                    self.bindings.insert(session.clone(), index);
                    if let Some(state) = self.states.get_mut(index) {
                        state.sessions += 1;
                    }
                }
                index
            }
        };
        let (Some(conversation), Some(state)) = (
            self.script.conversations.get(index),
            self.states.get_mut(index),
        ) else {
            return Err(NoTurn {
                conversation: None,
                reason: "internal: conversation index out of range".into(),
            });
        };
        let name = conversation.name.clone();
        let Some(turn) = conversation.turns.get(state.next_turn) else {
            return Err(NoTurn {
                conversation: Some(name.clone()),
                reason: format!(
                    "conversation {name:?} has no turn left (it has {} turns)",
                    conversation.turns.len()
                ),
            });
        };
        if let Some(expected) = &turn.expect
            && !view.latest_input.contains(expected.as_str())
        {
            return Err(NoTurn {
                conversation: Some(name.clone()),
                reason: format!(
                    "conversation {name:?} turn {} expects {expected:?} in the newest user input",
                    state.next_turn
                ),
            });
        }
        let chosen = Chosen {
            conversation: name,
            index: state.next_turn,
            turn: turn.clone(),
        };
        state.next_turn += 1;
        Ok(chosen)
    }

    /// Turns not yet served, per conversation, in script order.
    pub(crate) fn remaining(&self) -> Vec<(String, usize)> {
        self.script
            .conversations
            .iter()
            .zip(&self.states)
            .map(|(c, s)| (c.name.clone(), c.turns.len().saturating_sub(s.next_turn)))
            .collect()
    }

    fn find_new(&self, api: Api, view: &RequestView) -> Option<usize> {
        let open = |index: &usize| {
            let conversation = &self.script.conversations[*index];
            conversation.api.is_none_or(|wanted| wanted == api)
                && self.states[*index].next_turn < conversation.turns.len()
        };
        let all = 0..self.script.conversations.len();
        all.clone()
            .filter(open)
            .find(|index| {
                self.script.conversations[*index]
                    .marker
                    .as_deref()
                    .is_some_and(|marker| view.user_text.contains(marker))
            })
            .or_else(|| {
                all.filter(open).find(|index| {
                    self.script.conversations[*index].marker.is_none()
                        && self.states[*index].sessions == 0
                })
            })
    }

    fn no_match_reason(&self, api: Api, view: &RequestView) -> String {
        let session = view.session.as_deref().unwrap_or("(none)");
        format!(
            "no scripted conversation matches this {} request (session {session}); \
             conversations left: {:?}",
            api.as_str(),
            self.remaining()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::{Block, Conversation};

    fn view(session: Option<&str>, text: &str) -> RequestView {
        RequestView {
            session: session.map(str::to_owned),
            user_text: text.to_owned(),
            latest_input: text.to_owned(),
            ..RequestView::default()
        }
    }

    fn reply(text: &str) -> Turn {
        Turn::reply(vec![Block::text(text)])
    }

    fn script() -> Script {
        Script::new(vec![
            Conversation::new("plain").turn(reply("p0")),
            Conversation::new("alpha")
                .matching("NODE=alpha")
                .turn(reply("a0"))
                .turn(reply("a1").expecting("fix")),
            Conversation::new("beta")
                .matching("NODE=beta")
                .on_api(Api::Openai)
                .turn(reply("b0")),
        ])
    }

    fn text_of(chosen: &Chosen) -> String {
        match chosen.turn.reply.as_deref() {
            Some([Block::Text { text }]) => text.clone(),
            other => panic!("unexpected turn {other:?}"),
        }
    }

    #[test]
    fn markers_bind_sessions_and_turns_advance_in_order() {
        let mut m = Matcher::new(script());
        let first = m
            .choose(Api::Anthropic, &view(Some("s1"), "go NODE=alpha"))
            .unwrap();
        assert_eq!((first.conversation.as_str(), first.index), ("alpha", 0));
        // Same session, text no longer carries the marker: still alpha, next turn.
        let second = m
            .choose(Api::Anthropic, &view(Some("s1"), "please fix"))
            .unwrap();
        assert_eq!(text_of(&second), "a1");
        let exhausted = m
            .choose(Api::Anthropic, &view(Some("s1"), "fix"))
            .unwrap_err();
        assert_eq!(exhausted.conversation.as_deref(), Some("alpha"));
    }

    #[test]
    fn unmarked_conversation_takes_one_session_and_api_filter_applies() {
        let mut m = Matcher::new(script());
        assert_eq!(
            text_of(&m.choose(Api::Anthropic, &view(Some("x"), "hi")).unwrap()),
            "p0"
        );
        assert!(m.choose(Api::Anthropic, &view(Some("y"), "hi")).is_err());
        assert!(
            m.choose(Api::Anthropic, &view(Some("z"), "NODE=beta"))
                .is_err()
        );
        assert_eq!(
            text_of(
                &m.choose(Api::Openai, &view(Some("z"), "NODE=beta"))
                    .unwrap()
            ),
            "b0"
        );
        assert_eq!(
            m.remaining(),
            [("plain".into(), 0), ("alpha".into(), 2), ("beta".into(), 0)]
        );
    }

    #[test]
    fn failed_expectation_refuses_without_consuming_the_turn() {
        let mut m = Matcher::new(script());
        m.choose(Api::Anthropic, &view(Some("s"), "NODE=alpha"))
            .unwrap();
        let refused = m
            .choose(Api::Anthropic, &view(Some("s"), "something else"))
            .unwrap_err();
        assert!(
            refused.reason.contains("expects \"fix\""),
            "{}",
            refused.reason
        );
        assert_eq!(
            text_of(
                &m.choose(Api::Anthropic, &view(Some("s"), "fix it"))
                    .unwrap()
            ),
            "a1"
        );
    }

    #[test]
    fn requests_without_session_are_matched_one_by_one() {
        let mut m = Matcher::new(script());
        assert_eq!(
            text_of(&m.choose(Api::Anthropic, &view(None, "NODE=alpha")).unwrap()),
            "a0"
        );
        assert_eq!(
            text_of(&m.choose(Api::Anthropic, &view(None, "x")).unwrap()),
            "p0"
        );
    }
}
