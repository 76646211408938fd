import slugid from 'slugid';
import type { TaskExplanation } from '../queue/explainTask.js';
import type { GraphExplanation } from '../scheduler/explainGraph.js';
import { ApiClient, TgsApiError, type TgsCredentials } from './http.js';
import { resolveCredentials } from './credentials.js';
import { WorkerStream, type WorkerStreamOptions } from './workerStream.js';

export { TgsApiError, type TgsCredentials };
export { WorkerStream, type WorkerStreamOptions, type StreamClaim } from './workerStream.js';

import type { TaskStatus } from '../queue/taskRow.js';
import type { Resolution, ResolutionResult } from '../queue/resolveTask.js';
import type { TaskState } from '../taskStates.js';
import type { AmendGraphResult, GraphState, RerunAccepted, RerunRequest } from '../workflows/contract.js';

/** Taskcluster's task status structure and its runs (index = runId). */
export type { TaskStatus, Run as TaskRun } from '../queue/taskRow.js';
export type { TaskState } from '../taskStates.js';
export type { GraphState } from '../workflows/contract.js';
export type { Resolution, ResolutionResult } from '../queue/resolveTask.js';

/** One node of a task-graph (docs/formats.md): the task definition, the labels it requires, its reruns. */
export interface TaskGraphNode {
  requires?: string[];
  reruns?: number;
  /** a queue task definition; `{"$subs": "taskId:<label>"}` anywhere in it becomes that label's taskId */
  task: Record<string, unknown>;
  /** reuse an identical completed task instead of running (docs/formats.md § Cached tasks) */
  cache?: { name: string; tier?: string; digestData?: unknown; maxAge?: number | string; mode?: 'use' | 'refresh' | 'off' };
}

/** A graph's current file (`GET /task-graph/<taskGraphId>/file`, docs/formats.md § The graph's current file). */
export interface GraphFile {
  taskGraphId: string;
  tasks: Record<string, TaskGraphNode>;
  /** labels of members stored before tgs kept their nodes (migration 041): amend with your own file for those */
  missing: string[];
}

/** A task-graph as `PUT /task-graph/<taskGraphId>` takes it (docs/formats.md § Task-graph format). */
/** The answer of an amend (docs/api.md, amendTaskGraph). */
/** An amend's answer (docs/formats.md § Amend): what the `amendGraph` update answers, less its node counts, and what the workflow did. */
export interface AmendedGraph extends Omit<AmendGraphResult, 'superseded' | 'nodeCount'> {
  taskGraphId: string;
  /** `updated` (the running workflow heard it), `started` (a finished graph runs again), `unchanged`, `not-running` (resume the graph), `dry-run` */
  workflow: 'updated' | 'started' | 'unchanged' | 'not-running' | 'dry-run';
}

export interface TaskGraph {
  routing?: string;
  tasks: Record<string, TaskGraphNode>;
  scopes?: string[];
  metadata?: { name?: string; description?: string; owner?: string; source?: string };
  tags?: Record<string, string>;
  /** every cached node's mode at most this (docs/formats.md § Cached tasks) */
  cacheMode?: 'use' | 'refresh' | 'off';
}

/** The task-graph status structure (docs/formats.md). */
export interface GraphStatus {
  schedulerId: string;
  taskGraphId: string;
  state: GraphState;
  routing: string;
}

export interface SubmittedGraph {
  taskGraphId: string;
  status: GraphStatus;
  /** label → taskId of the tasks created (all of them for submit, the new ones for extend) */
  tasks: { label: string; taskId: string }[];
}

/** `GET .../info`: the status with task counts by queue state and the blocking tasks. */
export interface GraphInfo {
  status: GraphStatus;
  origin: 'graph' | 'queue';
  metadata: Record<string, string>;
  tags: Record<string, string>;
  scopes: string[];
  taskCount: number;
  counts: Partial<Record<TaskState, number>>;
  /** taskIds of the failed tasks that block the graph */
  blockedBy: string[];
  /** who ended the graph and why (canceled, terminated) */
  stateReason?: string;
  created: string;
  updated: string;
  workflowId: string;
}

/** One task of a graph, as `inspect` shows it. */
export interface GraphTask {
  label: string;
  taskId: string;
  requires: string[];
  /** at most 10,000: a task with more also gives `dependentCount` */
  dependents: string[];
  dependentCount?: number;
  reruns: number;
  rerunsLeft: number;
  state: TaskState | 'missing';
  /** what the graph's last amend did to the task (docs/formats.md § Amend) */
  amended?: 'changed' | 'added' | 'dependent' | 'metadata';
  /** the task it replaced */
  replaces?: string;
  /** a dependent's early cutoff: "kept: build's outputs unchanged", "rerun: …", or what it waits for */
  cutoff?: string;
}

export interface ArtifactInfo {
  storageType: 's3' | 'reference' | 'error';
  name: string;
  expires: string;
  contentType: string;
}

export interface ArtifactContent {
  data: Buffer;
  contentType: string;
  /** where the bytes came from (a signed URL, or a reference artifact's URL) */
  url: string;
}

export interface WaitOptions {
  /** called after every poll with the graph's info */
  onProgress?: (info: GraphInfo) => void | Promise<void>;
  /** stops waiting (rejects with the signal's reason) */
  signal?: AbortSignal;
  /** the longest pause between polls; polling starts at 100 ms and backs off to this (at most 1000 ms) */
  maxIntervalMs?: number;
}

/**
 * waitForGraph's rejection when the graph is blocked, canceled or terminated (its workflow closed early): the state, the graph's info and the
 * tasks that block it (failed or exception, with their labels).
 */
export class GraphNotFinishedError extends Error {
  constructor(
    readonly taskGraphId: string,
    readonly state: 'blocked' | 'canceled' | 'terminated',
    readonly info: GraphInfo,
    readonly blocking: GraphTask[],
  ) {
    const names = blocking.map((t) => `${t.label} (${t.taskId}, ${t.state})`).join(', ');
    super(
      state === 'blocked'
        ? `task-graph ${taskGraphId} is blocked by ${names || 'a failed task'}`
        : state === 'terminated'
          ? `task-graph ${taskGraphId} is terminated (its workflow ended before it did${info.stateReason ? `: ${info.stateReason}` : ''}); resume it with tgs graph resume ${taskGraphId}`
          : `task-graph ${taskGraphId} was canceled`,
    );
    this.name = 'GraphNotFinishedError';
  }
}

const enc = encodeURIComponent;

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
const artifactPath = (name: string) => name.split('/').map(enc).join('/');

/**
 * A typed client for tgs's scheduler and queue APIs over HTTP, with Hawk credentials (permanent or temporary).
 *
 *     const tgs = new TgsClient({ rootUrl: 'http://127.0.0.1:8080', credentials: { clientId, accessToken } });
 *     const { taskGraphId } = await tgs.submitGraph(graph);
 *     await tgs.waitForGraph(taskGraphId); // rejects with GraphNotFinishedError when it blocks
 */
export class TgsClient {
  readonly rootUrl: string;
  readonly credentials?: TgsCredentials;
  /** The signed requests underneath, for what this class has no method for (the auth service's clients). */
  readonly api: ApiClient;

  constructor(options: { rootUrl: string; credentials?: TgsCredentials }) {
    this.rootUrl = options.rootUrl.replace(/\/+$/, '');
    this.credentials = options.credentials;
    this.api = new ApiClient(this.rootUrl, this.credentials);
  }

  /** From TGS_ROOT_URL / TGS_CLIENT_ID / TGS_ACCESS_TOKEN (or the TASKCLUSTER_ ones), as the CLI does. */
  static fromEnvironment(env: NodeJS.ProcessEnv = process.env): TgsClient {
    const resolved = resolveCredentials(env);
    return new TgsClient({ rootUrl: resolved.rootUrl, credentials: resolved.credentials });
  }

  private scheduler<T>(method: string, path: string, body?: unknown): Promise<T> {
    return this.api.request<T>('scheduler', method, path, body);
  }

  private queue<T>(method: string, path: string, body?: unknown): Promise<T> {
    return this.api.request<T>('queue', method, path, body);
  }

  /** Where the web UI shows the graph. */
  graphUrl(taskGraphId: string): string {
    return `${this.rootUrl}/ui/task-graph/${taskGraphId}`;
  }

  /** Creates the graph (a new slugid unless `taskGraphId` is given; the same graph again is idempotent). */
  async submitGraph(graph: TaskGraph, options: { taskGraphId?: string } = {}): Promise<SubmittedGraph> {
    const taskGraphId = options.taskGraphId ?? slugid.nice();
    // `tasks` last: the API then writes each node with the routing it already read (one after them costs an
    // UPDATE of every task)
    const { tasks, ...envelope } = graph;
    const answer = await this.scheduler<Omit<SubmittedGraph, 'taskGraphId'>>('PUT', `/task-graph/${enc(taskGraphId)}`, { ...envelope, tasks });
    return { taskGraphId, ...answer };
  }

  /** Adds tasks to a running or blocked graph; they may require existing labels. */
  async extendGraph(taskGraphId: string, extension: { tasks: Record<string, TaskGraphNode> }): Promise<SubmittedGraph> {
    const answer = await this.scheduler<Omit<SubmittedGraph, 'taskGraphId'>>('POST', `/task-graph/${enc(taskGraphId)}/extend`, extension);
    return { taskGraphId, ...answer };
  }

  /**
   * Amends the graph with its whole edited file (docs/formats.md § Amend): changed labels and their dependents get new
   * tasks, metadata-only ones are patched, removed ones canceled. `dryRun` classifies without changing anything.
   */
  amendGraph(taskGraphId: string, graph: { tasks: Record<string, TaskGraphNode> }, options: { dryRun?: boolean } = {}): Promise<AmendedGraph> {
    return this.scheduler<AmendedGraph>('PUT', `/task-graph/${enc(taskGraphId)}/amend${options.dryRun ? '?dryRun=true' : ''}`, graph);
  }

  /**
   * The graph's current file (docs/formats.md § The graph's current file): every member's node by label as it was submitted or last
   * amended, to edit and give to `amendGraph`; `missing` names members stored before tgs kept their nodes.
   */
  graphFile(taskGraphId: string): Promise<GraphFile> {
    return this.scheduler<GraphFile>('GET', `/task-graph/${enc(taskGraphId)}/file`);
  }

  async graphStatus(taskGraphId: string): Promise<GraphStatus> {
    return (await this.scheduler<{ status: GraphStatus }>('GET', `/task-graph/${enc(taskGraphId)}/status`)).status;
  }

  /** Why the graph has not finished: its root causes, the ones explaining most tasks first (docs/formats.md § Explanations). */
  explainGraph(taskGraphId: string, limit?: number): Promise<GraphExplanation> {
    return this.scheduler<GraphExplanation>('GET', `/task-graph/${enc(taskGraphId)}/explain${limit ? `?limit=${limit}` : ''}`);
  }

  /** Status plus counts by task state, blocking tasks, metadata. */
  graphInfo(taskGraphId: string): Promise<GraphInfo> {
    return this.scheduler<GraphInfo>('GET', `/task-graph/${enc(taskGraphId)}/info`);
  }

  /** Every task of the graph (all pages), or one task by taskId or label. */
  async inspect(taskGraphId: string): Promise<GraphTask[]>;
  async inspect(taskGraphId: string, taskIdOrLabel: string): Promise<GraphTask>;
  async inspect(taskGraphId: string, taskIdOrLabel?: string): Promise<GraphTask[] | GraphTask> {
    if (taskIdOrLabel !== undefined) return this.scheduler<GraphTask>('GET', `/task-graph/${enc(taskGraphId)}/inspect/${enc(taskIdOrLabel)}`);
    const tasks: GraphTask[] = [];
    let token: string | undefined;
    do {
      const page = await this.scheduler<{ tasks: GraphTask[]; continuationToken?: string }>(
        'GET',
        `/task-graph/${enc(taskGraphId)}/inspect?limit=10000${token ? `&continuationToken=${enc(token)}` : ''}`,
      );
      tasks.push(...page.tasks);
      token = page.continuationToken;
    } while (token);
    return tasks;
  }

  /**
   * Polls the graph (100 ms, backing off to at most 1 s) until it is finished (resolves with its info), or
   * blocked / canceled (rejects with GraphNotFinishedError naming the blocking tasks).
   */
  async waitForGraph(taskGraphId: string, options: WaitOptions = {}): Promise<GraphInfo> {
    const maxInterval = Math.min(Math.max(options.maxIntervalMs ?? 1000, 50), 1000);
    let interval = 100;
    for (;;) {
      options.signal?.throwIfAborted();
      const info = await this.graphInfo(taskGraphId);
      await options.onProgress?.(info);
      const state = info.status.state;
      if (state === 'finished') return info;
      if (state === 'blocked' || state === 'canceled' || state === 'terminated') {
        throw new GraphNotFinishedError(taskGraphId, state, info, await this.blockingTasks(taskGraphId, info));
      }
      await sleep(interval, options.signal);
      interval = Math.min(maxInterval, Math.round(interval * 1.5));
    }
  }

  /** The failed / exception tasks of the graph (the first 20), with labels. */
  async blockingTasks(taskGraphId: string, info?: GraphInfo): Promise<GraphTask[]> {
    const ids = (info ?? (await this.graphInfo(taskGraphId))).blockedBy.slice(0, 20);
    return Promise.all(ids.map((id) => this.inspect(taskGraphId, id)));
  }

  /**
   * Reruns a resolved task of the graph (by taskId or label) through the workflow; answers at once whether it
   * was accepted (a refusal is a 409 TgsApiError). `resetDependents` also reruns its resolved dependents.
   */
  rerun(taskGraphId: string, taskIdOrLabel: string, options: Pick<RerunRequest, 'resetDependents'> = {}): Promise<RerunAccepted & { accepted: true }> {
    return this.scheduler('POST', `/task-graph/${enc(taskGraphId)}/rerun/${enc(taskIdOrLabel)}`, { resetDependents: options.resetDependents ?? false });
  }

  /**
   * Starts the workflow of a graph whose workflow closed before the graph ended (terminated) again, from what the queue
   * and the graph's tables hold: completed tasks do not run again. 409 while its workflow runs, or once the graph ended.
   */
  async resume(taskGraphId: string): Promise<GraphStatus> {
    return (await this.scheduler<{ status: GraphStatus }>('POST', `/task-graph/${enc(taskGraphId)}/resume`)).status;
  }

  /** Cancels every unresolved task of the graph; the graph becomes canceled. */
  async cancel(taskGraphId: string): Promise<GraphStatus> {
    return (await this.scheduler<{ status: GraphStatus }>('POST', `/task-graph/${enc(taskGraphId)}/cancel`)).status;
  }

  async taskStatus(taskId: string): Promise<TaskStatus> {
    return (await this.queue<{ status: TaskStatus }>('GET', `/task/${enc(taskId)}/status`)).status;
  }

  /** Why the task is not running (yet): its blockers, each with the action that clears it (docs/formats.md § Explanations). */
  explainTask(taskId: string): Promise<TaskExplanation> {
    return this.queue<TaskExplanation>('GET', `/task/${enc(taskId)}/explain`);
  }

  /** The task definition. */
  task(taskId: string): Promise<Record<string, unknown>> {
    return this.queue('GET', `/task/${enc(taskId)}`);
  }

  /** Reruns a resolved task in the queue (a new run); for graph tasks prefer `rerun`, which the graph tracks. */
  async rerunTask(taskId: string): Promise<TaskStatus> {
    return (await this.queue<{ status: TaskStatus }>('POST', `/task/${enc(taskId)}/rerun`)).status;
  }

  async cancelTask(taskId: string): Promise<TaskStatus> {
    return (await this.queue<{ status: TaskStatus }>('POST', `/task/${enc(taskId)}/cancel`)).status;
  }

  /**
   * Resolves up to 100 runs in one request (tgs's reportResolutions, `POST /task-resolutions`), each as
   * reportCompleted / reportFailed / reportException would: one answer per item, in order, its task status or
   * the error the single report would answer (`{code, message}`: ResourceNotFound, RequestConflict). Needs
   * `queue:resolve-task:<taskId>/<runId>` for every item, else the whole call is refused (403). A server
   * without the endpoint answers 404: report each run with the single calls then.
   */
  async reportResolutions(resolutions: Resolution[]): Promise<ResolutionResult[]> {
    return (await this.queue<{ resolutions: ResolutionResult[] }>('POST', '/task-resolutions', { resolutions })).resolutions;
  }

  /**
   * Opens the worker stream of one worker (tgs's workerStream, docs/api.md § The worker stream): the API pushes the
   * runs it claims for the worker to `onClaim` while the worker has capacity (`capacity`, then one more for each
   * `release()`), and `resolve` reports runs, those of one tick in one frame. `opened` rejects with a TgsApiError
   * when the API refuses (404: a server without it, claim with `claimWork`). Needs
   * `queue:claim-work:<provisionerId>/<workerType>` and `queue:worker-id:<workerGroup>/<workerId>`.
   */
  workerStream(options: Omit<WorkerStreamOptions, 'rootUrl' | 'credentials'>): WorkerStream {
    return new WorkerStream({ ...options, rootUrl: this.rootUrl, credentials: this.credentials });
  }

  /** The artifacts of a run (the latest unless `runId`), all pages. */
  async listArtifacts(taskId: string, options: { runId?: number } = {}): Promise<ArtifactInfo[]> {
    const base = options.runId === undefined ? `/task/${enc(taskId)}/artifacts` : `/task/${enc(taskId)}/runs/${options.runId}/artifacts`;
    const artifacts: ArtifactInfo[] = [];
    let token: string | undefined;
    do {
      const page = await this.queue<{ artifacts: ArtifactInfo[]; continuationToken?: string }>('GET', `${base}${token ? `?continuationToken=${enc(token)}` : ''}`);
      artifacts.push(...page.artifacts);
      token = page.continuationToken;
    } while (token);
    return artifacts;
  }

  /** The URL of an artifact (latest run unless `runId`); names under `public/` need no credentials to read. */
  artifactUrl(taskId: string, name: string, options: { runId?: number } = {}): string {
    const run = options.runId === undefined ? '' : `/runs/${options.runId}`;
    return `${this.rootUrl}/api/queue/v1/task/${enc(taskId)}${run}/artifacts/${artifactPath(name)}`;
  }

  /**
   * Where an artifact's bytes really are, without reading them (latest run unless `runId`): `s3` artifacts are stored in
   * tgs's own Postgres (Taskcluster's name for the kind is kept), their size from a HEAD of the
   * signed URL the queue gives (undefined while not uploaded); a `reference` is a URL elsewhere; an `error` holds only
   * its reason.
   */
  async whereArtifact(taskId: string, a: ArtifactInfo, options: { runId?: number } = {}): Promise<{ where: string; size?: number }> {
    if (a.storageType === 'error') return { where: 'error artifact (no bytes)' };
    const run = options.runId === undefined ? '' : `/runs/${options.runId}`;
    const target = await this.queue<{ storageType: string; url?: string }>('GET', `/task/${enc(taskId)}${run}/artifact-content/${artifactPath(a.name)}`);
    if (a.storageType === 'reference' || !target.url) return { where: `reference to ${target.url ?? '?'}` };
    const res = await fetch(target.url, { method: 'HEAD' }).catch(() => undefined);
    const length = res?.ok ? res.headers.get('content-length') : null;
    return { where: res?.status === 404 ? "tgs's Postgres (not uploaded yet)" : "tgs's Postgres", size: length === null ? undefined : Number(length) };
  }

  /**
   * An artifact's bytes (latest run unless `runId`). Not uploaded yet → TgsApiError 404; an error artifact →
   * TgsApiError 424 `ArtifactNotPresent` with its reason.
   */
  async artifact(taskId: string, name: string, options: { runId?: number } = {}): Promise<ArtifactContent> {
    const run = options.runId === undefined ? '' : `/runs/${options.runId}`;
    const where = await this.queue<{ storageType: string; url?: string; reason?: string; message?: string }>(
      'GET',
      `/task/${enc(taskId)}${run}/artifact-content/${artifactPath(name)}`,
    );
    if (where.storageType === 'error' || !where.url) {
      throw new TgsApiError(424, 'ArtifactNotPresent', `artifact ${name} of ${taskId} is an error artifact (${where.reason}): ${where.message}`, where);
    }
    let res: Response;
    try {
      res = await fetch(where.url);
    } catch (err) {
      throw new TgsApiError(0, 'ConnectionFailed', `cannot download ${where.url}: ${(err as Error).cause ?? (err as Error).message}`);
    }
    if (!res.ok) throw new TgsApiError(res.status, 'DownloadFailed', `downloading artifact ${name} of ${taskId}: ${res.status} ${(await res.text()).slice(0, 200)}`);
    return { data: Buffer.from(await res.arrayBuffer()), contentType: res.headers.get('content-type') ?? 'application/octet-stream', url: where.url };
  }
}
