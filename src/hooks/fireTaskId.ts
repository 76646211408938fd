import { createHash } from 'node:crypto';

/**
 * The taskIds of fires that may be attempted more than once: derived from what the fire stands for, so every attempt
 * (an activity retried after a worker restart, a second worker, a redelivered message) names the same task and
 * creates it once. The digest's first 16 bytes with a UUID v4's version and variant bits, as a slugid (22 characters
 * of base64url).
 */
function derivedTaskId(parts: string[]): string {
  const bytes = createHash('sha256').update(JSON.stringify(parts)).digest().subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  return bytes.toString('base64url');
}

/** A scheduled fire's taskId: the hook and the schedule time. */
export function scheduledTaskId(hookGroupId: string, hookId: string, scheduledAt: Date): string {
  return derivedTaskId([hookGroupId, hookId, scheduledAt.toISOString()]);
}

/** A binding's fire's taskId: the hook and the message's key (src/hooks/messageFire.ts). Never a scheduled fire's. */
export function messageTaskId(hookGroupId: string, hookId: string, messageKey: string): string {
  return derivedTaskId([hookGroupId, hookId, 'message', messageKey]);
}
