import { compile, describeErrors } from '../api/validate.js';
import type { JsonSchema } from '../api/endpoint.js';
import { NETWORK_MODES, type NetworkMode } from './network.js';

/** One file the shell worker uploads after the command exits (generic-worker's array form). */
export interface ArtifactSpec {
  /** artifact name, e.g. `public/build/app.tar.gz` (names under `public/` are readable without credentials) */
  name: string;
  /** file path, relative to the task's working directory; absolute paths, `..` and symlinks leading out are malformed-payload */
  path: string;
  type: 'file';
  /** default: guessed from the file extension, else application/octet-stream */
  contentType?: string;
  /** default: the task's expires */
  expires?: string;
}

/** What a task for `tgs shell-worker` carries in `task.payload`. */
export interface ShellPayload {
  /** an argv array (run without a shell) or a string (run by `/bin/sh -c`) */
  command: string[] | string;
  /** added to the environment of the command (over the worker's own, without its credentials) */
  env: Record<string, string>;
  /** seconds; the command is killed after this and the run fails */
  maxRunTime: number;
  /**
   * seconds between SIGTERM and SIGKILL when the run is canceled (0-600); default: the worker's `--kill-grace`.
   * Counted from the cancel: the worker's slot stays taken meanwhile.
   */
  killGrace?: number;
  artifacts: ArtifactSpec[];
  /** a narrower network than the worker's `--network` (never a wider one): none, api, internet or host */
  network?: NetworkMode;
}

export const MAX_RUN_TIME_LIMIT = 7 * 24 * 3600;
/** The longest `killGrace` a task may ask for (and `--kill-grace` the worker may set). */
export const MAX_KILL_GRACE = 600;

/** The payload schema (ajv; unknown properties are rejected, like every tgs schema). */
export const shellPayloadSchema: JsonSchema = {
  $id: 'tgs:shell-worker-payload',
  type: 'object',
  additionalProperties: false,
  required: ['command', 'maxRunTime'],
  properties: {
    command: {
      oneOf: [
        { type: 'string', minLength: 1 },
        { type: 'array', minItems: 1, items: { type: 'string' } },
      ],
    },
    env: { type: 'object', additionalProperties: { type: 'string' }, default: {} },
    maxRunTime: { type: 'integer', minimum: 1, maximum: MAX_RUN_TIME_LIMIT },
    killGrace: { type: 'integer', minimum: 0, maximum: MAX_KILL_GRACE },
    network: { enum: [...NETWORK_MODES] },
    artifacts: {
      type: 'array',
      default: [],
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'path', 'type'],
        properties: {
          name: { type: 'string', minLength: 1, maxLength: 1024, pattern: '^[^/]' },
          path: { type: 'string', minLength: 1 },
          type: { const: 'file' },
          contentType: { type: 'string', minLength: 1, maxLength: 255 },
          expires: { type: 'string', format: 'date-time' },
        },
      },
    },
  },
};

/** An example payload, shown in the log when a payload does not validate. */
const EXAMPLE = JSON.stringify({
  command: ['sh', '-c', 'make && cp out/app.tar.gz .'],
  env: { MODE: 'release' },
  maxRunTime: 600,
  artifacts: [{ name: 'public/build/app.tar.gz', path: 'app.tar.gz', type: 'file' }],
});

/**
 * Why an artifact path cannot name a file inside the task's directory (before anything runs; symlinks are checked
 * after the command, see confine.ts), or undefined. The worker reads artifact files with its own rights, which with
 * --task-user are root's: `/etc/shadow` or `../../root/...` would upload whatever the worker can read.
 */
export function artifactPathProblem(p: string): string | undefined {
  if (p.includes('\0')) return 'contains a NUL character';
  if (p.startsWith('/')) return 'is absolute: artifact paths are relative to the task\'s directory';
  if (p.split('/').includes('..')) return 'contains `..`: artifact paths must stay inside the task\'s directory';
  return undefined;
}

/** Validates (filling defaults) a copy of the payload; on failure, a message for the task's log. */
export function parseShellPayload(payload: unknown): { payload: ShellPayload } | { error: string } {
  const copy = structuredClone(payload ?? {});
  const validate = compile(shellPayloadSchema);
  if (validate(copy)) {
    const parsed = copy as ShellPayload;
    const problems = parsed.artifacts.flatMap((a, i) => {
      const problem = artifactPathProblem(a.path);
      return problem ? [`payload.artifacts[${i}] (${a.name}): path ${JSON.stringify(a.path)} ${problem}`] : [];
    });
    if (problems.length === 0) return { payload: parsed };
    return { error: ['The task payload is not valid for tgs shell-worker:', ...problems].join('\n') };
  }
  return {
    error: [
      'The task payload is not valid for tgs shell-worker:',
      describeErrors(validate.errors, 'payload'),
      '',
      'A payload has `command` (an argv array, or a string run by /bin/sh -c) and `maxRunTime` (seconds), and may have',
      '`env` ({NAME: "value"}), `artifacts` ([{name, path, type: "file", contentType?, expires?}]) and `killGrace` (seconds',
      'from SIGTERM to SIGKILL when the run is canceled). For example:',
      `  ${EXAMPLE}`,
    ].join('\n'),
  };
}

const CONTENT_TYPES: Record<string, string> = {
  '.txt': 'text/plain; charset=utf-8',
  '.log': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.json': 'application/json',
  '.html': 'text/html; charset=utf-8',
  '.xml': 'application/xml',
  '.csv': 'text/csv',
  '.js': 'text/javascript',
  '.gz': 'application/gzip',
  '.tgz': 'application/gzip',
  '.tar': 'application/x-tar',
  '.zip': 'application/zip',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.svg': 'image/svg+xml',
};

export function guessContentType(path: string): string {
  const m = /(\.[A-Za-z0-9]+)$/.exec(path);
  return (m && CONTENT_TYPES[m[1].toLowerCase()]) || 'application/octet-stream';
}
