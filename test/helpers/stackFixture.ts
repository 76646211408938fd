import { before, after } from 'node:test';
import { startStack, type Stack } from '../../support/stack.js';
import { startFastWorker, type FastWorker, type FastWorkerOptions } from '../../support/fastWorker.js';

/** The fast worker a file asks for: on the stack's root URL as root, claiming tgs-test/fast unless told otherwise. */
export type StackWorkerOptions = Partial<Omit<FastWorkerOptions, 'rootUrl' | 'credentials'>>;

export type StackFixtureOptions = NonNullable<Parameters<typeof startStack>[0]> & {
  /** true or options: a fast worker (support/fastWorker.ts) runs from the stack's start to its stop */
  worker?: true | StackWorkerOptions;
  /** what must be done before the stack starts (e.g. the Temporal SDK's runtime, installed once per process) */
  beforeStart?: () => void | Promise<void>;
};

type Step = () => void | Promise<void>;

/**
 * A test file's stack, read through getters once its `before` hook has started it (reading earlier throws).
 * `stop` is the fixture's own. The file's own set-up and clean-up on the stack go through `onStart` and
 * `onStop`, not through node:test's `before` and `after`: under node 20 (20.20 here) a top-level `before` hook
 * starts as it is registered, so two async ones run at once (a second `before` read the first one's result
 * still unset, tried with a 500 ms first hook), and `after` hooks run in the order they were registered, so a
 * file's `after` would run once the stack had stopped.
 */
export type StackFixture = Omit<Stack, 'stop'> & {
  /** Runs `setUp` in the fixture's `before` hook once the stack and its fast worker started, in the order given. */
  onStart(setUp: Step): void;
  /**
   * Runs `cleanUp` in the fixture's `after` hook, before the fast worker and the stack stop, in the order given
   * (what the file started on the stack: browsers, workers, connections).
   */
  onStop(cleanUp: Step): void;
};

export type StackFixtureWithWorker = StackFixture & { readonly worker: FastWorker };

/** Stacks of one file start one after the other, as a single `before` hook starting them all would. */
let previousStart: Promise<void> = Promise.resolve();

/**
 * The stack of a test file (support/stack.ts: its own database, the API, relay, bridge, a Temporal dev server
 * and the scheduler worker), started by a node:test `before` hook and stopped by an `after` hook that this call
 * registers; with `worker`, a fast worker too.
 */
export function useStack(options: StackFixtureOptions & { worker: true | StackWorkerOptions }): StackFixtureWithWorker;
export function useStack(options?: StackFixtureOptions): StackFixture;
export function useStack(options: StackFixtureOptions = {}): StackFixtureWithWorker {
  const { worker: workerOptions, beforeStart, ...stackOptions } = options;
  let stack: Stack | undefined;
  let worker: FastWorker | undefined;
  const setUps: Step[] = [];
  const cleanUps: Step[] = [];
  const started = (): Stack => {
    if (!stack) throw new Error('useStack: the stack is read before its before hook started it, or after it stopped');
    return stack;
  };

  const previous = previousStart;
  let startEnded!: () => void;
  previousStart = new Promise<void>((resolve) => (startEnded = resolve));
  before(async () => {
    try {
      await previous;
      await beforeStart?.();
      stack = await startStack(stackOptions);
      if (workerOptions) {
        worker = startFastWorker({
          rootUrl: stack.api.rootUrl,
          credentials: stack.api.root,
          provisionerId: 'tgs-test',
          workerType: 'fast',
          ...(workerOptions === true ? {} : workerOptions),
        });
      }
      for (const setUp of setUps) await setUp();
    } finally {
      // a stack that failed to start fails its own hook; the next one still starts
      startEnded();
    }
  });
  after(async () => {
    // the stack stops even when a clean-up throws (a file's failed check in it still fails the file)
    try {
      for (const cleanUp of cleanUps) await cleanUp();
    } finally {
      await worker?.stop();
      await stack?.stop();
      stack = undefined;
    }
  });

  return {
    get api() {
      return started().api;
    },
    get config() {
      return started().config;
    },
    get temporal() {
      return started().temporal;
    },
    get client() {
      return started().client;
    },
    get root() {
      return started().root;
    },
    get bridge() {
      return started().bridge;
    },
    get relay() {
      return started().relay;
    },
    get worker() {
      if (!workerOptions) throw new Error('useStack: no fast worker was asked for (the worker option)');
      started();
      return worker as FastWorker;
    },
    startWorker: () => started().startWorker(),
    stopWorker: () => started().stopWorker(),
    onStart(setUp) {
      setUps.push(setUp);
    },
    onStop(cleanUp) {
      cleanUps.push(cleanUp);
    },
  };
}
