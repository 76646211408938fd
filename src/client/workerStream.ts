import WebSocket from 'ws';
import { hawkHeader, TgsApiError, type TgsCredentials } from './http.js';
import type { Resolution, ResolutionResult } from '../queue/resolveTask.js';
import { errorStatus } from '../errors.js';

/** One run the API pushed, exactly as claimWork answers it. */
export interface StreamClaim {
  status: { taskId: string; taskGroupId: string; [key: string]: unknown };
  runId: number;
  workerGroup: string;
  workerId: string;
  takenUntil: string;
  task: { payload: Record<string, unknown>; metadata?: { name?: string }; [key: string]: unknown };
  credentials: TgsCredentials;
}

/** A run someone other than the worker resolved (the `canceled` frame). */
export interface CanceledRun {
  taskId: string;
  runId: number;
  reasonResolved: string;
}

export interface WorkerStreamOptions {
  rootUrl: string;
  /** needs queue:claim-work:<provisionerId>/<workerType> and queue:worker-id:<workerGroup>/<workerId> */
  credentials?: TgsCredentials;
  provisionerId: string;
  workerType: string;
  workerGroup: string;
  workerId: string;
  /** how many tasks the worker can take now (it gives each one back with `release` when it has finished) */
  capacity: number;
  /** each run the API claimed for the worker */
  onClaim(claim: StreamClaim): void;
  /**
   * A run the API pushed that someone else resolved before the worker reported it: canceled (`reasonResolved`
   * `canceled`), past its deadline (`deadline-exceeded`), its claim expired (`claim-expired`). The worker stops it
   * and reports nothing (a report would be refused: the run is resolved). Called only for runs this worker was given
   * and has not reported; the API sends it within a moment of the resolution (docs/api.md § The worker stream).
   */
  onCanceled?(run: CanceledRun): void;
  /** a stream's loss and recovery (once each), refusals */
  log?: (line: string) => void;
}

interface Pending {
  items: Resolution[];
  resolve(results: ResolutionResult[]): void;
  reject(err: Error): void;
}

/** The most runs a `resolve` frame carries (the API's MAX_RESOLUTIONS). */
const FRAME_RESOLUTIONS = 100;

/**
 * A worker's end of the worker stream (docs/api.md § The worker stream): the API pushes claims while the worker has
 * capacity, and `resolve` reports runs, those of one tick in one frame. The stream is opened again when the API
 * drains it (every TGS_WORKER_STREAM_MAX_AGE_S, or when it stops) or it is lost; reports not answered on a lost
 * stream are sent again on the next one (a report repeated answers as the first did).
 *
 * `opened` resolves once the first stream is open; it rejects with a TgsApiError when the API refuses it: 404 means
 * the server has no worker stream (claim with claimWork instead), 401/403 that the credentials cannot claim.
 */
export class WorkerStream {
  /** tasks the worker can take now and has not been given */
  private available: number;
  /** what the current stream was told the worker can take and has not been given yet */
  private granted = 0;
  private ws: WebSocket | undefined;
  private closing = false;
  /** stopClaiming was called */
  private stopped = false;
  private failures = 0;
  private lost = false;
  private nextId = 0;
  /** reports sent and not answered, by frame id, with the stream they went on (sent again if it is lost) */
  private readonly inFlight = new Map<number, Pending & { ws: WebSocket }>();
  /** runs the API pushed and the worker has not reported (`<taskId>/<runId>`): the only ones a `canceled` frame may name */
  private readonly given = new Set<string>();
  /** reports waiting for this tick's frame */
  private queued: Pending[] = [];
  private flushing = false;
  private retry: NodeJS.Timeout | undefined;
  private readonly log: (line: string) => void;
  readonly opened: Promise<void>;
  private settleOpened!: { resolve(): void; reject(err: Error): void };

  constructor(private readonly options: WorkerStreamOptions) {
    this.available = options.capacity;
    this.log = options.log ?? ((line) => console.error(`worker stream: ${line}`));
    this.opened = new Promise((resolve, reject) => (this.settleOpened = { resolve, reject }));
    this.opened.catch(() => undefined);
    this.connect();
  }

  /** `n` tasks of the worker's have finished: the API may claim that many more. */
  release(n = 1): void {
    this.available += n;
    this.grant();
  }

  /**
   * The worker is stopping: the API claims nothing more for it (a claim under way may still arrive), and `release`
   * gives nothing back. Reports still go out until `close`.
   */
  stopClaiming(): void {
    this.stopped = true;
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'stop' }));
  }

  /** The worker is done with a run it will not report here (its claim was lost): a `canceled` frame for it is ignored. */
  forget(taskId: string, runId: number): void {
    this.given.delete(`${taskId}/${runId}`);
  }

  /** Reports runs (reportResolutions' items): one answer per item, in order. Rejects with a TgsApiError when the API refuses the frame. */
  resolve(items: Resolution[]): Promise<ResolutionResult[]> {
    for (const item of items) this.given.delete(`${item.taskId}/${item.runId}`);
    const parts: Promise<ResolutionResult[]>[] = [];
    for (let i = 0; i < items.length; i += FRAME_RESOLUTIONS) {
      parts.push(new Promise((resolve, reject) => this.queued.push({ items: items.slice(i, i + FRAME_RESOLUTIONS), resolve, reject })));
    }
    this.scheduleFlush();
    return Promise.all(parts).then((answers) => answers.flat());
  }

  /** Closes the stream: runs the API claims as it closes are resolved worker-shutdown by the API. Unanswered reports reject. */
  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.retry);
    const ws = this.ws;
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      await new Promise<void>((resolve) => {
        ws.once('close', () => resolve());
        ws.close(1000, 'worker stopping');
      });
    }
    for (const p of [...this.inFlight.values(), ...this.queued]) p.reject(new TgsApiError(0, 'ConnectionClosed', 'the worker stream was closed before the API answered: report these runs again'));
    this.inFlight.clear();
    this.queued = [];
  }

  private connect(): void {
    const { rootUrl, provisionerId, workerType, workerGroup, workerId, credentials } = this.options;
    const url = `${rootUrl.replace(/\/+$/, '')}/api/queue/v1/worker-stream/${[provisionerId, workerType, workerGroup, workerId].map(encodeURIComponent).join('/')}`;
    const ws = new WebSocket(url.replace(/^http/, 'ws'), {
      headers: credentials ? { authorization: hawkHeader(url, 'GET', credentials) } : {},
      perMessageDeflate: false,
      // a claim of 32 tasks carries their definitions: far below this
      maxPayload: 256 * 1024 * 1024,
    });
    this.ws = ws;
    let draining = false;
    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        let body: { code?: string; message?: string } = {};
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          // not Taskcluster's error shape: the status says enough
        }
        const err = new TgsApiError(res.statusCode ?? 0, body.code ?? 'HttpError', body.message ?? `${res.statusCode} answered to the worker stream's upgrade`, body);
        ws.removeAllListeners('close');
        ws.terminate();
        if (err.status === 404 || err.status === 401 || err.status === 403 || err.status === 400) {
          this.closing = true;
          this.settleOpened.reject(err);
          if (err.status !== 404) this.log(`the API refused the worker stream: ${err.message}`);
          return;
        }
        this.reconnectLater(err);
      });
    });
    ws.on('open', () => {
      this.granted = 0;
      this.grant();
      this.scheduleFlush();
    });
    ws.on('message', (data) => {
      let frame: { type: string; [key: string]: any };
      try {
        frame = JSON.parse(String(data));
      } catch {
        return this.log('the API sent a frame that is not JSON: ignored');
      }
      switch (frame.type) {
        case 'welcome':
          // runs given on an earlier stream: this one is to tell the worker of their cancels (up to 256 a frame); an
          // API that does not say it takes the frame would refuse it
          if (frame.holding === true && this.given.size > 0) {
            const held = [...this.given].map((key) => {
              const at = key.lastIndexOf('/');
              return { taskId: key.slice(0, at), runId: Number(key.slice(at + 1)) };
            });
            for (let i = 0; i < held.length; i += 256) ws.send(JSON.stringify({ type: 'holding', runs: held.slice(i, i + 256) }));
          }
          if (this.lost) this.log('worker stream open again');
          this.lost = false;
          this.failures = 0;
          this.settleOpened.resolve();
          break;
        case 'claimed':
          this.granted -= frame.tasks.length;
          this.available -= frame.tasks.length;
          for (const claim of frame.tasks as StreamClaim[]) {
            this.given.add(`${claim.status.taskId}/${claim.runId}`);
            this.options.onClaim(claim);
          }
          break;
        case 'canceled':
          for (const run of Array.isArray(frame.runs) ? (frame.runs as CanceledRun[]) : []) {
            // a run this worker was not given, or has reported, is ignored: whatever the frame says
            if (typeof run?.taskId !== 'string' || typeof run.runId !== 'number' || !this.given.delete(`${run.taskId}/${run.runId}`)) continue;
            this.options.onCanceled?.({ taskId: run.taskId, runId: run.runId, reasonResolved: String(run.reasonResolved) });
          }
          break;
        case 'resolved': {
          const pending = this.inFlight.get(frame.id);
          this.inFlight.delete(frame.id);
          if (!pending) break;
          if (frame.error) pending.reject(new TgsApiError(statusOf(frame.error.code), frame.error.code, frame.error.message));
          else pending.resolve(frame.resolutions);
          break;
        }
        case 'draining':
          // no more claims come on this stream: a new one takes the capacity and the later reports; this one is
          // closed once the reports it carries are answered
          draining = true;
          if (!this.closing) this.connect();
          this.closeWhenAnswered(ws);
          break;
        case 'error':
          this.log(`the API ended the worker stream: ${frame.code}: ${frame.message}`);
          break;
      }
    });
    ws.on('error', () => undefined);
    ws.on('close', () => {
      // reports this stream left unanswered go on the next one (a report repeated answers as the first did)
      for (const [id, pending] of this.inFlight) {
        if (pending.ws !== ws) continue;
        this.inFlight.delete(id);
        if (this.closing) pending.reject(new TgsApiError(0, 'ConnectionClosed', 'the worker stream was closed before the API answered: report these runs again'));
        else this.queued.push(pending);
      }
      if (this.closing) return;
      this.scheduleFlush();
      if (!draining) this.reconnectLater(new Error('the worker stream was lost'));
    });
  }

  /** Closes a drained stream once every report it carries has its answer. */
  private closeWhenAnswered(ws: WebSocket): void {
    const ids = [...this.inFlight].filter(([, p]) => p.ws === ws).map(([id]) => id);
    const check = () => {
      if (ids.every((id) => !this.inFlight.has(id)) || ws.readyState !== WebSocket.OPEN) ws.close(1000, 'drained');
      else setTimeout(check, 10);
    };
    check();
  }

  private reconnectLater(err: Error): void {
    if (this.closing) return;
    if (!this.lost) this.log(`${err.message}; opening it again`);
    this.lost = true;
    this.failures++;
    const delay = Math.min(30_000, 250 * 2 ** Math.min(this.failures, 7));
    this.retry = setTimeout(() => this.connect(), delay);
  }

  private grant(): void {
    if (this.stopped) return;
    const ws = this.ws;
    const more = this.available - this.granted;
    if (!ws || ws.readyState !== WebSocket.OPEN || more <= 0) return;
    this.granted += more;
    ws.send(JSON.stringify({ type: 'capacity', tasks: more }));
  }

  private scheduleFlush(): void {
    if (this.flushing) return;
    this.flushing = true;
    queueMicrotask(() => {
      this.flushing = false;
      this.flush();
    });
  }

  /** Sends the reports of this tick, up to 100 runs a frame, on the stream that is open. */
  private flush(): void {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN || this.queued.length === 0) return;
    const queued = this.queued;
    this.queued = [];
    let frame: Pending[] = [];
    let size = 0;
    const send = () => {
      if (frame.length === 0) return;
      const parts = frame;
      const id = this.nextId++;
      const items = parts.flatMap((p) => p.items);
      this.inFlight.set(id, {
        ws,
        items,
        resolve: (results) => {
          let at = 0;
          for (const p of parts) p.resolve(results.slice(at, (at += p.items.length)));
        },
        reject: (err) => parts.forEach((p) => p.reject(err)),
      });
      ws.send(JSON.stringify({ type: 'resolve', id, resolutions: items }));
      frame = [];
      size = 0;
    };
    for (const p of queued) {
      if (size + p.items.length > FRAME_RESOLUTIONS) send();
      frame.push(p);
      size += p.items.length;
    }
    send();
  }
}

/** The HTTP status of an error code the API answers in a frame. */
const statusOf = (code: string) => (errorStatus as Record<string, number>)[code] ?? 500;
