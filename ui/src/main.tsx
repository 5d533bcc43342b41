// Entry point: starts the first requests of the page the URL names and the layout worker,
// then loads and mounts the app (a separate chunk, so the requests run while the browser parses it).
import { prefetchFor } from "./api/prefetch";
import { layoutWorker } from "./graph/elkWorker";

prefetchFor(window.location.hash);
layoutWorker();
void import("./app/boot");
