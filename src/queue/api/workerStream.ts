import { declare, UPGRADED } from '../../api/endpoint.js';
import { TgsError } from '../../errors.js';
import { MAX_RESOLUTIONS } from './resolutions.js';
import { MAX_STREAM_CAPACITY } from '../workerStream/frames.js';

/**
 * A tgs extension beside claimWork: one WebSocket per worker over which the API pushes claims and the worker
 * reports its runs in batches, authenticated once (docs/api.md § The worker stream).
 */
export const workerStream = declare({
  service: 'queue',
  name: 'workerStream',
  title: 'Worker Stream (tgs extension)',
  description:
    'Open with a WebSocket upgrade (`GET` with `Upgrade: websocket`), signed with Hawk like any request. The worker sends ' +
    '`{"type":"capacity","tasks":n}` for each n tasks it can take (at most ' +
    `${MAX_STREAM_CAPACITY} outstanding), and the API pushes \`{"type":"claimed","tasks":[...]}\` as it claims them, each ` +
    'task exactly as claimWork answers it (run credentials included). The worker reports runs with ' +
    `\`{"type":"resolve","id":k,"resolutions":[...]}\` (up to ${MAX_RESOLUTIONS}, reportResolutions' items and rules) and ` +
    'gets `{"type":"resolved","id":k,...}`. The API sends `{"type":"draining"}` after TGS_WORKER_STREAM_MAX_AGE_S (60 s) ' +
    'or when the credentials expire: open a new stream, send later reports there, and close this one. Without an ' +
    'upgrade: 400. A server without this endpoint answers 404: use claimWork.',
  method: 'get',
  route: '/worker-stream/<provisionerId>/<workerType>/<workerGroup>/<workerId>',
  scopes: { AllOf: ['queue:claim-work:<provisionerId>/<workerType>', 'queue:worker-id:<workerGroup>/<workerId>'] },
  async handler({ params, deps, auth, upgrade, request, reply }) {
    if (!upgrade) {
      throw new TgsError('InputError', 'workerStream is a WebSocket: send this GET with `Connection: Upgrade` and `Upgrade: websocket` (or claim with claimWork)');
    }
    if (deps.workerStreams.stopping) throw new TgsError('ServiceUnavailable', 'This API is stopping: open the stream again (to another API)');
    void reply.hijack();
    const { provisionerId, workerType, workerGroup, workerId } = params;
    deps.workerStreams.open(deps, request.raw, upgrade, auth, { provisionerId, workerType, workerGroup, workerId }, request.log);
    return UPGRADED;
  },
});
