import { createHash } from 'node:crypto';

/**
 * The taskId of a hook's scheduled fire: derived from the hook and the schedule time, so every attempt at that fire
 * (an activity retried after a worker restart, a second worker) names the same task and creates it once. The
 * digest's first 16 bytes with a UUID v4's version and variant bits, as a slugid (22 characters of base64url).
 */
export function scheduledTaskId(hookGroupId: string, hookId: string, scheduledAt: Date): string {
  const bytes = createHash('sha256').update(JSON.stringify([hookGroupId, hookId, scheduledAt.toISOString()])).digest().subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  return bytes.toString('base64url');
}
