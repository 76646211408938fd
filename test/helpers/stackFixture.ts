import { before, after } from 'node:test';
import { startStack, type Stack } from '../../support/stack.js';
import { startFastWorker, type FastWorker, type FastWorkerOptions } from '../../support/fastWorker.js';

/** The fast worker a file asks for: on the stack's root URL as root, claiming tgs-test/fast unless told otherwise. */
export type StackWorkerOptions = Partial<Omit<FastWorkerOptions, 'rootUrl' | 'credentials'>>;

export type StackFixtureOptions = NonNullable<Parameters<typeof startStack>[0]> & {
  /** true or options: a fast worker (support/fastWorker.ts) runs from the stack's start to its stop */
  worker?: true | StackWorkerOptions;
};

/**
 * A test file's stack, read through getters once its `before` hook has started it (reading earlier throws).
 * `stop` is the fixture's own; `onStop` runs the file's clean-up before it.
 */
export type StackFixture = Omit<Stack, 'stop'> & {
  /**
   * Runs `cleanUp` in the fixture's `after` hook, before the fast worker and the stack stop, in the order given
   * (what the file started on the stack: browsers, workers, connections). A plain `after` of the file would run
   * after the stack stopped, since node:test runs `after` hooks in the order they were registered.
   */
  onStop(cleanUp: () => void | Promise<void>): void;
};

export type StackFixtureWithWorker = StackFixture & { readonly worker: FastWorker };

/**
 * The stack of a test file (support/stack.ts: its own database, the API, relay, bridge, a Temporal dev server
 * and the scheduler worker), started by a node:test `before` hook and stopped by an `after` hook that this call
 * registers; with `worker`, a fast worker too. Hooks the file registers after this call run after the stack started.
 */
export function useStack(options: StackFixtureOptions & { worker: true | StackWorkerOptions }): StackFixtureWithWorker;
export function useStack(options?: StackFixtureOptions): StackFixture;
export function useStack(options: StackFixtureOptions = {}): StackFixtureWithWorker {
  const { worker: workerOptions, ...stackOptions } = options;
  let stack: Stack | undefined;
  let worker: FastWorker | undefined;
  const cleanUps: (() => void | Promise<void>)[] = [];
  const started = (): Stack => {
    if (!stack) throw new Error('useStack: the stack is read before its before hook started it, or after it stopped');
    return stack;
  };

  before(async () => {
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
    onStop(cleanUp) {
      cleanUps.push(cleanUp);
    },
  };
}
