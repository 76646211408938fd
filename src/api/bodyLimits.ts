/**
 * Request body limits, per endpoint: the smallest real use needs, so a caller (authenticated: anonymous
 * callers of endpoints that need scopes are refused before any body is read) cannot make the API buffer more.
 * Fastify refuses a Content-Length over the limit before reading, and a chunked body as soon as it passes it.
 */

/** Endpoints without an `input` take no body; 1 KiB lets clients that always send `{}` through. */
export const NO_INPUT_BODY_LIMIT = 1024;

/**
 * Endpoints with a small `input` (claims, reports, artifacts, cancel, rerun): their schemas cap each string at
 * a few KB (an error artifact's message: 4 KB; a reference's url: 4 KB).
 */
export const DEFAULT_BODY_LIMIT = 64 * 1024;

/**
 * createTask: the payload is free-form (commands, env), and `dependencies` alone may list 10,000 taskIds
 * (~250 KB of JSON).
 */
export const TASK_BODY_LIMIT = 1024 * 1024;

/** queue.tasks and queue.statuses: up to 10,000 taskIds (~250 KB of JSON, src/queue/taskBatch.ts). */
export const TASK_IDS_BODY_LIMIT = 512 * 1024;

/** Auth clients: up to 10 KB of description and scopes of up to 1 KB each (hundreds in a real client). */
export const CLIENT_BODY_LIMIT = 256 * 1024;

/** Routes that are not endpoints (UI, openapi.json, unknown paths) take no body. */
export const SERVER_BODY_LIMIT = NO_INPUT_BODY_LIMIT;
