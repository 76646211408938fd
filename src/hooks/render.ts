import slugid from 'slugid';
import { TgsError } from '../errors.js';
import { RenderBusyError, renderBounded, RenderLimitError } from './boundedJsone.js';

/**
 * What a hook's `task` template is rendered with (Taskcluster's "firing hooks"): `firedBy`, `taskId`, `now` (the
 * time the fire stands for, ISO 8601: a scheduled fire's is its schedule time, a backfilled one's included), and
 * for a trigger its `payload`, for an authenticated trigger the caller's `clientId`.
 */
export interface FireContext {
  firedBy: string;
  payload?: Record<string, unknown>;
  clientId?: string;
}

const DAY_MS = 24 * 3600 * 1000;

/**
 * Renders the template as Taskcluster does: the JSON-e result, then `created` (when the fire happens), `deadline` (a
 * day later), `expires` (a month later: 30 days, as Taskcluster's `fromNow('1 month')`) and `taskGroupId` (the task's
 * own id, a decision task's convention) filled in where the template leaves them unset (or empty). `now` is the time
 * the fire stands for: a trigger's is `firedAt`, a scheduled fire's its schedule time, which for a backfill or a fire
 * delayed by an outage is past — while the queue takes only a task `created` within 15 minutes of the present, so the
 * defaults count from `firedAt`. Undefined when the template renders to nothing (`$if` false): the hook declines to
 * fire. A template error throws (json-e's message); so does a render past its bounds (src/hooks/boundedJsone.ts).
 */
export async function renderHookTask(
  template: Record<string, unknown>,
  context: FireContext,
  taskId: string,
  times: { now: Date; firedAt: Date },
  /** the hook (`<hookGroupId>/<hookId>`): one render of it at a time (src/hooks/boundedJsone.ts) */
  hookKey: string,
): Promise<Record<string, unknown> | undefined> {
  const { now, firedAt } = times;
  const rendered: unknown = await renderBounded(template, { ...context, taskId, now: now.toISOString() }, hookKey);
  if (rendered === null || rendered === undefined) return undefined;
  if (typeof rendered !== 'object' || Array.isArray(rendered)) {
    throw new Error(`the hook's task template rendered to ${Array.isArray(rendered) ? 'an array' : typeof rendered}, not a task definition object`);
  }
  const task = rendered as Record<string, unknown>;
  if (isGraph(task)) {
    // a task-graph (tgs's extension): each node's task gets the defaults; the graph's id is its task group
    for (const node of Object.values(task.tasks as Record<string, unknown>)) {
      const nodeTask = (node as { task?: unknown } | null)?.task;
      if (nodeTask !== null && typeof nodeTask === 'object' && !Array.isArray(nodeTask)) fillTimes(nodeTask as Record<string, unknown>, firedAt);
    }
    return task;
  }
  fillTimes(task, firedAt);
  if (!task.taskGroupId) task.taskGroupId = taskId;
  return task;
}

/**
 * A rendered template with a `tasks` object is a task-graph in the format of docs/formats.md (tgs's extension): the
 * hook fires the whole graph, whose taskGraphId is the fire's taskId.
 */
export function isGraph(rendered: Record<string, unknown>): boolean {
  return rendered.tasks !== null && typeof rendered.tasks === 'object' && !Array.isArray(rendered.tasks);
}

function fillTimes(task: Record<string, unknown>, firedAt: Date): void {
  if (!task.created) task.created = firedAt.toISOString();
  if (!task.deadline) task.deadline = new Date(firedAt.getTime() + DAY_MS).toISOString();
  if (!task.expires) task.expires = new Date(firedAt.getTime() + 30 * DAY_MS).toISOString();
}

/**
 * Refuses (400) a template whose render exceeds the bounds (src/hooks/boundedJsone.ts) when the hook is written,
 * rendered as a trigger with an empty payload renders it. Only the bounds are judged: a template error with this
 * context may not be one with a real payload, and a fire past the bounds with its own payload is still refused and
 * recorded as a failed fire.
 */
export async function checkTemplateBounds(template: Record<string, unknown>, hookKey: string): Promise<void> {
  try {
    await renderBounded(template, { firedBy: 'triggerHook', payload: {}, taskId: slugid.nice(), now: new Date().toISOString() }, hookKey);
  } catch (err) {
    if (err instanceof RenderBusyError) throw new TgsError('TooManyRequests', `The hook's task template could not be checked now: ${err.message}; try again in a moment`);
    if (err instanceof RenderLimitError) throw new TgsError('InputError', `The hook's task template is refused: ${err.message}`);
  }
}
