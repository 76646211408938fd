import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Config } from '../config.js';
import { TgsError } from '../errors.js';
import { compile, describeErrors, jsonProblems } from '../api/validate.js';
import { scopeSatisfied, type ScopeExpression } from '../auth/scopes.js';
import { insertNewTasks } from '../queue/createTasks.js';
import { createTaskScopes } from '../queue/createTaskScopes.js';
import type { TaskDefinition } from '../queue/definition.js';
import { graphNodeSchema, LABEL_PATTERN, type GraphNodeInput } from './graphSchema.js';
import { describeGraphErrors, prepareNode, substitute, type GraphErrors } from './prepareGraph.js';
import { canonicalDigest } from '../canonicalJson.js';
import { nodeDigests } from './nodeDigests.js';
import { memberNodesInsert } from './graphStore.js';
import { ByteRecords, Int32Blocks } from './blocks.js';
import { LabelTable } from './labelTable.js';
import { refuseOverNodeLimit } from './nodeLimit.js';
import type { StreamedMember } from '../api/jsonObjectStream.js';
import { cacheSpec, effectiveMode, type CacheMode } from '../taskCache/spec.js';
import { computeNodeKeys, type HeldNode } from '../taskCache/graphKeys.js';
import { cachePath } from '../taskCache/tiers.js';
import { announceDefined } from './announceDefined.js';
import { cacheKeysOf, extendNeededUntil, insertCacheRows, type CacheRow } from '../taskCache/store.js';

/**
 * Nodes validated, then written per chunk in the caller's transaction: a 100,000-task graph is never held whole.
 * The first chunk's preparation and the last chunk's write overlap nothing (readGraphBody overlaps the rest), so
 * the chunk is small: 500 nodes (~250 KB) kept 1.55-1.57 of the two cores busy through a 10,000-task submit where
 * 2,000 kept 1.39-1.48, with the same CPU a task, and the same figures at 100,000 tasks (bench/submitCpu.ts,
 * alternated, docs/bench-journal/2026-11-28.md § Late morning of 2026-11-28).
 */
export const INTAKE_CHUNK = 500;

/** Labels whose problems are kept for the answer; past this only the count grows (the answer stays small). */
const MAX_REPORTED_LABELS = 1000;

const LABEL = new RegExp(LABEL_PATTERN);
const GRAPH_ROUTING = /^[A-Za-z0-9_-]{0,10}$/;

interface PendingNode {
  label: string;
  idx: number;
  taskId: string;
  requires: number[];
  reruns: number;
  definition: TaskDefinition;
  /** the node's digest and work digest, hex (src/scheduler/nodeDigests.ts) */
  digest: string;
  workDigest: string;
  /** the node as given (validated, defaults filled): stored for the graph's current file (migration 041) */
  source: GraphNodeInput;
}

export interface IntakeOptions {
  config: Config;
  taskGraphId: string;
  /** The graph's routing when already known (extend); a create learns it from the body's `routing`. */
  routing?: string;
  /** Labels the graph has already (extend): requires may name them, new nodes may not reuse them. */
  existing?: Map<string, { taskId: string; idx: number }>;
  /** The first idx of the new nodes (the graph's node count). */
  startIdx: number;
  now: Date;
  /** Checks a scope expression the request needs, throwing 403 (each distinct one once, before its tasks are written). */
  authorize?: (expr: ScopeExpression) => void;
  /** Keeps every validated node for the pre-v2 idempotency hash (graphs stored before streaming intake). */
  keepNodes?: boolean;
}

/** A label and the taskId it was given, as a create or extend answers them. */
export interface LabelledTask {
  label: string;
  taskId: string;
}

/**
 * The nodes of one create or extend, taken one at a time as the body streams in (src/api/jsonObjectStream.ts):
 * each is validated and prepared as it arrives, and written in chunks of INTAKE_CHUNK by `flush`. What it keeps
 * for the whole graph is small: the new labels with their taskIds as bytes (src/scheduler/labelTable.ts; a label's
 * idx is startIdx + its index there), the requires edges as Int32 pairs, and a 32-byte digest per node for the
 * idempotency hash. Labels may be named (requires, `$subs`) before they are defined; every name gets its idx and
 * taskId at first mention, and `finish` refuses names never defined.
 */
export class GraphIntake {
  /** the labels this body names that the graph has not: defined by it, or only named so far */
  private readonly table = new LabelTable();
  /** 1 where the label was defined by this body, 2 where it exists in the graph already */
  private defined = new Uint8Array(1024);
  /** each node's canonical digest, by idx */
  private readonly digests = new ByteRecords(32);
  /** edges of a 300,000-task graph are 1.2 million pairs */
  private readonly requiresFrom = new Int32Blocks();
  private readonly requiresTo = new Int32Blocks();
  private readonly subsFrom = new Int32Blocks();
  private readonly subsTo = new Int32Blocks();
  private readonly errors: GraphErrors = new Map();
  private moreErrorLabels = 0;
  private pending: PendingNode[] = [];
  private readonly authorized = new Set<string>();
  /** distinct task `scopes` lists, with a few labels each, for the graph-scopes check at the end */
  private readonly taskScopes = new Map<string, { scopes: string[]; labels: string[] }>();
  /** cached nodes, written only once every key is known (finishCache) */
  private held: { node: HeldNode; pending: PendingNode }[] = [];
  /** each new node's deadline (ms), by idx - startIdx: a cached node's source must outlive its dependents' */
  private deadlines = new Float64Array(1024);
  private cacheRows: CacheRow[] = [];
  private routing: string | undefined;
  /** nodes prepared before `routing` was known, with the default (empty) graph routing */
  private assumedRouting = false;
  private nodeCount = 0;
  readonly keptNodes: Record<string, unknown> | undefined;

  constructor(private readonly options: IntakeOptions) {
    this.routing = options.routing;
    this.keptNodes = options.keepNodes ? Object.create(null) : undefined;
    for (const node of options.existing?.values() ?? []) this.setDefined(node.idx, 2);
  }

  get hasErrors(): boolean {
    return this.errors.size > 0;
  }

  get count(): number {
    return this.nodeCount;
  }

  /** The graph routing the nodes are prepared with; set once the body's `routing` has been read. */
  setRouting(routing: string): void {
    this.routing = routing;
  }

  /** Whether nodes were already written with the empty routing while the body's `routing` came after them. */
  get routingAssumed(): boolean {
    return this.assumedRouting;
  }

  private setDefined(idx: number, value: number) {
    while (idx >= this.defined.length) {
      const next = new Uint8Array(this.defined.length * 2);
      next.set(this.defined);
      this.defined = next;
    }
    this.defined[idx] = value;
  }

  private fail(label: string, message: string) {
    const list = this.errors.get(label);
    if (list) list.push(message);
    else if (this.errors.size < MAX_REPORTED_LABELS) this.errors.set(label, [message]);
    else this.moreErrorLabels++;
  }

  /** The idx of a label, given one at its first mention. */
  private slot(label: string): number {
    const known = this.options.existing?.get(label);
    if (known) return known.idx;
    const index = this.table.indexOf(label);
    return this.options.startIdx + (index >= 0 ? index : this.table.add(label));
  }

  /** The taskId of a label, given a fresh one at its first mention. */
  private taskIdOf(label: string, fresh: () => string): string {
    return this.options.existing?.get(label)?.taskId ?? this.newTaskIdAt(this.slot(label), fresh);
  }

  /** The taskId of a new node (idx ≥ startIdx), given a fresh one when it has none yet. */
  private newTaskIdAt(idx: number, fresh: () => string): string {
    const index = idx - this.options.startIdx;
    let taskId = this.table.taskId(index);
    if (taskId === '') {
      taskId = fresh();
      this.table.setTaskId(index, taskId);
    }
    return taskId;
  }

  /** The label of a new node (idx ≥ startIdx). */
  private labelAt(idx: number): string {
    return this.table.label(idx - this.options.startIdx);
  }

  /**
   * One node of the body's `tasks`: validated, prepared and queued for the next flush. Problems are recorded by
   * label (every label's, not just the first); a scope the caller lacks throws at once.
   */
  add(label: string, value: unknown, newTaskId: () => string): void {
    if (!LABEL.test(label)) {
      this.fail(label.slice(0, 300), `label must match ${LABEL_PATTERN}`);
      return;
    }
    if (this.options.existing?.has(label)) {
      this.fail(label, 'label already exists in this task-graph');
      return;
    }
    const named = this.table.indexOf(label);
    if (named >= 0 && this.defined[this.options.startIdx + named] === 1) {
      this.fail(label, 'label appears twice in tasks');
      return;
    }
    this.nodeCount++;
    refuseOverNodeLimit(this.options.config, this.options.taskGraphId, this.options.startIdx, this.nodeCount);
    const idx = this.options.startIdx + (named >= 0 ? named : this.table.add(label));
    this.setDefined(idx, 1);
    const problems = jsonProblems(value, `tasks.${label}`);
    const validate = compile(graphNodeSchema);
    if (problems.length > 0 || !validate(value)) {
      (problems.length > 0 ? problems : describeErrors(validate.errors, `tasks.${label}`).split('\n')).forEach((m) => this.fail(label, m));
      return;
    }
    const node = value as GraphNodeInput;
    // the schema's uniqueItems too, checked here: ajv's misses a repeated "__proto__" (found by the graph fuzzer)
    if (new Set(node.requires).size !== node.requires.length) {
      this.fail(label, 'requires names a label more than once');
      return;
    }
    if (this.keptNodes) this.keptNodes[label] = node;
    const digests = nodeDigests(node);
    digests.digest.copy(this.digests.block(idx), this.digests.offset(idx));
    const taskIdOf = (name: string) => this.taskIdOf(name, newTaskId);
    const requires: number[] = [];
    for (const r of node.requires) {
      if (r === label) {
        this.fail(label, 'requires itself');
        continue;
      }
      const to = this.slot(r);
      this.requiresFrom.push(idx);
      this.requiresTo.push(to);
      requires.push(to);
    }
    if (this.routing === undefined) this.assumedRouting = true;
    const taskId = this.newTaskIdAt(idx, newTaskId);
    const prepared = prepareNode({
      config: this.options.config,
      taskGraphId: this.options.taskGraphId,
      graphRouting: this.routing ?? '',
      label,
      node,
      taskId,
      taskIdOf,
      onSubs: (name) => {
        this.subsFrom.push(idx);
        this.subsTo.push(this.slot(name));
      },
      now: this.options.now,
    });
    if ('errors' in prepared) {
      prepared.errors.forEach((m) => this.fail(label, m));
      return;
    }
    const { definition } = prepared;
    this.setDeadline(idx, Date.parse(definition.deadline));
    const scopesKey = JSON.stringify(definition.scopes ?? []);
    const scopesSeen = this.taskScopes.get(scopesKey);
    if (!scopesSeen) this.taskScopes.set(scopesKey, { scopes: definition.scopes ?? [], labels: [label] });
    else if (scopesSeen.labels.length < 50) scopesSeen.labels.push(label);
    const key = JSON.stringify([definition.scopes, definition.routes, definition.schedulerId, definition.priority, definition.provisionerId, definition.workerType]);
    if (!this.authorized.has(key)) {
      this.options.authorize?.(createTaskScopes(definition));
      this.authorized.add(key);
    }
    const spec = node.cache ? cacheSpec(node.cache, this.options.config.cacheTiers) : undefined;
    if (spec && 'errors' in spec) spec.errors.forEach((m) => this.fail(label, m));
    if (this.errors.size > 0) {
      // nothing more will be written: only the problems are still of interest
      this.pending = [];
      this.held = [];
      return;
    }
    const pending: PendingNode = { label, idx, taskId, requires, reruns: node.reruns, definition, digest: digests.digest.toString('hex'), workDigest: digests.workDigest.toString('hex'), source: node };
    if (spec && !('errors' in spec)) {
      const taskQueueId = `${definition.provisionerId}/${definition.workerType}`;
      this.held.push({ node: { idx, label, spec, rawPayload: node.task.payload, requires, taskQueueId, scopes: definition.scopes }, pending });
      return;
    }
    this.pending.push(pending);
  }

  private setDeadline(idx: number, ms: number) {
    const at = idx - this.options.startIdx;
    while (at >= this.deadlines.length) {
      const next = new Float64Array(this.deadlines.length * 2);
      next.set(this.deadlines);
      this.deadlines = next;
    }
    this.deadlines[at] = ms;
  }

  /**
   * After `finish`: the keys of the cached nodes (src/taskCache/graphKeys.ts), each one's route
   * `index.tgs.cache.<tier>.<name>.<key>` (authorized like any route: the submitter needs its
   * `queue:route:` scope), and their rows; they join the nodes the next flush writes. An extend's new nodes that
   * require existing cached nodes move those nodes' `needed_until` up to their deadlines. Throws one 400 naming
   * every offending label.
   */
  async finishCache(client: pg.PoolClient, graphMode: CacheMode): Promise<void> {
    const start = this.options.startIdx;
    const existingTaskIds = new Map<number, string>();
    const existingRequired = new Set<number>();
    for (let i = 0; i < this.requiresFrom.length; i++) if (this.requiresTo.at(i) < start) existingRequired.add(this.requiresTo.at(i));
    for (const { node } of this.held) {
      substitute(node.rawPayload, (label) => {
        const idx = this.slot(label);
        if (idx < start) existingRequired.add(idx);
        return '';
      }, []);
    }
    if (existingRequired.size > 0 && this.options.existing) {
      for (const { taskId, idx } of this.options.existing.values()) if (existingRequired.has(idx)) existingTaskIds.set(idx, taskId);
    }
    const existingKeys = await cacheKeysOf(client, [...existingTaskIds.values()]);
    // a graph without cached nodes, and an extend requiring none, walk no edges (the 100k graph has 396,000)
    if (this.held.length === 0 && existingKeys.size === 0) return;
    const heldIdx = new Set(this.held.map((h) => h.node.idx));
    // the latest deadline of each cached node's dependents (new nodes only: existing ones cannot require new ones)
    const neededUntil = new Map<number, number>();
    const existingNeeded = new Map<string, number>();
    for (let i = 0; i < this.requiresFrom.length; i++) {
      const from = this.requiresFrom.at(i);
      const to = this.requiresTo.at(i);
      const deadline = this.deadlines[from - start];
      if (to >= start) {
        if (heldIdx.has(to)) neededUntil.set(to, Math.max(neededUntil.get(to) ?? 0, deadline));
      } else {
        const taskId = existingTaskIds.get(to);
        if (taskId !== undefined && existingKeys.has(taskId)) existingNeeded.set(taskId, Math.max(existingNeeded.get(taskId) ?? 0, deadline));
      }
    }
    await extendNeededUntil(client, [...existingNeeded].map(([taskId, ms]) => ({ taskId, until: new Date(ms).toISOString() })));
    if (this.held.length === 0) return;
    const { keys, errors } = computeNodeKeys(
      this.held.map((h) => h.node),
      {
        labelAt: (idx) => (idx >= start ? this.labelAt(idx) : ([...(this.options.existing ?? new Map()).entries()].find(([, v]) => v.idx === idx)?.[0] ?? String(idx))),
        slot: (label) => this.slot(label),
        existingKey: (idx) => {
          const taskId = existingTaskIds.get(idx);
          return taskId === undefined ? undefined : existingKeys.get(taskId);
        },
        substitute: (payload, replace) => substitute(payload, replace, []),
      },
    );
    for (const [label, message] of errors) this.fail(label, message);
    for (const { node, pending } of this.held) {
      const computed = keys.get(node.idx);
      if (!computed) continue;
      const mode = effectiveMode(node.spec.mode, graphMode);
      const definition = pending.definition;
      if (mode !== 'off') {
        if (definition.routes.length >= 64) {
          this.fail(node.label, 'is cached, which adds a route, and already has 64 routes (the most a task may have)');
          continue;
        }
        definition.routes = [...definition.routes, `index.${cachePath(node.spec.tier, node.spec.name, computed.key)}`];
        this.options.authorize?.(createTaskScopes(definition));
      }
      this.cacheRows.push({
        taskId: pending.taskId,
        taskGraphId: this.options.taskGraphId,
        label: node.label,
        name: node.spec.name,
        tier: node.spec.tier,
        key: computed.key,
        inputs: computed.inputs,
        mode,
        maxAgeS: node.spec.maxAgeS,
        neededUntil: new Date(Math.max(this.deadlines[node.idx - start], neededUntil.get(node.idx) ?? 0)).toISOString(),
      });
      this.pending.push(pending);
    }
    this.held = [];
    if (this.errors.size > 0) {
      this.pending = [];
      this.cacheRows = [];
      this.throwErrors();
    }
  }

  /** Whether enough nodes wait for a write. */
  get chunkReady(): boolean {
    return this.pending.length >= INTAKE_CHUNK;
  }

  /** Forgets the nodes prepared so far (a body only compared with a stored graph is never written). */
  dropPending(): void {
    this.pending = [];
  }

  /** Writes the nodes prepared so far (graph_nodes rows and their tasks), unless problems were found. */
  async flush(client: pg.PoolClient): Promise<void> {
    if (this.errors.size > 0 || this.pending.length === 0) return;
    const chunk = this.pending;
    this.pending = [];
    const nodes = chunk.map((n) => ({ idx: n.idx, taskId: n.taskId, label: n.label, requires: n.requires, requiresMode: n.definition.requires === 'all-resolved' ? 1 : 0, reruns: n.reruns, digest: n.digest, workDigest: n.workDigest, source: n.source }));
    // the taskIds are this intake's own fresh slugids: nothing to compare with, no status to answer. The nodes go
    // in the tasks' statement: one round trip a chunk.
    await insertNewTasks(client, chunk.map((n) => ({ taskId: n.taskId, definition: n.definition })), {
      scheduleIndependent: false,
      dependenciesKnown: true,
      now: new Date(),
      alongside: (first) => memberNodesInsert(this.options.taskGraphId, nodes, first),
    });
    // The chunk's task-defined messages, while the next chunk is read: written after the last one, they were 50-65 ms
    // of a 10,000-task submit's end that nothing overlapped. The relay renders each from its row when it publishes
    // (after the commit, with the graph's routing however late the body gave it), so nothing of the row is copied now.
    await announceDefined(client, chunk.map((n) => n.taskId));
    if (this.cacheRows.length > 0) {
      await insertCacheRows(client, this.cacheRows);
      this.cacheRows = [];
    }
  }

  /**
   * After the last node: names never defined, cycles, the graph's declared scopes. Throws one 400 naming every
   * offending label (the first MAX_REPORTED_LABELS), or 403 for a missing scope.
   */
  finish(graphScopes: string[]): void {
    if (this.nodeCount === 0 && this.errors.size === 0) throw new TgsError('InputValidationError', 'Input does not match the schema:\nbody.tasks must NOT have fewer than 1 properties');
    const undefinedName = (idx: number) => this.defined[idx] === 0;
    for (let i = 0; i < this.requiresFrom.length; i++) {
      const to = this.requiresTo.at(i);
      if (undefinedName(to)) this.fail(this.labelAt(this.requiresFrom.at(i)), `requires unknown label ${JSON.stringify(this.labelAt(to))}`);
    }
    for (let i = 0; i < this.subsFrom.length; i++) {
      const to = this.subsTo.at(i);
      if (undefinedName(to)) this.fail(this.labelAt(this.subsFrom.at(i)), `$subs names unknown label ${JSON.stringify(this.labelAt(to))}`);
    }
    for (const idx of this.cycleMembers()) this.fail(this.labelAt(idx), 'is on a dependency cycle');
    if (this.errors.size > 0) this.throwErrors();
    if (graphScopes.length > 0) {
      // A graph that declares its scopes may only hold tasks whose scopes those cover (Taskcluster's rule).
      const over = [...this.taskScopes.values()].filter((t) => t.scopes.some((s) => !scopeSatisfied(graphScopes, s)));
      if (over.length > 0) {
        throw new TgsError('InputValidationError', `tasks use scopes the graph does not declare: ${over.flatMap((t) => t.labels).join(', ')}`);
      }
    }
  }

  private throwErrors(): never {
    const labels = [...this.errors.keys()].sort();
    const more = this.moreErrorLabels > 0 ? ` (and ${this.moreErrorLabels} more labels not listed)` : '';
    throw new TgsError('InputValidationError', `${describeGraphErrors(this.errors)}${more}`, { labels });
  }

  /** New nodes on a requires cycle (Kahn's algorithm over the Int32 edge lists: what never reaches in-degree 0). */
  private cycleMembers(): number[] {
    const start = this.options.startIdx;
    const size = this.table.size;
    const indegree = new Int32Array(size);
    const outCount = new Int32Array(size + 1);
    let edges = 0;
    for (let i = 0; i < this.requiresFrom.length; i++) {
      const to = this.requiresTo.at(i);
      if (to < start) continue;
      indegree[this.requiresFrom.at(i) - start]++;
      outCount[to - start + 1]++;
      edges++;
    }
    if (edges === 0) return [];
    for (let k = 0; k < size; k++) outCount[k + 1] += outCount[k];
    const dependents = new Int32Array(edges);
    const fill = outCount.slice(0, size);
    for (let i = 0; i < this.requiresFrom.length; i++) {
      const to = this.requiresTo.at(i);
      if (to < start) continue;
      dependents[fill[to - start]++] = this.requiresFrom.at(i) - start;
    }
    const queue: number[] = [];
    for (let k = 0; k < size; k++) if (indegree[k] === 0) queue.push(k);
    while (queue.length > 0) {
      const k = queue.pop() as number;
      for (let e = outCount[k]; e < outCount[k + 1]; e++) {
        const d = dependents[e];
        if (--indegree[d] === 0) queue.push(d);
      }
    }
    const out: number[] = [];
    for (let k = 0; k < size; k++) if (indegree[k] > 0 && this.defined[k + start] === 1) out.push(k + start);
    return out;
  }

  /**
   * The idempotency hash (version 2): sha256 of the canonical envelope, then each label in sorted order with its
   * node's canonical digest. Independent of the order of members in the body, like the whole-graph hash it replaces.
   */
  graphHash(envelope: Record<string, unknown>): string {
    const hash = createHash('sha256');
    hash.update(canonicalDigest(envelope));
    // after `finish` every label named was defined: the new nodes are table indexes 0 .. nodeCount-1
    const order = new Int32Array(this.nodeCount);
    for (let i = 0; i < order.length; i++) order[i] = i;
    order.sort((a, b) => this.table.compare(a, b));
    const start = this.options.startIdx;
    for (const index of order) {
      hash.update(`${JSON.stringify(this.table.label(index))}:`);
      const at = this.digests.offset(start + index);
      hash.update(this.digests.block(start + index).subarray(at, at + 32));
    }
    return `v2:${hash.digest('hex')}`;
  }

  /**
   * The new nodes' labels and taskIds by idx, `size` at a time: the order in which the body first named each label
   * (by defining it, requiring it or naming it in `$subs`), which is the order a later read of the graph gives too.
   * Made as they are asked for, from the table: a 300,000-task answer is never held as objects.
   */
  *created(size = 1000): Generator<LabelledTask[]> {
    for (let from = 0; from < this.nodeCount; from += size) {
      const page: LabelledTask[] = [];
      for (let i = from; i < Math.min(from + size, this.nodeCount); i++) page.push({ label: this.table.label(i), taskId: this.table.taskId(i) });
      yield page;
    }
  }
}

/** While a chunk is being written, the longest the reading of the next one keeps the event loop (see readGraphBody). */
const YIELD_EVERY_MS = 4;

/**
 * Reads a graph body's members into the intake: each node of `tasks` is added as it arrives and `writeChunk`
 * runs whenever a chunk is ready; every other member is returned (the envelope), in a null-prototype record.
 * `checkEnvelope` sees the envelope each time a member joins it, so a bad one sent before the tasks is refused
 * before any is written. A member given twice, or `tasks` that is not an object, is refused.
 *
 * One chunk's write runs while the next chunk is read and prepared (at most one in flight: the writes share the
 * transaction's client): the API's CPU and Postgres' overlap instead of taking turns. Whatever ends the read, it
 * returns or throws only once the write in flight has ended, so a ROLLBACK never runs between a chunk's
 * statements.
 */
export async function readGraphBody(
  members: AsyncIterable<StreamedMember> | Iterable<StreamedMember>,
  intake: GraphIntake,
  newTaskId: () => string,
  writeChunk: () => Promise<void>,
  checkEnvelope: (envelope: Record<string, unknown>) => void,
): Promise<{ envelope: Record<string, unknown>; tasksSeen: boolean }> {
  const envelope: Record<string, unknown> = Object.create(null);
  let tasksSeen = false;
  let writing: Promise<void> | undefined;
  let inFlight = false;
  let turnStarted = performance.now();
  try {
    for await (const member of members) {
      readMember(member);
      if (intake.chunkReady) {
        await writing;
        inFlight = true;
        turnStarted = performance.now();
        writing = writeChunk().finally(() => {
          inFlight = false;
        });
        // awaited before the next chunk or at the end; until then its failure must not count as unhandled
        writing.catch(() => undefined);
      } else if (inFlight && performance.now() - turnStarted > YIELD_EVERY_MS) {
        // A body already received is read in microtasks, which never let the event loop write: the statement in
        // flight would reach Postgres only as far as the socket's buffer holds (208 KB on a Unix socket) until the
        // next chunk is ready, and Postgres would wait for the rest instead of writing the chunk meanwhile.
        await new Promise((resolve) => setImmediate(resolve));
        turnStarted = performance.now();
      }
    }
    await writing;
  } catch (err) {
    await writing?.catch(() => undefined);
    throw err;
  }
  return { envelope, tasksSeen };

  function readMember(member: StreamedMember) {
    if ('parent' in member && member.parent !== undefined) {
      intake.add(member.key, member.value, newTaskId);
    } else if ('expanded' in member) {
      if (tasksSeen) throw new TgsError('InputError', 'body has `tasks` twice');
      tasksSeen = true;
    } else if (member.key === 'tasks') {
      throw new TgsError('InputValidationError', 'Input does not match the schema:\nbody.tasks must be object');
    } else {
      if (Object.hasOwn(envelope, member.key)) throw new TgsError('InputError', `body has ${JSON.stringify(member.key.slice(0, 100))} twice`);
      envelope[member.key] = member.value;
      checkEnvelope(envelope);
      // an invalid routing is reported with the envelope's other problems; the nodes meanwhile use none
      if (member.key === 'routing') intake.setRouting(typeof member.value === 'string' && GRAPH_ROUTING.test(member.value) ? member.value : '');
    }
  }
}
