// Queue task states (src/taskStates.ts) as the explorer draws them: numeric codes for the GPU, decoded from the
// one-character codes of the scheduler's compact answers, and the colours of the legend and the drawing.
import { isResolved as isResolvedState, MISSING_TASK_CHAR, TASK_STATE_CHAR, TASK_STATES } from '../taskStates.js';

/** The queue's states, then 'missing' (a node whose task does not exist yet); the index is the numeric code. */
export const STATE_NAMES = [...TASK_STATES, 'missing'] as const;
export type StateName = (typeof STATE_NAMES)[number];
export const MISSING = TASK_STATES.length;

const CHARS = TASK_STATES.map((s) => TASK_STATE_CHAR[s]).join('') + MISSING_TASK_CHAR;
const RESOLVED_CODES = STATE_NAMES.map(isResolvedState);

export function stateCode(ch: string): number {
  const code = CHARS.indexOf(ch);
  return code < 0 ? MISSING : code;
}

export const STATE_COLORS: Record<StateName, string> = {
  unscheduled: '#a3aab2',
  pending: '#f0b400',
  running: '#1a73e8',
  completed: '#1e8e3e',
  failed: '#d93025',
  exception: '#9334e6',
  missing: '#5f6368',
};

export const GRAPH_STATE_COLORS: Record<string, string> = {
  running: STATE_COLORS.running,
  blocked: STATE_COLORS.failed,
  finished: STATE_COLORS.completed,
  canceled: STATE_COLORS.exception,
  terminated: STATE_COLORS.missing,
};

/** [r, g, b] in 0..1 for each state code, for the shaders. */
export function stateRgb(): number[] {
  return STATE_NAMES.flatMap((name) => {
    const hex = STATE_COLORS[name];
    return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255);
  });
}

/** True for states a task leaves only by a rerun. */
export const isResolved = (code: number) => RESOLVED_CODES[code] === true;
