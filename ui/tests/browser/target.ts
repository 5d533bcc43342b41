// What the browser suite drives: a server on loopback and a way to start runs on it.
import { fileURLToPath } from "node:url";
import { startFixtureServer } from "../fixture/server";

export interface Target {
  url: string;
  /** Starts a software-change run; `hold` keeps its worker running until force-stopped. */
  startRun: (title: string, hold: boolean) => Promise<void>;
  close: () => Promise<void>;
}

const here = fileURLToPath(new URL(".", import.meta.url));

export async function startTarget(): Promise<Target> {
  const server = await startFixtureServer({ dist: `${here}../../dist`, templates: `${here}../../../templates` });
  return {
    url: server.url,
    startRun: async (title, hold) => {
      server.runs.startSoftwareChange(title, 1200, hold);
    },
    close: server.close,
  };
}
