import { createHash } from 'node:crypto';
import { TgsError } from '../errors.js';
import { bindingsMatch } from './bindings.js';
import { fireHook, type FireEnv } from './fire.js';
import { fireIdKey, messageTaskId } from './fireTaskId.js';
import { checkTriggerPayload } from './triggerSchema.js';
import { getLastFire, listHooksBoundTo } from './store.js';

/** A message of the listener's queue, as the broker delivered it. */
export interface BoundMessage {
  exchange: string;
  routingKey: string;
  /** the message's CC routing keys (RabbitMQ keeps them in the `CC` header) */
  cc: string[];
  messageId?: string;
  content: Buffer;
}

export interface MessageFires {
  /** hooks whose task (or graph) this message created now */
  created: number;
  /** hooks whose fire for this message was recorded before (a redelivery): nothing done again */
  alreadyFired: number;
  /** hooks whose fire was refused (recorded as an error fire) or declined (the template rendered nothing) */
  refusedOrDeclined: number;
  /** hooks whose triggerSchema does not accept the message's payload: not fired (Taskcluster) */
  discarded: number;
  /** the body is not a JSON object: nothing fired */
  unparsable: boolean;
}

/**
 * The key a message is fired once per: its messageId (every tgs message has one, stable across redeliveries), else a
 * digest of where it came from and what it says (a message another publisher sent without one).
 */
export function messageKey(message: BoundMessage): string {
  if (message.messageId) return `id:${message.messageId}`;
  return `sha256:${createHash('sha256').update(JSON.stringify([message.exchange, message.routingKey])).update(message.content).digest('hex')}`;
}

/**
 * Fires every hook with a binding that takes the message (its exchange, and its routing key or a CC key matching the
 * binding's pattern, RabbitMQ's topic matching), as Taskcluster's hooks listener does: the context is
 * `{firedBy: 'pulseMessage', payload: <the message's body>}`, and a payload the hook's triggerSchema refuses fires
 * nothing. Once per (hook, message): the taskId is derived from the hook and the message's key, and a fire already
 * recorded under it (the task and its fire commit together, src/hooks/fire.ts) is not fired again, so a redelivered
 * message creates nothing new. Throws only when the fire could not be done or recorded (Postgres away): the caller
 * requeues the message then.
 */
export async function fireHooksForMessage(env: FireEnv, message: BoundMessage, now = new Date()): Promise<MessageFires> {
  const fires: MessageFires = { created: 0, alreadyFired: 0, refusedOrDeclined: 0, discarded: 0, unparsable: false };
  let payload: unknown;
  try {
    payload = JSON.parse(message.content.toString('utf8'));
  } catch {
    payload = undefined;
  }
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return { ...fires, unparsable: true };
  const key = messageKey(message);
  for (const hook of await listHooksBoundTo(env.pool, message.exchange)) {
    if (!bindingsMatch(hook.bindings, message.exchange, message.routingKey, message.cc)) continue;
    try {
      checkTriggerPayload(hook.triggerSchema, payload);
    } catch (err) {
      if (!(err instanceof TgsError)) throw err;
      fires.discarded++;
      continue;
    }
    const taskId = messageTaskId(await fireIdKey(env.pool), hook.hookGroupId, hook.hookId, key);
    if (await getLastFire(env.pool, hook.hookGroupId, hook.hookId, taskId)) {
      fires.alreadyFired++;
      continue;
    }
    const outcome = await fireHook(env, hook, { firedBy: 'pulseMessage', payload: payload as Record<string, unknown> }, { taskId, now });
    if (outcome.result === 'created') fires.created++;
    else if (outcome.result !== 'no-hook') fires.refusedOrDeclined++;
  }
  return fires;
}
