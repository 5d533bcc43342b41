// Unit tests of the pure parts of the app (graph models, run-state folding, formatting).
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: { include: ["tests/unit/**/*.test.ts"], environment: "node" },
});
