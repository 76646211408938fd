import { TgsError, type ErrorCode } from '../../errors.js';
import type { JsonSchema } from '../../api/endpoint.js';
import { validateInput } from '../../api/validate.js';
import { resolutionsSchema, MAX_RESOLUTIONS } from '../api/resolutions.js';
import { SLUGID_PATTERN } from '../../api/patterns.js';
import type { Resolution, ResolutionResult } from '../resolveTask.js';
import type { ClaimedRun } from '../claimWork.js';
import type { ResolvedRun } from '../notify.js';

/**
 * The worker stream's frames (docs/api.md § The worker stream): one JSON object per WebSocket text message.
 * What the worker sends is checked here; what the API sends is built here, so both sides of the protocol are in
 * one file.
 */

/** The most tasks a stream may have asked for and not been given yet (the sum of its `capacity` frames' tasks). */
export const MAX_STREAM_CAPACITY = 256;
/** The most `resolve` frames of one stream being resolved at once; the API reads no more of its frames meanwhile. */
export const MAX_RESOLVES_IN_FLIGHT = 8;
/** The largest frame the API reads: a `resolve` of 100 runs is about 10 KB. */
export const MAX_FRAME_BYTES = 256 * 1024;

/** Close codes of the worker stream, beside WebSocket's own (1000 normal, 1001 going away). */
export const CLOSE = {
  /** the worker sent a frame that is not one of the protocol's (its `error` frame says what) */
  protocolError: 4400,
  /** a draining stream the worker did not close within the grace */
  drained: 4408,
} as const;

export type WorkerFrame =
  | { type: 'capacity'; tasks: number }
  | { type: 'stop' }
  | { type: 'resolve'; id: number; resolutions: Resolution[] }
  /** runs the worker was given on an earlier stream and has not reported: this stream tells it when they are canceled */
  | { type: 'holding'; runs: { taskId: string; runId: number }[] };

export type ApiFrame =
  /** `holding`: this API takes `holding` frames and sends `canceled` ones (an older one would refuse the frame) */
  | { type: 'welcome'; taskQueueId: string; workerGroup: string; workerId: string; maxCapacity: number; maxResolutions: number; drainsAt: string; holding: true }
  | { type: 'claimed'; tasks: ClaimedRun[] }
  | { type: 'resolved'; id: number; resolutions: ResolutionResult[] }
  | { type: 'resolved'; id: number; error: { code: ErrorCode; message: string } }
  | { type: 'draining'; reason: string }
  /** runs this stream pushed, not reported yet, that someone else resolved (a cancel, a sweep): stop them, report nothing */
  | { type: 'canceled'; runs: ResolvedRun[] }
  | { type: 'error'; code: ErrorCode; message: string };

const workerFrameSchema: JsonSchema = {
  oneOf: [
    {
      type: 'object',
      additionalProperties: false,
      required: ['type', 'tasks'],
      properties: { type: { const: 'capacity' }, tasks: { type: 'integer', minimum: 1, maximum: MAX_STREAM_CAPACITY } },
    },
    { type: 'object', additionalProperties: false, required: ['type'], properties: { type: { const: 'stop' } } },
    {
      type: 'object',
      additionalProperties: false,
      required: ['type', 'id', 'resolutions'],
      properties: { type: { const: 'resolve' }, id: { type: 'integer', minimum: 0, maximum: 2 ** 31 - 1 }, resolutions: resolutionsSchema },
    },
    {
      type: 'object',
      additionalProperties: false,
      required: ['type', 'runs'],
      properties: {
        type: { const: 'holding' },
        runs: {
          type: 'array',
          minItems: 1,
          maxItems: MAX_STREAM_CAPACITY,
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['taskId', 'runId'],
            properties: { taskId: { type: 'string', pattern: SLUGID_PATTERN }, runId: { type: 'integer', minimum: 0, maximum: 49 } },
          },
        },
      },
    },
  ],
};

/** A worker's frame, or a TgsError (InputError, InputValidationError) saying why it is none. */
export function parseWorkerFrame(data: Buffer | string, isBinary: boolean): WorkerFrame {
  if (isBinary) throw new TgsError('InputError', 'worker stream frames are JSON text messages, not binary ones');
  let value: unknown;
  try {
    value = JSON.parse(typeof data === 'string' ? data : data.toString('utf8'));
  } catch (err) {
    throw new TgsError('InputError', `a worker stream frame is not JSON: ${(err as Error).message.slice(0, 200)}`);
  }
  return validateInput<WorkerFrame>(workerFrameSchema, value, 'frame');
}

export const welcome = (taskQueueId: string, workerGroup: string, workerId: string, drainsAt: number): ApiFrame => ({
  type: 'welcome',
  taskQueueId,
  workerGroup,
  workerId,
  maxCapacity: MAX_STREAM_CAPACITY,
  maxResolutions: MAX_RESOLUTIONS,
  drainsAt: new Date(drainsAt).toISOString(),
  holding: true,
});
