// Entry point of `embed.html`: the run view alone, with the styles of the app and the layout worker.
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import "@xyflow/react/dist/style.css";
import "../theme.css";
import "../styles.css";
import "../run/run.css";
import { layoutWorker } from "../graph/elkWorker";
import { EmbedApp } from "./EmbedApp";

layoutWorker();
const root = document.getElementById("root");
if (root) {
  createRoot(root).render(
    <StrictMode>
      <EmbedApp />
    </StrictMode>,
  );
}
