import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type pg from 'pg';
import type { Config } from '../config.js';
import { type Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { enqueueMessages, type OutboxMessage } from '../exchanges/outbox.js';
import { queueExchangeName } from '../exchanges/exchanges.js';
import { taskRouting } from './messages.js';
import { loadTasks, taskStatus, type TaskRow } from './taskRow.js';

/**
 * Artifacts (Taskcluster's storage types `s3`, `reference`, `error`). The bytes of `s3` artifacts live in
 * Postgres (`artifact_data`, one bytea row per artifact, apart from the metadata so listing never reads them):
 * one store to back up and nothing else to run. Uploads and downloads go through URLs signed by tgs itself, so a
 * worker uploads exactly as it would to S3 (PUT to `putUrl`) and a reader follows a 303 as it would to S3.
 */
export type StorageType = 's3' | 'reference' | 'error';

export interface ArtifactRow {
  task_id: string;
  run_id: number;
  name: string;
  storage_type: StorageType;
  content_type: string;
  expires: Date;
  details: { url?: string; reason?: string; message?: string; contentLength?: number };
  present: boolean;
  /** sha256 of the uploaded bytes (migration 040), null until uploaded */
  sha256: Buffer | null;
}

export type CreateArtifactRequest =
  | { storageType: 's3'; contentType: string; expires: string }
  | { storageType: 'reference'; url: string; contentType?: string; expires: string }
  | { storageType: 'error'; reason: string; message: string; expires: string };

/** How long a signed upload or download URL is valid (Taskcluster's S3 put URLs: 30 min). */
export const SIGNED_URL_TTL_MS = 30 * 60 * 1000;
/** Taskcluster lets a worker still add artifacts (logs) for this long after a run resolved `exception`. */
const EXCEPTION_GRACE_MS = 25 * 60 * 1000;

export const ERROR_REASONS = ['file-missing-on-worker', 'invalid-resource-on-worker', 'too-large-file-on-worker'] as const;

export const artifactSummary = (a: ArtifactRow) => ({
  storageType: a.storage_type,
  name: a.name,
  expires: a.expires.toISOString(),
  contentType: a.content_type,
});

/** Encodes an artifact name for a URL path: each `/`-separated part percent-encoded, slashes kept. */
export const encodeArtifactName = (name: string) => name.split('/').map(encodeURIComponent).join('/');

function signingKey(issuerAccessToken: string): Buffer {
  // Derived from the issuer client's token, which every API process shares through Postgres.
  return createHash('sha256').update(`tgs-artifact-urls:${issuerAccessToken}`).digest();
}

function signature(key: Buffer, method: 'GET' | 'PUT', taskId: string, runId: number, name: string, expiresMs: number): string {
  return createHmac('sha256', key).update([method, taskId, runId, name, expiresMs].join('\n')).digest('base64url');
}

/** A URL served by tgs (`artifactData` endpoints) that allows one method on one artifact until it expires. */
export function signedArtifactUrl(
  config: Config,
  issuerAccessToken: string,
  method: 'GET' | 'PUT',
  a: { taskId: string; runId: number; name: string },
  now = Date.now(),
): { url: string; expires: Date } {
  const expiresMs = now + SIGNED_URL_TTL_MS;
  const sig = signature(signingKey(issuerAccessToken), method, a.taskId, a.runId, a.name, expiresMs);
  const url = `${config.rootUrl}/api/queue/v1/artifact-data/${a.taskId}/${a.runId}/${encodeArtifactName(a.name)}?expires=${expiresMs}&sig=${sig}`;
  return { url, expires: new Date(expiresMs) };
}

export function verifyArtifactSignature(
  issuerAccessToken: string,
  method: 'GET' | 'PUT',
  a: { taskId: string; runId: number; name: string },
  expiresMs: number,
  sig: string,
): void {
  if (!(expiresMs > Date.now())) throw new TgsError('AuthenticationFailed', 'This signed artifact URL has expired: ask the queue for a new one');
  const expected = Buffer.from(signature(signingKey(issuerAccessToken), method, a.taskId, a.runId, a.name, expiresMs));
  const given = Buffer.from(sig);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
    throw new TgsError('AuthenticationFailed', `This URL is not signed for ${method} of artifact ${a.name} of ${a.taskId}/${a.runId}`);
  }
}

function artifactCreatedMessage(config: Config, row: TaskRow, runId: number, artifact: ArtifactRow): OutboxMessage {
  const run = row.runs[runId];
  return {
    exchange: queueExchangeName(config.exchangePrefix, 'artifact-created'),
    ...taskRouting(row, runId, run),
    payload: {
      version: 1,
      status: taskStatus(row),
      artifact: artifactSummary(artifact),
      workerGroup: run.workerGroup,
      workerId: run.workerId,
      runId,
    },
    messageId: `${row.task_id}/${runId}/artifact-created/${artifact.name}`,
  };
}

const sameRequest = (existing: ArtifactRow, req: CreateArtifactRequest): boolean => {
  if (existing.storage_type !== req.storageType) return false;
  if (req.storageType === 's3') return existing.content_type === req.contentType;
  if (req.storageType === 'error') return existing.details.reason === req.reason && existing.details.message === req.message;
  return true; // a reference may be pointed elsewhere (Taskcluster allows updating its url)
};

/**
 * createArtifact, in the caller's transaction: the run must be running (or resolved `exception` within the
 * last 25 minutes, so a worker can still upload its logs), `expires` may not outlive the task, and a name
 * that exists may only be created again the same way (a new put URL for `s3`, a new url for `reference`).
 * The first creation of a name writes an `artifact-created` message.
 */
export async function createArtifact(
  client: pg.PoolClient,
  config: Config,
  a: { taskId: string; runId: number; name: string },
  req: CreateArtifactRequest,
  now = new Date(),
): Promise<ArtifactRow> {
  // FOR UPDATE: a concurrent report must not resolve the run between our check and our insert.
  const [row] = await loadTasks(client, [a.taskId], 'update');
  if (!row) throw new TgsError('ResourceNotFound', `task ${a.taskId} not found`);
  const run = row.runs[a.runId];
  if (!run) throw new TgsError('ResourceNotFound', `task ${a.taskId} has no run ${a.runId}`);
  const expires = new Date(req.expires);
  if (expires.getTime() > row.expires.getTime()) {
    throw new TgsError('InputError', `Artifact expires (${req.expires}) after the task does (${row.expires.toISOString()}): give it an earlier expires`);
  }
  const inGrace =
    run.state === 'exception' && run.workerGroup !== undefined && run.resolved !== undefined && now.getTime() - Date.parse(run.resolved) < EXCEPTION_GRACE_MS;
  if (run.state !== 'running' && !inGrace) {
    throw new TgsError('RequestConflict', `Run ${a.runId} of task ${a.taskId} is ${run.state}: artifacts can only be created while the run is running`);
  }
  const { rows: existingRows } = await client.query<ArtifactRow>(
    'SELECT * FROM artifacts WHERE task_id = $1 AND run_id = $2 AND name = $3',
    [a.taskId, a.runId, a.name],
  );
  const existing = existingRows[0];
  if (existing && !sameRequest(existing, req)) {
    throw new TgsError(
      'RequestConflict',
      `Artifact ${a.name} of ${a.taskId}/${a.runId} already exists as ${existing.storage_type} (${existing.content_type}${existing.details.reason ? `, ${existing.details.reason}` : ''}); it cannot be created again differently`,
    );
  }
  const contentType =
    req.storageType === 's3' ? req.contentType : req.storageType === 'reference' ? (req.contentType ?? 'application/octet-stream') : 'application/json';
  const details = req.storageType === 'reference' ? { url: req.url } : req.storageType === 'error' ? { reason: req.reason, message: req.message } : {};
  const { rows } = await client.query<ArtifactRow>(
    `INSERT INTO artifacts (task_id, run_id, name, storage_type, content_type, expires, details)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (task_id, run_id, name) DO UPDATE SET expires = EXCLUDED.expires, details = artifacts.details || EXCLUDED.details
     RETURNING *`,
    [a.taskId, a.runId, a.name, req.storageType, contentType, expires, JSON.stringify(details)],
  );
  if (!existing) await enqueueMessages(client, [artifactCreatedMessage(config, row, a.runId, rows[0])]);
  return rows[0];
}

/**
 * Rows of artifact_data are chunks of this size at most: an upload holds one chunk in memory at a time, and
 * each INSERT is one round trip per MiB (uploading 64 MiB locally: measured in test/security/uploads.test.ts).
 */
export const ARTIFACT_CHUNK_BYTES = 1024 * 1024;

/**
 * Streams uploaded bytes into artifact_data, in the caller's transaction (a re-upload replaces them: that is
 * how a live log grows). Nothing is visible until the transaction commits; a body over `maxBytes` or a client
 * that goes away rolls it all back.
 */
export async function storeArtifactData(
  client: pg.PoolClient,
  a: { taskId: string; runId: number; name: string },
  data: AsyncIterable<Buffer | string> | Iterable<Buffer | string>,
  maxBytes: number,
): Promise<number> {
  const key = [a.taskId, a.runId, a.name];
  const { rows } = await client.query<{ storage_type: string }>(
    'SELECT storage_type FROM artifacts WHERE task_id = $1 AND run_id = $2 AND name = $3 FOR UPDATE',
    key,
  );
  if (!rows[0]) throw new TgsError('ResourceNotFound', `Artifact ${a.name} of ${a.taskId}/${a.runId} does not exist (expired?): create it first`);
  if (rows[0].storage_type !== 's3') throw new TgsError('RequestConflict', `Artifact ${a.name} is a ${rows[0].storage_type} artifact: it takes no upload`);
  await client.query('DELETE FROM artifact_data WHERE task_id = $1 AND run_id = $2 AND name = $3', key);
  let seq = 0;
  let total = 0;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  // digested as it streams in, so the early cutoff compares runs' outputs without reading them again
  const sha256 = createHash('sha256');
  const flush = async (chunk: Buffer) => {
    await client.query('INSERT INTO artifact_data (task_id, run_id, name, seq, data) VALUES ($1, $2, $3, $4, $5)', [...key, seq, chunk]);
    seq += 1;
  };
  try {
    for await (const piece of data) {
      let buf = typeof piece === 'string' ? Buffer.from(piece) : piece;
      total += buf.length;
      sha256.update(buf);
      if (total > maxBytes) throw new TgsError('InputTooLarge', `The artifact is larger than this deployment accepts (TGS_MAX_ARTIFACT_BYTES=${maxBytes})`);
      while (pendingBytes + buf.length >= ARTIFACT_CHUNK_BYTES) {
        const take = ARTIFACT_CHUNK_BYTES - pendingBytes;
        pending.push(buf.subarray(0, take));
        buf = buf.subarray(take);
        await flush(Buffer.concat(pending));
        pending = [];
        pendingBytes = 0;
      }
      if (buf.length > 0) {
        pending.push(buf);
        pendingBytes += buf.length;
      }
    }
  } catch (err) {
    if (err instanceof TgsError) throw err;
    throw new TgsError('InputError', `The upload stopped before its end: ${(err as Error).message}`);
  }
  // An empty artifact is one empty chunk, so "uploaded" and "empty" stay distinguishable from "not uploaded".
  if (pendingBytes > 0 || seq === 0) await flush(Buffer.concat(pending));
  await client.query(
    `UPDATE artifacts SET present = true, sha256 = $5, details = details || jsonb_build_object('contentLength', $4::bigint)
     WHERE task_id = $1 AND run_id = $2 AND name = $3`,
    [...key, total, sha256.digest()],
  );
  return total;
}

/**
 * SQL: the (task_id, run_id) whose artifacts run $2 of task `t` ($1) has: its own, or for a run resolved from the
 * cache the source's (docs/formats.md § Cached tasks). Readers get the source's rows, so the source's expiry and
 * kind apply, and a download is signed for the source's artifact; the scope asked is the artifact's name either way.
 */
export const ARTIFACT_RUN = `SELECT COALESCE(t.runs -> $2::int -> 'cachedFrom' ->> 'taskId', t.runs -> $2::int -> 'keptFrom' ->> 'taskId', t.task_id) AS task_id,
         COALESCE((t.runs -> $2::int -> 'cachedFrom' ->> 'runId')::int, (t.runs -> $2::int -> 'keptFrom' ->> 'runId')::int, $2::int) AS run_id
    FROM tasks t WHERE t.task_id = $1`;

export async function loadArtifact(db: Queryable, a: { taskId: string; runId: number; name: string }): Promise<ArtifactRow> {
  const { rows } = await db.query<ArtifactRow>(
    `SELECT a.* FROM (${ARTIFACT_RUN}) s JOIN artifacts a ON a.task_id = s.task_id AND a.run_id = s.run_id AND a.name = $3`,
    [a.taskId, a.runId, a.name],
  );
  if (!rows[0]) throw new TgsError('ResourceNotFound', `Artifact ${a.name} of task ${a.taskId} run ${a.runId} not found`);
  return rows[0];
}

/** What a download serves: the length the upload recorded (none for bytes stored before it was), and the bytes. */
export interface ArtifactData {
  length: number | undefined;
  /** The stored chunks in order, each read from Postgres only when the reader takes the one before. */
  chunks: AsyncGenerator<Buffer>;
}

/**
 * The uploaded bytes of an artifact, streamed a 1 MiB chunk at a time with no connection held between chunks:
 * memory per download is a chunk, not the artifact (eight downloads of one 64 MiB artifact took the API from 128
 * to 996 MiB while each was read whole), and a slow reader holds no database connection. Each chunk is read
 * together with the artifact row's version (its xmin, which every upload's final UPDATE changes), so an upload
 * replacing the bytes mid-download ends that download with an error instead of mixing two versions.
 * undefined when nothing was uploaded.
 */
export async function openArtifactData(db: Queryable, a: { taskId: string; runId: number; name: string }): Promise<ArtifactData | undefined> {
  const key = [a.taskId, a.runId, a.name];
  const { rows } = await db.query<{ version: string; length: string | null; first: Buffer | null }>(
    `SELECT a.xmin::text AS version, a.details ->> 'contentLength' AS length,
            (SELECT d.data FROM artifact_data d WHERE d.task_id = $1 AND d.run_id = $2 AND d.name = $3 AND d.seq = 0) AS first
     FROM artifacts a WHERE a.task_id = $1 AND a.run_id = $2 AND a.name = $3`,
    key,
  );
  if (!rows[0]?.first) return undefined;
  const { version, length, first } = rows[0];
  const total = length === null ? undefined : Number(length);
  async function* chunks(): AsyncGenerator<Buffer> {
    let sent = (first as Buffer).length;
    yield first as Buffer;
    for (let seq = 1; ; seq++) {
      // Every byte the upload recorded is out: the reader has its whole answer and may already have sent its next
      // request on this connection. Reading on would fail the answer if an upload replaced the artifact since,
      // and closing the connection under that next request fails it too (a keep-alive client's "other side closed").
      if (total !== undefined && sent >= total) return;
      const next = await db.query<{ version: string | null; data: Buffer | null }>(
        `SELECT (SELECT a.xmin::text FROM artifacts a WHERE a.task_id = $1 AND a.run_id = $2 AND a.name = $3) AS version,
                (SELECT d.data FROM artifact_data d WHERE d.task_id = $1 AND d.run_id = $2 AND d.name = $3 AND d.seq = $4) AS data`,
        [...key, seq],
      );
      if (next.rows[0].version !== version) throw new Error(`artifact ${a.name} of ${a.taskId}/${a.runId} was uploaded again during the download`);
      if (!next.rows[0].data) return;
      sent += next.rows[0].data.length;
      yield next.rows[0].data;
    }
  }
  return { length: total, chunks: chunks() };
}

/**
 * Whether any artifact of the run expires before `until`: an artifact may be created with an `expires` earlier than its
 * task's (Taskcluster allows it), and the expiry sweep deletes it then, so reusing that run (a cache hit, an early
 * cutoff) would hand dependents an artifact that vanishes before they read it. One indexed probe of the run's artifacts.
 */
export async function artifactExpiresBefore(db: Queryable, taskId: string, runId: number, until: string | Date): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM artifacts WHERE task_id = $1 AND run_id = $2 AND expires < $3 LIMIT 1', [taskId, runId, until]);
  return rows.length > 0;
}

/** The latest run's id (Taskcluster's "latest" artifact endpoints); 404 when the task has no run. */
export async function latestRunId(db: Queryable, taskId: string): Promise<number> {
  const { rows } = await db.query<{ runs: number }>('SELECT jsonb_array_length(runs) AS runs FROM tasks WHERE task_id = $1', [taskId]);
  if (!rows[0]) throw new TgsError('ResourceNotFound', `task ${taskId} not found`);
  if (rows[0].runs === 0) throw new TgsError('ResourceNotFound', `task ${taskId} has no runs yet, so it has no artifacts`);
  return rows[0].runs - 1;
}

export async function listArtifacts(
  db: Queryable,
  taskId: string,
  runId: number,
  after: string,
  limit: number,
): Promise<ReturnType<typeof artifactSummary>[]> {
  const { rows: run } = await db.query<{ ok: boolean; task_id: string; run_id: number }>(
    `SELECT jsonb_array_length(t.runs) > $2 AS ok, s.task_id, s.run_id FROM tasks t, (${ARTIFACT_RUN}) s WHERE t.task_id = $1`,
    [taskId, runId],
  );
  if (!run[0]) throw new TgsError('ResourceNotFound', `task ${taskId} not found`);
  if (!run[0].ok) throw new TgsError('ResourceNotFound', `task ${taskId} has no run ${runId}`);
  const { rows } = await db.query<ArtifactRow>(
    'SELECT * FROM artifacts WHERE task_id = $1 AND run_id = $2 AND name > $3 ORDER BY name LIMIT $4',
    [run[0].task_id, run[0].run_id, after, limit],
  );
  return rows.map(artifactSummary);
}
