/**
 * Queue task states: the union, their list, which are resolved, and their one-character codes in the compact
 * answers the workflow loads and the graph explorer reads. No imports at all: the server, the workflow bundle
 * (deterministic sandbox) and the browser bundle (src/ui) all import this one module.
 */

/** In the order of the graph explorer's numeric codes (src/ui/states.ts). */
export const TASK_STATES = ['unscheduled', 'pending', 'running', 'completed', 'failed', 'exception'] as const;
export type TaskState = (typeof TASK_STATES)[number];
/** The states a task leaves only by a rerun. */
export type ResolvedState = Extract<TaskState, 'completed' | 'failed' | 'exception'>;

export const isResolved = (state: string): state is ResolvedState =>
  state === 'completed' || state === 'failed' || state === 'exception';

/** One character per state in compact answers (node pages, the explorer's nodes and changes). */
export const TASK_STATE_CHAR: Record<TaskState, string> = {
  unscheduled: 'u',
  pending: 'p',
  running: 'r',
  completed: 'c',
  failed: 'f',
  exception: 'e',
};
/** The character for a node whose task does not exist (yet). */
export const MISSING_TASK_CHAR = '-';

const STATE_OF_CHAR = new Map(TASK_STATES.map((s) => [TASK_STATE_CHAR[s], s]));

/** The state a compact answer's character stands for; undefined for MISSING_TASK_CHAR (or anything else). */
export const taskStateOfChar = (ch: string): TaskState | undefined => STATE_OF_CHAR.get(ch);
