import net from 'node:net';
import type http from 'node:http';

/**
 * How long a connection stays open for its client's next request while it is idle during a stop: counted from
 * the stop's start for a connection idle then, else from its last answer, or from its accept for one that has
 * not sent a request yet (a connection just accepted has its request on the way: closing it would reset it).
 * A busy client (a worker long-polling claimWork) sends one within milliseconds, so almost every such
 * connection ends with an answer instead of being closed under a request that is already on its way; what is
 * left after this is a client with nothing to send.
 */
export const IDLE_GRACE_MS = 1000;
/**
 * In-flight requests get this long to finish. claimWork long-polls are answered at once (ClaimWaiter.stop) and
 * a report takes milliseconds (seconds on a machine at load average 30); what is still running after 10 s is
 * an upload or something stuck, and a supervisor's stop timeout (Kubernetes' 30 s grace) must not be reached.
 */
export const IN_FLIGHT_LIMIT_MS = 10_000;
/**
 * The listening socket is closed once no connection came for this long. Closing it resets every connection
 * still in the kernel's accept queue (the client sees ECONNRESET and cannot tell whether its request counted),
 * so it stays open while clients are still arriving; they are answered 503 meanwhile and go elsewhere.
 */
export const ARRIVALS_QUIET_MS = 250;
const CHECK_EVERY_MS = 50;

export interface GracefulStopper {
  /**
   * Marks every answer not yet sent and every later one `Connection: close`, answers every request on a
   * connection made after this call with 503 (in Taskcluster's error shape: nothing was done, try another
   * API), runs `answerWaiting` (which must make long-polls answer), closes the listening socket once no new
   * connection came for ARRIVALS_QUIET_MS, then waits until every connection closed: each busy one after its
   * answer, each idle one at the end of IDLE_GRACE_MS, whatever is left after IN_FLIGHT_LIMIT_MS.
   */
  stop(answerWaiting?: () => Promise<void>): Promise<void>;
}

/**
 * A graceful stop for a node HTTP server that cuts no request. node's server.close() (and fastify's close)
 * closes idle keep-alive connections at once: a client that just sent a request on one gets `socket hang
 * up` and cannot tell whether it was processed (a claim made, a report counted). Here a connection is only
 * closed by the answer to its request, or while the server saw no request on it. Install before listen().
 */
export function gracefulStopper(server: http.Server): GracefulStopper {
  /** every open connection: its requests in flight, and since when it has had none */
  const sockets = new Map<net.Socket, { inFlight: number; idleSince: number }>();
  const unanswered = new Set<http.ServerResponse>();
  /** connections accepted after the stop began: their requests are refused, not served */
  const late = new WeakSet<net.Socket>();
  let stopping = false;
  let lastArrival = 0;

  server.on('connection', (socket: net.Socket) => {
    sockets.set(socket, { inFlight: 0, idleSince: Date.now() });
    socket.once('close', () => sockets.delete(socket));
    if (stopping) {
      late.add(socket);
      lastArrival = Date.now();
    }
  });
  server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const socket = req.socket;
    const state = sockets.get(socket);
    if (state) state.inFlight++;
    unanswered.add(res);
    // node ends the connection after an answer that says so, and the client does not reuse it
    if (stopping) res.setHeader('connection', 'close');
    let done = false;
    const finished = () => {
      if (done) return;
      done = true;
      unanswered.delete(res);
      if (state && --state.inFlight === 0) state.idleSince = Date.now();
    };
    res.once('finish', finished);
    res.once('close', finished);
  });

  return {
    async stop(answerWaiting) {
      stopping = true;
      lastArrival = Date.now();
      for (const res of unanswered) if (!res.headersSent) res.setHeader('connection', 'close');
      // From now on a request on a new connection is refused before the application sees it.
      const handlers = server.listeners('request') as ((req: http.IncomingMessage, res: http.ServerResponse) => void)[];
      server.removeAllListeners('request');
      server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
        if (!late.has(req.socket)) {
          for (const handler of handlers) handler.call(server, req, res);
          return;
        }
        const body = JSON.stringify({ code: 'ServiceUnavailable', message: 'this API process is stopping and did nothing with the request: send it to another one, or retry' });
        res.writeHead(503, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' });
        res.end(body);
        req.resume();
      });
      let listening = true;
      // net.Server's close only stops accepting; http.Server's would also close idle connections now.
      // In the check phase, right after the poll phase accepted what the kernel had queued. The decision was made
      // before that poll phase (a timer): a connection it accepted means clients are still arriving (after a stall
      // of this process they all come at once), so the listener stays open for another quiet spell, unless `force`.
      const stopListening = (force: boolean) => {
        const decidedAt = lastArrival;
        return new Promise<void>((resolve) =>
          setImmediate(() => {
            if (force || lastArrival === decidedAt) {
              net.Server.prototype.close.call(server);
              listening = false;
            }
            resolve();
          }),
        );
      };
      const started = Date.now();
      await answerWaiting?.();
      while (sockets.size > 0 || listening) {
        const elapsed = Date.now() - started;
        if (listening && (Date.now() - lastArrival >= ARRIVALS_QUIET_MS || elapsed >= IN_FLIGHT_LIMIT_MS)) await stopListening(elapsed >= IN_FLIGHT_LIMIT_MS);
        if (sockets.size === 0 && !listening) break;
        if (elapsed >= IN_FLIGHT_LIMIT_MS) {
          for (const socket of sockets.keys()) socket.destroy();
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, CHECK_EVERY_MS));
        if (elapsed < IDLE_GRACE_MS) continue;
        // In the check phase, right after the poll phase read every socket: a request that arrived by
        // then has been parsed and counted, so a socket idle here for IDLE_GRACE_MS has none on its way in.
        await new Promise<void>((resolve) =>
          setImmediate(() => {
            const now = Date.now();
            for (const [socket, { inFlight, idleSince }] of sockets) {
              if (inFlight === 0 && now - Math.max(idleSince, started) >= IDLE_GRACE_MS && !socket.writableEnded) socket.destroy();
            }
            resolve();
          }),
        );
      }
    },
  };
}
