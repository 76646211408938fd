// Queue task states: the one-character codes of the scheduler's compact answers, numeric codes for the GPU,
// and the colours of the legend and the drawing.

export const STATE_NAMES = ['unscheduled', 'pending', 'running', 'completed', 'failed', 'exception', 'missing'] as const;
export type StateName = (typeof STATE_NAMES)[number];
export const MISSING = 6;

const CHARS = 'uprcfe-';

export function stateCode(ch: string): number {
  const code = CHARS.indexOf(ch);
  return code < 0 ? MISSING : code;
}

export function stateCodeOfName(name: string): number {
  const code = STATE_NAMES.indexOf(name as StateName);
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
};

/** [r, g, b] in 0..1 for each state code, for the shaders. */
export function stateRgb(): number[] {
  return STATE_NAMES.flatMap((name) => {
    const hex = STATE_COLORS[name];
    return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255);
  });
}

/** True for states a task leaves only by a rerun. */
export const isResolved = (code: number) => code === 3 || code === 4 || code === 5;
