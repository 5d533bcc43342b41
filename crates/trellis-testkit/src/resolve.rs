//! Turns protocol-neutral script blocks into the concrete outputs one protocol can carry.

use serde_json::{Value, json};

use crate::request::{RequestView, STRUCTURED_OUTPUT_TOOL};
use crate::script::{Api, Block};

/// The placeholder replaced by the client's working directory.
pub const WORKDIR_PLACEHOLDER: &str = "{{workdir}}";

/// One output item of a model response, ready to be encoded for a protocol.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Output {
    /// Assistant text.
    Text(String),
    /// A JSON tool call.
    Call { name: String, input: Value },
    /// A freeform tool call (OpenAI `custom_tool_call`).
    Custom { name: String, input: String },
}

impl Output {
    pub(crate) fn is_tool_call(&self) -> bool {
        !matches!(self, Output::Text(_))
    }
}

/// Resolves blocks for `api` against what the request offered; the error explains what the
/// script asked for that this request cannot carry.
pub(crate) fn resolve(
    api: Api,
    blocks: &[Block],
    view: &RequestView,
) -> Result<Vec<Output>, String> {
    let context = Context { view };
    blocks
        .iter()
        .map(|block| match api {
            Api::Anthropic => context.anthropic(block),
            Api::Openai => context.openai(block),
        })
        .collect()
}

struct Context<'a> {
    view: &'a RequestView,
}

impl Context<'_> {
    fn anthropic(&self, block: &Block) -> Result<Output, String> {
        Ok(match block {
            Block::Text { text } => Output::Text(self.fill(text)?),
            // pi (lower-case tool names, no structured-output tool) gets the value as text.
            Block::Structured { value }
                if self.offers("read") && !self.offers(STRUCTURED_OUTPUT_TOOL) =>
            {
                let value = self.fill_value(value)?;
                Output::Text(serde_json::to_string(&value).map_err(|e| e.to_string())?)
            }
            Block::Structured { value } => Output::Call {
                name: STRUCTURED_OUTPUT_TOOL.to_owned(),
                input: self.fill_value(value)?,
            },
            Block::WriteFile { path, content } if self.offers("write") => {
                self.pi_write(path, content)?
            }
            Block::WriteFile { path, content } => Output::Call {
                name: "Write".to_owned(),
                input: json!({"file_path": self.absolute(path)?, "content": self.fill(content)?}),
            },
            Block::Shell { command } if self.offers("bash") => self.pi_shell(command)?,
            Block::Shell { command } => Output::Call {
                name: "Bash".to_owned(),
                input: json!({"command": self.fill(command)?}),
            },
            Block::ToolCall { name, input } => Output::Call {
                name: name.clone(),
                input: self.fill_value(input)?,
            },
            Block::CustomToolCall { name, .. } => {
                return Err(format!(
                    "custom tool call {name:?} cannot be sent over the Anthropic Messages API"
                ));
            }
        })
    }

    fn openai(&self, block: &Block) -> Result<Output, String> {
        Ok(match block {
            Block::Text { text } => Output::Text(self.fill(text)?),
            Block::Structured { value } => {
                let value = self.fill_value(value)?;
                Output::Text(serde_json::to_string(&value).map_err(|e| e.to_string())?)
            }
            Block::WriteFile { path, content } if self.offers("write") => {
                self.pi_write(path, content)?
            }
            Block::WriteFile { path, content } => self.openai_write(path, content)?,
            Block::Shell { command } if self.offers("bash") => self.pi_shell(command)?,
            Block::Shell { command } => self.openai_shell(&self.fill(command)?)?,
            Block::ToolCall { name, input } => Output::Call {
                name: name.clone(),
                input: self.fill_value(input)?,
            },
            Block::CustomToolCall { name, input } => Output::Custom {
                name: name.clone(),
                input: self.fill(input)?,
            },
        })
    }

    fn offers(&self, name: &str) -> bool {
        self.view.tools.iter().any(|tool| tool == name)
    }

    /// Pi's `write` tool (lower-case names, on either protocol).
    fn pi_write(&self, path: &str, content: &str) -> Result<Output, String> {
        Ok(Output::Call {
            name: "write".to_owned(),
            input: json!({"path": self.absolute(path)?, "content": self.fill(content)?}),
        })
    }

    /// Pi's `bash` tool.
    fn pi_shell(&self, command: &str) -> Result<Output, String> {
        Ok(Output::Call {
            name: "bash".to_owned(),
            input: json!({"command": self.fill(command)?}),
        })
    }

    /// Codex writes files through `apply_patch` when the model has it, else through its shell.
    fn openai_write(&self, path: &str, content: &str) -> Result<Output, String> {
        let path = self.fill(path)?;
        let content = self.fill(content)?;
        let offered = |name: &str| self.view.tools.iter().any(|tool| tool == name);
        if offered("apply_patch") {
            let patch = add_file_patch(&path, &content);
            return Ok(
                if self.view.freeform_tools.iter().any(|t| t == "apply_patch") {
                    Output::Custom {
                        name: "apply_patch".to_owned(),
                        input: patch,
                    }
                } else {
                    Output::Call {
                        name: "apply_patch".to_owned(),
                        input: json!({"input": patch}),
                    }
                },
            );
        }
        let mut command = String::new();
        if let Some((dir, _)) = path.rsplit_once('/')
            && !dir.is_empty()
        {
            command.push_str(&format!("mkdir -p {} && ", shell_quote(dir)));
        }
        command.push_str(&format!(
            "printf '%s' {} > {}",
            shell_quote(&content),
            shell_quote(&path)
        ));
        self.openai_shell(&command)
    }

    fn openai_shell(&self, command: &str) -> Result<Output, String> {
        let offered = |name: &str| self.view.tools.iter().any(|tool| tool == name);
        let (name, input) = if offered("exec_command") {
            ("exec_command", json!({"cmd": command}))
        } else if offered("shell_command") {
            ("shell_command", json!({"command": command}))
        } else if offered("shell") {
            ("shell", json!({"command": ["bash", "-lc", command]}))
        } else {
            return Err(format!(
                "the request offers no shell tool (offered: {})",
                self.view.tools.join(", ")
            ));
        };
        Ok(Output::Call {
            name: name.to_owned(),
            input,
        })
    }

    fn absolute(&self, path: &str) -> Result<String, String> {
        let path = self.fill(path)?;
        if path.starts_with('/') {
            return Ok(path);
        }
        let workdir = self.workdir()?;
        Ok(format!("{}/{}", workdir.trim_end_matches('/'), path))
    }

    fn workdir(&self) -> Result<&str, String> {
        self.view
            .workdir
            .as_deref()
            .ok_or_else(|| "the request does not say which working directory it uses".to_owned())
    }

    fn fill(&self, text: &str) -> Result<String, String> {
        if text.contains(WORKDIR_PLACEHOLDER) {
            Ok(text.replace(WORKDIR_PLACEHOLDER, self.workdir()?))
        } else {
            Ok(text.to_owned())
        }
    }

    fn fill_value(&self, value: &Value) -> Result<Value, String> {
        Ok(match value {
            Value::String(text) => Value::String(self.fill(text)?),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.fill_value(item))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => {
                let mut filled = serde_json::Map::new();
                for (key, item) in map {
                    filled.insert(key.clone(), self.fill_value(item)?);
                }
                Value::Object(filled)
            }
            other => other.clone(),
        })
    }
}

/// An `apply_patch` patch adding one file. The format stores whole lines, so the created file
/// always ends with a newline.
fn add_file_patch(path: &str, content: &str) -> String {
    let mut patch = format!("*** Begin Patch\n*** Add File: {path}\n");
    let body = content.strip_suffix('\n').unwrap_or(content);
    for line in body.split('\n') {
        patch.push('+');
        patch.push_str(line);
        patch.push('\n');
    }
    patch.push_str("*** End Patch\n");
    patch
}

/// Quotes a string for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(tools: &[&str], freeform: &[&str]) -> RequestView {
        RequestView {
            tools: tools.iter().map(|t| t.to_string()).collect(),
            freeform_tools: freeform.iter().map(|t| t.to_string()).collect(),
            workdir: Some("/ws".into()),
            ..RequestView::default()
        }
    }

    #[test]
    fn anthropic_write_file_uses_absolute_path() {
        let out = resolve(
            Api::Anthropic,
            &[Block::write_file("a/b.txt", "x {{workdir}}")],
            &view(&[], &[]),
        );
        assert_eq!(
            out,
            Ok(vec![Output::Call {
                name: "Write".into(),
                input: json!({"file_path": "/ws/a/b.txt", "content": "x /ws"})
            }])
        );
    }

    #[test]
    fn openai_write_file_prefers_freeform_apply_patch() {
        let out = resolve(
            Api::Openai,
            &[Block::write_file("a.txt", "one\ntwo\n")],
            &view(&["exec_command", "apply_patch"], &["apply_patch"]),
        );
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** End Patch\n";
        assert_eq!(
            out,
            Ok(vec![Output::Custom {
                name: "apply_patch".into(),
                input: patch.into()
            }])
        );
    }

    #[test]
    fn openai_write_file_falls_back_to_shell_with_quoting() {
        let out = resolve(
            Api::Openai,
            &[Block::write_file("d/it's.txt", "a'b")],
            &view(&["exec_command"], &[]),
        );
        let cmd = r"mkdir -p 'd' && printf '%s' 'a'\''b' > 'd/it'\''s.txt'";
        assert_eq!(
            out,
            Ok(vec![Output::Call {
                name: "exec_command".into(),
                input: json!({"cmd": cmd})
            }])
        );
    }

    #[test]
    fn structured_becomes_tool_call_or_json_text() {
        let blocks = [Block::structured(json!({"response": {"ok": true}}))];
        let anthropic = resolve(Api::Anthropic, &blocks, &view(&[], &[]));
        assert_eq!(
            anthropic,
            Ok(vec![Output::Call {
                name: STRUCTURED_OUTPUT_TOOL.into(),
                input: json!({"response": {"ok": true}})
            }])
        );
        let openai = resolve(Api::Openai, &blocks, &view(&[], &[]));
        assert_eq!(
            openai,
            Ok(vec![Output::Text(r#"{"response":{"ok":true}}"#.into())])
        );
        let pi = resolve(Api::Anthropic, &blocks, &view(&["read", "bash"], &[]));
        assert_eq!(pi, openai);
    }

    #[test]
    fn unresolvable_requests_are_errors() {
        let no_workdir = RequestView::default();
        assert!(resolve(Api::Anthropic, &[Block::write_file("x", "")], &no_workdir).is_err());
        assert!(resolve(Api::Openai, &[Block::shell("ls")], &no_workdir).is_err());
        assert!(
            resolve(
                Api::Anthropic,
                &[Block::custom_tool_call("p", "")],
                &no_workdir
            )
            .is_err()
        );
    }
}
