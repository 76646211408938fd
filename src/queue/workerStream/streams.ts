import type http from 'node:http';
import { WebSocketServer } from 'ws';
import type { ApiDeps } from '../../api/deps.js';
import type { UpgradeRequest } from '../../api/endpoint.js';
import type { AuthContext } from '../../auth/authenticate.js';
import { OutageLog } from '../../outageLog.js';
import { workerStreamsOpen } from '../../observability/metrics.js';
import type { ClaimRequest } from '../claimWork.js';
import { MAX_FRAME_BYTES } from './frames.js';
import { WorkerStreamSession } from './session.js';

type Log = ConstructorParameters<typeof WorkerStreamSession>[4];

/** The API process's worker streams: opens them on an authorized upgrade, drains them all when the API stops. */
export class WorkerStreams {
  private readonly server = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false, clientTracking: false });
  private readonly sessions = new Set<WorkerStreamSession>();
  private readonly outage: OutageLog;
  /** true once the API began to stop: new streams are refused (503) */
  stopping = false;

  constructor(log: (line: string) => void) {
    this.outage = new OutageLog(log, 'worker streams: Postgres');
  }

  /** Takes an upgrade request's socket over as the stream of `claim`'s worker (its scopes checked by the route). */
  open(deps: ApiDeps, request: http.IncomingMessage, upgrade: UpgradeRequest, auth: AuthContext, claim: Omit<ClaimRequest, 'count'>, log: Log): void {
    this.server.handleUpgrade(request, upgrade.socket, upgrade.head, (ws) => {
      const session = new WorkerStreamSession(ws, deps, auth, claim, log, this.outage);
      this.sessions.add(session);
      workerStreamsOpen.inc();
      void session.done.then(() => {
        this.sessions.delete(session);
        workerStreamsOpen.dec();
      });
    });
  }

  /** Drains every stream (their workers move to another API) and resolves once each has closed. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.sessions].map((s) => s.drain('the API is stopping: open a stream to another')));
  }
}
