import type { Activities, DispatchResult, PublishResult } from '../../src/activities/index.js';
import { ApplicationFailure } from '@temporalio/common';
import type { AmendGraphStored } from '../../src/workflows/activityContract.js';
import { INVALID_TASK_GRAPH, type AmendGraphRequest, type GraphMeta, type NodePage, type Resolution } from '../../src/workflows/contract.js';
import type { DispatchItem } from '../../src/workflows/graphModel.js';
import { pageFor, slicePage, type NodeSpec } from './graphPages.js';

/**
 * A fake scheduler back end for workflow tests: the graph's nodes in memory, every dispatch and
 * published event recorded. The test plays the queue: it resolves dispatched tasks by signalling.
 */
export class FakeGraph {
  pages: NodePage[] = [];
  ids = new Map<string, string>();
  labels = new Map<string, string>();
  dispatched: DispatchItem[] = [];
  published: { kind: string; seq: number; state: string; blockedBy: string[]; reason?: string }[] = [];
  canceled: string[] = [];
  /** queue states reported by reconcile: taskId → resolution */
  queueResolutions = new Map<string, Resolution>();
  nodeCount = 0;
  /** reconcile calls so far */
  reconcileCalls = 0;
  /** loadNodes calls so far; while loadGate is set, each waits for it (a load the test holds) */
  loadCalls = 0;
  loadGate: Promise<void> | undefined;
  /** what the amendGraph activity does (the test stores the amend); unset: it refuses as the endpoint would */
  onAmend: ((request: AmendGraphRequest) => AmendGraphStored) | undefined;
  private waiters: (() => void)[] = [];

  constructor(readonly taskGraphId: string, specs: NodeSpec[]) {
    this.add(specs);
  }

  add(specs: NodeSpec[]): void {
    const known = new Map([...this.ids].map(([label]) => [label, this.indexOf(label)]));
    const { page, ids } = pageFor(specs, this.nodeCount, known);
    this.pages.push(page);
    for (const [label, id] of ids) {
      this.ids.set(label, id);
      this.labels.set(id, label);
    }
    this.nodeCount += specs.length;
  }

  indexOf(label: string): number {
    let offset = 0;
    for (const page of this.pages) {
      const k = page.taskIds.indexOf(this.ids.get(label) as string);
      if (k >= 0) return page.fromIdx + k / 22;
      offset += page.taskIds.length / 22;
    }
    throw new Error(`no label ${label} (${offset})`);
  }

  id(label: string): string {
    const id = this.ids.get(label);
    if (!id) throw new Error(`no label ${label}`);
    return id;
  }

  notify() {
    const waiters = this.waiters;
    this.waiters = [];
    waiters.forEach((w) => w());
  }

  /** Waits until the predicate holds (checked after every activity call). */
  async until(predicate: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; dispatched ${JSON.stringify(this.dispatchedLabels())}, published ${JSON.stringify(this.published.map((p) => p.kind))}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
  }

  dispatchedLabels(): string[] {
    return this.dispatched.map((d) => `${d.kind}:${this.labels.get(d.taskId)}`);
  }

  activities(): Activities {
    return makeFakeActivities(this);
  }
}

/** Activities that route each call to the FakeGraph registered under its taskGraphId. */
export function fakeActivities(graphs: Map<string, FakeGraph>): Activities {
  const route = (name: keyof Activities) =>
    async (id: string, ...rest: unknown[]) => {
      const graph = graphs.get(id);
      if (!graph) throw new Error(`fake: unknown graph ${id}`);
      return (makeFakeActivities(graph)[name] as (...args: unknown[]) => Promise<unknown>)(id, ...rest);
    };
  const names: (keyof Activities)[] = ['amendGraph', 'createGraph', 'loadGraph', 'loadNodes', 'joinTasks', 'dispatchTasks', 'publishGraphEvent', 'cancelTasks', 'reconcile', 'cancelRequestOf'];
  return Object.fromEntries(names.map((n) => [n, route(n)])) as unknown as Activities;
}

function makeFakeActivities(self: FakeGraph): Activities {
  // the nodes [from, from + limit) of the stored page holding `from`, cut as loadNodes cuts the graph_nodes rows
  const slice = (from: number, limit: number): NodePage => {
    const page = self.pages.find((p) => p.fromIdx <= from && from < p.fromIdx + p.taskIds.length / 22);
    if (!page) throw new Error(`fake: no page at ${from}`);
    const a = from - page.fromIdx;
    const b = Math.min(page.taskIds.length / 22, a + limit);
    return a === 0 && b === page.taskIds.length / 22 ? page : slicePage(page, a, b);
  };
  const impl = {
    async createGraph() {
      throw new Error('not used');
    },
    async amendGraph(_id: string, request: AmendGraphRequest): Promise<AmendGraphStored> {
      if (!self.onAmend) throw ApplicationFailure.nonRetryable('fake: this amend is refused', INVALID_TASK_GRAPH, { code: 'InputValidationError' });
      return self.onAmend(request);
    },
    async loadGraph(taskGraphId: string): Promise<GraphMeta> {
      return { taskGraphId, schedulerId: 'test-scheduler', routing: 'r', nodeCount: self.pages[0].taskIds.length / 22, state: 'running' };
    },
    async loadNodes(_id: string, fromIdx: number, limit: number, withQueueState: boolean): Promise<NodePage> {
      self.loadCalls++;
      self.notify();
      if (self.loadGate) await self.loadGate;
      const page = slice(fromIdx, limit);
      return withQueueState ? page : { ...page, queueStates: undefined, latestRuns: undefined };
    },
    async joinTasks(): Promise<{ nodeCount: number }> {
      return { nodeCount: self.nodeCount };
    },
    async dispatchTasks(_id: string, items: DispatchItem[]): Promise<DispatchResult> {
      self.dispatched.push(...items);
      self.notify();
      return { resolutions: [] };
    },
    async publishGraphEvent(_id: string, event: { kind: string; seq: number; state: string; blockedBy: string[]; knownNodeCount: number; reason?: string }): Promise<PublishResult> {
      if (event.state === 'finished' && self.nodeCount > event.knownNodeCount) return { published: false, nodeCount: self.nodeCount };
      self.published.push({ kind: event.kind, seq: event.seq, state: event.state, blockedBy: event.blockedBy, ...(event.reason ? { reason: event.reason } : {}) });
      self.notify();
      return { published: true, nodeCount: self.nodeCount };
    },
    async cancelTasks(_id: string, taskIds: string[]): Promise<void> {
      self.canceled.push(...taskIds);
      self.notify();
    },
    async cancelRequestOf(): Promise<{ identity?: string; reason?: string }> {
      return { identity: 'fake-identity', reason: 'fake reason' };
    },
    async reconcile(_id: string, taskIds: string[]): Promise<{ resolutions: Resolution[]; nodeCount: number }> {
      self.reconcileCalls++;
      self.notify();
      return { resolutions: taskIds.flatMap((t) => (self.queueResolutions.has(t) ? [self.queueResolutions.get(t) as Resolution] : [])), nodeCount: self.nodeCount };
    },
  };
  return impl as unknown as Activities;
}
