import type { Queryable } from '../db/pool.js';
import { ARTIFACT_RUN } from './artifacts.js';

/**
 * A run's outputs as the early cutoff compares them (docs/formats.md § Early cutoff): its artifacts, read where the
 * run's readers read them (a cache hit's or kept run's source), but for its logs: names under `public/logs/` carry
 * timestamps and worker names, so two runs that produced the same files never have equal logs.
 */
export const LOG_PREFIX = 'public/logs/';

interface OutputRow {
  name: string;
  storage_type: string;
  content_type: string;
  present: boolean;
  sha256: string | null;
  details: { url?: string; reason?: string; message?: string };
}

/** What an output compares by: its kind, content type, and its bytes' digest, url, or error. */
function fingerprint(r: OutputRow): string | undefined {
  if (r.storage_type === 's3') return r.present && r.sha256 ? `s3 ${r.content_type} ${r.sha256}` : undefined;
  if (r.storage_type === 'reference') return `reference ${r.content_type} ${r.details.url ?? ''}`;
  return `error ${r.details.reason ?? ''} ${r.details.message ?? ''}`;
}

/** The outputs of run `runId` of `taskId`: name → fingerprint (undefined where it cannot be compared). */
export async function runOutputs(db: Queryable, taskId: string, runId: number): Promise<Map<string, string | undefined>> {
  const { rows } = await db.query<OutputRow>(
    `SELECT a.name, a.storage_type, a.content_type, a.present, encode(a.sha256, 'hex') AS sha256, a.details
       FROM (${ARTIFACT_RUN}) s JOIN artifacts a ON a.task_id = s.task_id AND a.run_id = s.run_id
      WHERE NOT starts_with(a.name, '${LOG_PREFIX}')`,
    [taskId, runId],
  );
  return new Map(rows.map((r) => [r.name, fingerprint(r)]));
}

/**
 * How two runs' outputs differ: the names added, removed, changed, or that cannot be compared (an upload that never
 * finished, bytes stored before digests were kept); empty when they are the same.
 */
export function outputDifferences(before: Map<string, string | undefined>, after: Map<string, string | undefined>): string[] {
  const names = new Set([...before.keys(), ...after.keys()]);
  return [...names].filter((n) => before.get(n) === undefined || before.get(n) !== after.get(n)).sort();
}
