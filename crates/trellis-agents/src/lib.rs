//! Harness adapters (claude, codex, copilot, exec) behind one trait: prompt rendering, reply-schema generation, correction turns, failure mapping and token usage.
