#!/usr/bin/env node
// The `trellis` launcher: runs the native binary of the platform package npm installed beside
// this one (an optional dependency per platform; npm installs only the one whose os and cpu
// match), passing arguments, standard streams, signals and the exit status through.
"use strict";

const { spawn } = require("child_process");
const path = require("path");

const PLATFORM_PACKAGES = {
  "linux-x64": "trellis-workflows-linux-x64",
  "linux-arm64": "trellis-workflows-linux-arm64",
  "darwin-x64": "trellis-workflows-darwin-x64",
  "darwin-arm64": "trellis-workflows-darwin-arm64",
};

function binaryPath() {
  const key = `${process.platform}-${process.arch}`;
  const name = PLATFORM_PACKAGES[key];
  if (!name) {
    throw new Error(`trellis has no prebuilt binary for ${key}; build it with cargo (see the README)`);
  }
  let manifest;
  try {
    manifest = require.resolve(`${name}/package.json`);
  } catch (_) {
    throw new Error(
      `the package ${name} is missing: reinstall trellis-workflows without --no-optional ` +
        `(npm installs the binary of this platform as an optional dependency)`,
    );
  }
  return path.join(path.dirname(manifest), "bin", "trellis");
}

function main() {
  let binary;
  try {
    binary = binaryPath();
  } catch (error) {
    process.stderr.write(`trellis: ${error.message}\n`);
    process.exitCode = 1;
    return;
  }
  const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
  // Ctrl-C reaches the binary through the terminal's process group (it detaches from a run);
  // the launcher ignores it and passes on what is sent to it alone.
  process.on("SIGINT", () => {});
  for (const signal of ["SIGTERM", "SIGHUP"]) {
    process.on(signal, () => child.kill(signal));
  }
  child.on("error", (error) => {
    process.stderr.write(`trellis: cannot start ${binary}: ${error.message}\n`);
    process.exitCode = 1;
  });
  child.on("exit", (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
      return;
    }
    process.exitCode = code === null ? 1 : code;
  });
}

main();
