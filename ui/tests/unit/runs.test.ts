// The run list's `skipped` entries (runs whose stored rows the ledger cannot read).
import { describe, expect, test } from "vitest";
import { skippedRuns } from "../../src/api/normalize";

describe("skippedRuns", () => {
  test("each entry keeps its run id and reason", () => {
    expect(
      skippedRuns([
        { run: "0190a", reason: "the ledger is corrupt: run_heads" },
        { run: "0190b", reason: "bad submission" },
      ]),
    ).toEqual([
      { run: "0190a", reason: "the ledger is corrupt: run_heads" },
      { run: "0190b", reason: "bad submission" },
    ]);
  });

  test("an absent or malformed field reads as no skipped runs", () => {
    expect(skippedRuns(undefined)).toEqual([]);
    expect(skippedRuns({ run: "x" })).toEqual([]);
    expect(skippedRuns([null, "x", { reason: 3 }])).toEqual([{ run: "?", reason: "" }]);
  });
});
