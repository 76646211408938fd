import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * JSON-e rendering with bounds. A hook's template is a caller's program: json-e runs it synchronously, and a few
 * hundred bytes of nested `$map`s expand exponentially (seven levels of `$map` over `range(0, 10)`, 10^8 elements,
 * ran for over 60 s and was killed, measured here), which on the main thread would stop every request of the process.
 * So templates render in worker threads (RENDER_THREADS of them, each one render at a time), and a render that takes
 * longer than RENDER_TIME_LIMIT_MS is stopped by terminating its thread (a new one starts for the next render); its
 * heap is capped too, and a result whose JSON exceeds RENDER_OUTPUT_LIMIT characters is refused before it is sent back.
 * One hook renders at most one template at a time and has at most PER_HOOK_WAITING renders waiting; at most
 * MAX_WAITING wait in all; beyond either a render is refused at once (RenderBusyError: the API answers 429). So a
 * hook whose every render takes the full second holds one thread, and another hook's render takes the other at once
 * (before, one thread and an unbounded queue: 20 anonymous triggers of a slow hook made another hook's trigger wait
 * 20.8 s, security review 2026-11-28, finding 8). A cheaper bound inside json-e
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

/**
 * Two threads: the machines tgs is measured on have 2 cores, and a render is CPU-bound; with one hook's renders held
 * to one thread, the other is free for every other hook.
 */
export const RENDER_THREADS = 2;
/** Renders of one hook waiting for their turn: a trigger burst beyond this is answered 429 at once. */
export const PER_HOOK_WAITING = 4;
/** Renders waiting in all: each waits at most a second a render ahead of it on its thread. */
export const MAX_WAITING = 64;

/** A render refused because the renderers are full (for this hook, or in all): try again later, 429. */
export class RenderBusyError extends Error {}

interface Job {
  key: string;
  template: unknown;
  context: Record<string, unknown>;
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
}

const waiting: Job[] = [];
/** Renders waiting, and in flight, by key (a hook). */
const waitingByKey = new Map<string, number>();
const runningByKey = new Map<string, number>();
const count = (m: Map<string, number>, key: string, by: number) => {
  const n = (m.get(key) ?? 0) + by;
  if (n === 0) m.delete(key);
  else m.set(key, n);
};

/** One renderer thread: one render at a time, replaced when a render is stopped or the thread dies. */
class RenderThread {
  private worker: Worker | undefined;
  /** The thread took its first message handler: its start (tens of ms, more under load) is not counted as render time. */
  private online: Promise<void> | undefined;
  current: (Job & { timer?: NodeJS.Timeout }) | undefined;

  private spawn(): Worker {
    const w = new Worker(SOURCE, { eval: true, execArgv: [], resourceLimits: { maxOldGenerationSizeMb: RENDER_HEAP_MB } });
    this.online = new Promise<void>((resolve) => {
      w.once('online', () => resolve());
      w.once('exit', () => resolve());
    });
    w.on('message', (reply: { json?: string; tooLarge?: number; error?: string }) => {
      const job = this.finish();
      if (!job) return;
      if (reply.error !== undefined) job.reject(new Error(reply.error));
      else if (reply.tooLarge !== undefined) job.reject(new RenderLimitError(`the template rendered ${reply.tooLarge} characters of JSON, more than the limit of ${RENDER_OUTPUT_LIMIT}`));
      else job.resolve(JSON.parse(reply.json ?? 'null'));
      pump();
    });
    const died = (err: Error | undefined) => {
      if (this.worker !== w) return;
      this.worker = undefined;
      const job = this.finish();
      job?.reject(
        (err as { code?: string } | undefined)?.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? new RenderLimitError(`rendering the template took more than ${RENDER_HEAP_MB} MB of memory`)
          : new Error(`the JSON-e renderer stopped (${err?.message ?? 'exited'})`),
      );
      pump();
    };
    w.on('error', died);
    w.on('exit', () => died(undefined));
    // an idle renderer keeps no process alive (a render in flight has its timer); after the listeners, which would
    // otherwise ref the thread's port again
    w.unref();
    return w;
  }

  /** The job in flight ended: its timer cleared, its hook's count given back. */
  private finish(): Job | undefined {
    const job = this.current;
    if (job) {
      clearTimeout(job.timer);
      count(runningByKey, job.key, -1);
    }
    this.current = undefined;
    return job;
  }

  run(job: Job): void {
    this.worker ??= this.spawn();
    const w = this.worker;
    // taken now, so later renders go elsewhere or wait while the thread starts
    const taken = { ...job };
    this.current = taken;
    void (this.online ?? Promise.resolve()).then(() => this.start(w, taken));
  }

  private start(w: Worker, job: Job & { timer?: NodeJS.Timeout }): void {
    if (this.worker !== w || this.current !== job) {
      // the thread died while starting: its job was rejected with the reason
      return;
    }
    job.timer = setTimeout(() => {
      if (this.current !== job) return;
      this.worker = undefined;
      this.finish();
      job.reject(new RenderLimitError(`rendering the template took longer than ${RENDER_TIME_LIMIT_MS} ms (a template that expands exponentially or loops long)`));
      void w.terminate();
      pump();
    }, RENDER_TIME_LIMIT_MS);
    try {
      w.postMessage({ template: job.template, context: job.context, maxChars: RENDER_OUTPUT_LIMIT });
    } catch (err) {
      // a context that cannot be cloned (never from JSON)
      this.finish();
      job.reject(err as Error);
      pump();
    }
  }
}

const threads = Array.from({ length: RENDER_THREADS }, () => new RenderThread());

/** Gives each idle thread the oldest waiting render whose hook has none in flight. */
function pump(): void {
  for (const thread of threads) {
    if (thread.current) continue;
    const i = waiting.findIndex((job) => !runningByKey.has(job.key));
    if (i < 0) return;
    const [job] = waiting.splice(i, 1);
    count(waitingByKey, job.key, -1);
    count(runningByKey, job.key, 1);
    thread.run(job);
  }
}

/**
 * json-e's `render(template, context)`, bounded: rejects with RenderLimitError past a bound, with json-e's own error
 * for a template error, and at once with RenderBusyError when `key` (the hook) has PER_HOOK_WAITING renders waiting or
 * MAX_WAITING wait in all. One render of a key at a time, on RENDER_THREADS threads.
 */
export function renderBounded(template: unknown, context: Record<string, unknown>, key: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    if (waiting.length >= MAX_WAITING || (waitingByKey.get(key) ?? 0) >= PER_HOOK_WAITING) {
      reject(new RenderBusyError(`${waitingByKey.get(key) ?? 0} renders of this hook and ${waiting.length} in all are waiting for the JSON-e renderers`));
      return;
    }
    waiting.push({ key, template, context, resolve, reject });
    count(waitingByKey, key, 1);
    pump();
  });
}
