import { createHmac } from 'node:crypto';
import { hookFireKeyOf } from '../db/deployment.js';

/**
 * The taskIds of fires that may be attempted more than once: derived from what the fire stands for, so every attempt
 * (an activity retried after a worker restart, a second worker, a redelivered message) names the same task and
 * creates it once. An HMAC-SHA256 keyed by the deployment's secret `hook_fire_key` (migration 036): a plain digest of
 * public data (hook, schedule time, messageId) let anyone compute a fire's id ahead of it and take the id first, and a
 * graph hook then counted the squatter's graph as its fire (security review 2026-11-28, finding 3). The digest's first
 * 16 bytes with a UUID v4's version and variant bits, as a slugid (22 characters of base64url).
 */
function derivedTaskId(key: string, parts: string[]): string {
  const bytes = createHmac('sha256', key).update(JSON.stringify(parts)).digest().subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  return bytes.toString('base64url');
}

/** The deployment's fire-id key (migration 036), read once per pool. */
export const fireIdKey = hookFireKeyOf;

/** A scheduled fire's taskId: the hook and the schedule time. */
export function scheduledTaskId(key: string, hookGroupId: string, hookId: string, scheduledAt: Date): string {
  return derivedTaskId(key, [hookGroupId, hookId, scheduledAt.toISOString()]);
}

/** A binding's fire's taskId: the hook and the message's key (src/hooks/messageFire.ts). Never a scheduled fire's. */
export function messageTaskId(key: string, hookGroupId: string, hookId: string, messageKey: string): string {
  return derivedTaskId(key, [hookGroupId, hookId, 'message', messageKey]);
}
