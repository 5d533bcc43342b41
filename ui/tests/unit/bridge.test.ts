// The embed bridge's reading of messages: only the parent window, only allowed origins, only
// version-1 envelopes; known commands are read, others answered with an error.
import { describe, expect, test } from "vitest";
import { readCommand } from "../../src/embed/bridge";

const parent = { name: "parent" };
const allowed = ["http://localhost:3000"];

function read(data: unknown, origin = "http://localhost:3000", source: unknown = parent) {
  return readCommand({ origin, source, data }, parent, allowed);
}

describe("the embed bridge", () => {
  test("reads open-run and ping from the parent at an allowed origin", () => {
    expect(read({ trellis: 1, type: "open-run", runId: "01J2-abc" })).toEqual({ command: { type: "open-run", runId: "01J2-abc" } });
    expect(read({ trellis: 1, type: "ping" })).toEqual({ command: { type: "ping" } });
  });

  test("ignores other windows, other origins and messages that are not envelopes", () => {
    expect(read({ trellis: 1, type: "ping" }, "http://localhost:3001")).toBeUndefined();
    expect(read({ trellis: 1, type: "ping" }, "http://evil.example")).toBeUndefined();
    expect(read({ trellis: 1, type: "ping" }, "http://localhost:3000", { name: "sibling" })).toBeUndefined();
    expect(read("open-run")).toBeUndefined();
    expect(read(null)).toBeUndefined();
    expect(read({ type: "open-run", runId: "x" })).toBeUndefined();
  });

  test("answers another version, an unknown command or a bad run id with an error", () => {
    expect(read({ trellis: 2, type: "ping" })).toMatchObject({ error: { type: "error", code: "unsupported_version" } });
    expect(read({ trellis: 1, type: "delete-everything" })).toMatchObject({ error: { code: "unknown_command" } });
    expect(read({ trellis: 1, type: "open-run", runId: "../../api/v1/prune" })).toMatchObject({ error: { code: "bad_command" } });
    expect(read({ trellis: 1, type: "open-run" })).toMatchObject({ error: { code: "bad_command" } });
  });
});
