import type { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { TgsError } from '../errors.js';
import { isPostgresUnavailable } from '../db/unavailable.js';
import type { Endpoint } from './endpoint.js';

/**
 * Error replies carry Taskcluster's `requestInfo.payload`, capped: a reply must never hand a large body back
 * (or make the API serialize one twice). Raw bodies (artifact bytes) are never echoed.
 */
export const MAX_ECHOED_PAYLOAD_CHARS = 4096;

/**
 * The JSON text of `value`, written iteratively and abandoned once it passes `maxChars`: an error reply walks
 * at most that much of a hostile body, whatever its size or depth. (JSON.stringify recurses: a body of 30,000
 * nested arrays, which JSON.parse reads fine, overflowed the stack in the reply to its own refusal.)
 * `complete` is false when the text was cut.
 */
export function boundedJson(value: unknown, maxChars: number): { text: string; complete: boolean } {
  let text = '';
  // a stack of what is left to write: values, and the literal text between them
  const todo: ({ v: unknown } | string)[] = [{ v: value }];
  while (todo.length > 0) {
    if (text.length > maxChars) return { text: text.slice(0, maxChars), complete: false };
    const next = todo.pop() as { v: unknown } | string;
    if (typeof next === 'string') {
      text += next;
      continue;
    }
    const v = next.v;
    // Each entry of `todo` writes at least one character, so only the first `maxChars` members of an array or
    // object can reach the text: a longer one is cut anyway.
    if (Array.isArray(v)) {
      todo.push(']');
      for (let i = Math.min(v.length, maxChars) - 1; i >= 0; i--) {
        todo.push({ v: v[i] === undefined || typeof v[i] === 'function' ? null : v[i] });
        if (i > 0) todo.push(',');
      }
      text += '[';
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v).filter(([, x]) => x !== undefined && typeof x !== 'function');
      todo.push('}');
      for (let i = Math.min(entries.length, maxChars) - 1; i >= 0; i--) {
        todo.push({ v: entries[i][1] }, `${JSON.stringify(entries[i][0])}:`);
        if (i > 0) todo.push(',');
      }
      text += '{';
    } else {
      text += JSON.stringify(v) ?? 'null';
    }
  }
  return text.length > maxChars ? { text: text.slice(0, maxChars), complete: false } : { text, complete: true };
}

/** The body as the reply echoes it: itself when its JSON is short, else a truncated prefix of that JSON. */
export function echoedPayload(body: unknown): unknown {
  if (body === undefined || body === null) return {};
  if (Buffer.isBuffer(body) || typeof (body as Readable).pipe === 'function') return {};
  const { text, complete } = boundedJson(body, MAX_ECHOED_PAYLOAD_CHARS);
  // a complete text of at most 4,096 characters nests at most 2,048 levels: JSON.stringify writes that safely
  if (complete) return body;
  return `${text}... (truncated)`;
}

/** Taskcluster's error body. */
export function errorBody(err: TgsError, request: FastifyRequest, endpoint?: Endpoint) {
  return {
    code: err.code,
    message: err.message,
    requestInfo: {
      method: endpoint?.name ?? request.method,
      params: request.admitted?.params ?? request.params ?? {},
      payload: echoedPayload(request.body),
      time: new Date().toISOString(),
    },
    ...(err.details ? { details: err.details } : {}),
  };
}

/** Any error as the TgsError the client is answered with: fastify's own errors keep their 4xx meaning. */
export function toTgsError(err: unknown): TgsError {
  if (err instanceof TgsError) return err;
  const e = err as { code?: string; statusCode?: number; message?: string };
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new TgsError('InputTooLarge', 'The request body is too large');
  if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new TgsError('InputError', 'Unsupported Content-Type: send application/json');
  }
  if (e.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return new TgsError('InputError', 'The JSON body is empty');
  if (e.code === 'FST_ERR_BAD_URL') return new TgsError('InputError', 'The URL has an invalid %-escape');
  if (e.statusCode === 404) return new TgsError('ResourceNotFound', e.message ?? 'Not found');
  if (e.statusCode === 400) return new TgsError('InputError', e.message ?? 'Bad request');
  if (isPostgresUnavailable(err)) {
    return new TgsError('ServiceUnavailable', 'The API cannot reach its database right now; retry shortly (the operator\'s logs say why)');
  }
  return new TgsError('InternalServerError', 'Internal server error');
}
