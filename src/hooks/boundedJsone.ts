import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * JSON-e rendering with bounds. A hook's template is a caller's program: json-e runs it synchronously, and a few
 * hundred bytes of nested `$map`s expand exponentially (seven levels of `$map` over `range(0, 10)`, 10^8 elements,
 * ran for over 60 s and was killed, measured here), which on the main thread would stop every request of the process.
 * So templates render in a worker thread, one at a time, and a render that takes longer than RENDER_TIME_LIMIT_MS is
 * stopped by terminating the thread (a new one starts for the next render); its heap is capped too, and a result
 * whose JSON exceeds RENDER_OUTPUT_LIMIT characters is refused before it is sent back. A cheaper bound inside json-e
 * (counting its steps) is not possible without changing the package; a render in the thread costs a message each
 * way: test/hooks/hookRenderLimits.test.ts's ordinary task template took 0.54 ms a render there (1.3 ms while other
 * test files ran; 2 vCPU), its thread's start is not counted against the limit.
 */

/**
 * Ordinary templates render in about a millisecond; a second is three orders of magnitude of room. json-e is slow per
 * element (a `$map` over 100,000 elements took 2.1 s here), so a template that maps over tens of thousands of
 * elements is refused: no task definition needs that.
 */
export const RENDER_TIME_LIMIT_MS = 1000;
/**
 * The rendered task's (or task-graph's) JSON at most: 4 MiB characters, four times createTask's body limit
 * (src/api/bodyLimits.ts), room for a hook that renders a task-graph of a few thousand tasks.
 */
export const RENDER_OUTPUT_LIMIT = 4 * 1024 * 1024;
/** The thread's old-generation heap: an expansion that grows faster than the time limit stops is stopped here. */
const RENDER_HEAP_MB = 256;

/** A render stopped by a bound: the template's fault, not the service's. */
export class RenderLimitError extends Error {}

const jsonePath = createRequire(import.meta.url).resolve('json-e');

// CommonJS evaluated in the thread (no loader: execArgv empty): the same whether tgs runs from dist/ or with tsx
const SOURCE = `
const { parentPort } = require('node:worker_threads');
const jsone = require(${JSON.stringify(jsonePath)});
parentPort.on('message', ({ template, context, maxChars }) => {
  try {
    const rendered = jsone(template, context);
    const json = rendered === undefined ? 'null' : JSON.stringify(rendered);
    if (json.length > maxChars) parentPort.postMessage({ tooLarge: json.length });
    else parentPort.postMessage({ json });
  } catch (err) {
    parentPort.postMessage({ error: String(err) });
  }
});
`;

interface Job {
  template: unknown;
  context: Record<string, unknown>;
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
}

let worker: Worker | undefined;
/** The thread took its first message handler: its start (tens of ms, more under load) is not counted as render time. */
let online: Promise<void> | undefined;
let current: (Job & { timer?: NodeJS.Timeout }) | undefined;
const waiting: Job[] = [];

function spawn(): Worker {
  const w = new Worker(SOURCE, { eval: true, execArgv: [], resourceLimits: { maxOldGenerationSizeMb: RENDER_HEAP_MB } });
  online = new Promise<void>((resolve) => {
    w.once('online', () => resolve());
    w.once('exit', () => resolve());
  });
  w.on('message', (reply: { json?: string; tooLarge?: number; error?: string }) => {
    const job = finish();
    if (!job) return;
    if (reply.error !== undefined) job.reject(new Error(reply.error));
    else if (reply.tooLarge !== undefined) job.reject(new RenderLimitError(`the template rendered ${reply.tooLarge} characters of JSON, more than the limit of ${RENDER_OUTPUT_LIMIT}`));
    else job.resolve(JSON.parse(reply.json ?? 'null'));
    next();
  });
  const died = (err: Error | undefined) => {
    if (worker !== w) return;
    worker = undefined;
    const job = finish();
    job?.reject(
      (err as { code?: string } | undefined)?.code === 'ERR_WORKER_OUT_OF_MEMORY'
        ? new RenderLimitError(`rendering the template took more than ${RENDER_HEAP_MB} MB of memory`)
        : new Error(`the JSON-e renderer stopped (${err?.message ?? 'exited'})`),
    );
    next();
  };
  w.on('error', died);
  w.on('exit', () => died(undefined));
  // an idle renderer keeps no process alive (a render in flight has its timer); after the listeners, which would
  // otherwise ref the thread's port again
  w.unref();
  return w;
}

function finish(): Job | undefined {
  const job = current;
  if (job) clearTimeout(job.timer);
  current = undefined;
  return job;
}

function next(): void {
  if (current) return;
  const job = waiting.shift();
  if (!job) return;
  worker ??= spawn();
  const w = worker;
  // taken now, so later renders queue behind it while the thread starts
  const taken = { ...job };
  current = taken;
  void (online ?? Promise.resolve()).then(() => start(w, taken));
}

function start(w: Worker, job: Job & { timer?: NodeJS.Timeout }): void {
  if (worker !== w || current !== job) {
    // the thread died while starting: its job was rejected with the reason
    return;
  }
  const timer = setTimeout(() => {
    if (current !== job) return;
    worker = undefined;
    finish();
    job.reject(new RenderLimitError(`rendering the template took longer than ${RENDER_TIME_LIMIT_MS} ms (a template that expands exponentially or loops long)`));
    void w.terminate();
    next();
  }, RENDER_TIME_LIMIT_MS);
  job.timer = timer;
  try {
    w.postMessage({ template: job.template, context: job.context, maxChars: RENDER_OUTPUT_LIMIT });
  } catch (err) {
    // a context that cannot be cloned (never from JSON)
    finish();
    job.reject(err as Error);
    next();
  }
}

/**
 * json-e's `render(template, context)`, bounded: rejects with RenderLimitError past a bound, with json-e's own error
 * for a template error. Renders run one at a time in this process's thread.
 */
export function renderBounded(template: unknown, context: Record<string, unknown>): Promise<unknown> {
  return new Promise((resolve, reject) => {
    waiting.push({ template, context, resolve, reject });
    next();
  });
}
