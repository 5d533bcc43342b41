// The layout engine (ELK, about 1.4 MB of script) runs in a worker: its script is parsed and
// initialised off the page's main thread, started from the entry chunk so it is ready when the
// first graph arrives.
let worker: Worker | undefined;

export function layoutWorker(): Worker {
  worker ??= new Worker(new URL("elkjs/lib/elk-worker.min.js", import.meta.url));
  return worker;
}
