import type http from 'node:http';
import { WebSocketServer } from 'ws';
import type { ApiDeps } from '../../api/deps.js';
import type { UpgradeRequest } from '../../api/endpoint.js';
import type { AuthContext } from '../../auth/authenticate.js';
import { OutageLog } from '../../outageLog.js';
import { workerStreamsOpen } from '../../observability/metrics.js';
import type { ClaimRequest } from '../claimWork.js';
import { MAX_FRAME_BYTES } from './frames.js';
import type { ResolvedRun } from '../notify.js';
import { WorkerStreamSession, type RunHolders } from './session.js';

type Log = ConstructorParameters<typeof WorkerStreamSession>[4];

/** How long a resolution no stream held is remembered, and how many at most. */
const RECENT_MS = 5000;
const RECENT_MAX = 20_000;

/** The API process's worker streams: opens them on an authorized upgrade, drains them all when the API stops. */
export class WorkerStreams {
  private readonly server = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false, clientTracking: false });
  private readonly sessions = new Set<WorkerStreamSession>();
  private readonly outage: OutageLog;
  /** the runs the streams hold, for the claim waiter's resolved-runs notifications */
  private readonly holders: RunHolders = new Map();
  private unlisten: (() => void) | undefined;
  /**
   * Resolutions no stream held, for RECENT_MS (at most RECENT_MAX): a run canceled between its claim's commit and the
   * stream holding it is told as the stream takes it.
   */
  private readonly recent = new Map<string, { run: ResolvedRun; at: number }>();
  /** true once the API began to stop: new streams are refused (503) */
  stopping = false;

  constructor(log: (line: string) => void) {
    this.outage = new OutageLog(log, 'worker streams: Postgres');
  }

  /** Takes an upgrade request's socket over as the stream of `claim`'s worker (its scopes checked by the route). */
  open(deps: ApiDeps, request: http.IncomingMessage, upgrade: UpgradeRequest, auth: AuthContext, claim: Omit<ClaimRequest, 'count'>, log: Log): void {
    this.unlisten ??= deps.claimWaiter.onRunsResolved((runs) => this.runsResolved(runs));
    this.server.handleUpgrade(request, upgrade.socket, upgrade.head, (ws) => {
      const session = new WorkerStreamSession(ws, deps, auth, claim, log, this.outage, this.holders, (key) => this.recent.get(key)?.run);
      this.sessions.add(session);
      workerStreamsOpen.inc();
      void session.done.then(() => {
        this.sessions.delete(session);
        workerStreamsOpen.dec();
      });
    });
  }

  /** Runs someone other than their worker resolved: each stream holding some is told, in one frame. */
  private runsResolved(runs: ResolvedRun[]): void {
    const bySession = new Map<WorkerStreamSession, ResolvedRun[]>();
    const now = Date.now();
    for (const r of runs) {
      const key = `${r.taskId}/${r.runId}`;
      const session = this.holders.get(key);
      if (!session) {
        this.recent.delete(key);
        this.recent.set(key, { run: r, at: now });
        continue;
      }
      const list = bySession.get(session);
      if (list) list.push(r);
      else bySession.set(session, [r]);
    }
    for (const [session, taken] of bySession) session.runsTaken(taken);
    for (const [key, { at }] of this.recent) {
      if (at > now - RECENT_MS && this.recent.size <= RECENT_MAX) break;
      this.recent.delete(key);
    }
  }

  /** Drains every stream (their workers move to another API) and resolves once each has closed. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.unlisten?.();
    await Promise.all([...this.sessions].map((s) => s.drain('the API is stopping: open a stream to another')));
  }
}
