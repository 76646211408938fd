import path from 'node:path';

/**
 * Where a task searches programs (Debian's default), whatever the worker's PATH: the worker's showed its npm cache
 * and checkout paths to every task (security review 2026-11-28, info 14).
 */
export const TASK_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin';

/** The worker's variables a task inherits, and only these: locale and time zone, never a credential. */
const INHERITED = ['LANG', 'LC_ALL', 'TZ'] as const;

export interface TaskEnvInput {
  taskId: string;
  runId: number;
  rootUrl: string;
  /** the task's directory: its working directory, HOME and TASK_WORKDIR */
  dir: string;
  /** its temporary directory (a private /tmp in a bwrap sandbox, a directory inside `dir` otherwise) */
  tmpDir: string;
  /** the account name the run has (USER, LOGNAME) */
  userName: string;
  /** payload.env, laid over everything else */
  payloadEnv: Record<string, string>;
  /** the worker's environment (a parameter so tests can give one) */
  workerEnv?: NodeJS.ProcessEnv;
}

/**
 * The whole environment of a task's command, built from an allowlist: a fixed base, the run's identifiers and
 * payload.env. Nothing else of the worker's environment reaches the task, whatever its name: a deployment puts
 * TEMPORAL_API_KEY, PGPASSWORD, cloud keys … in the worker's environment, and a denylist could never name them all.
 */
export function taskEnv(input: TaskEnvInput): Record<string, string> {
  const worker = input.workerEnv ?? process.env;
  const env: Record<string, string> = {};
  // `node` is always at hand for task commands (the one runtime tgs itself needs)
  env.PATH = [...new Set([path.dirname(process.execPath), ...TASK_PATH.split(path.delimiter)])].join(path.delimiter);
  for (const name of INHERITED) {
    const value = worker[name];
    if (value) env[name] = value;
  }
  Object.assign(env, {
    HOME: input.dir,
    USER: input.userName,
    LOGNAME: input.userName,
    TMPDIR: input.tmpDir,
    TASK_ID: input.taskId,
    RUN_ID: String(input.runId),
    TASK_WORKDIR: input.dir,
    TGS_ROOT_URL: input.rootUrl,
    TASKCLUSTER_ROOT_URL: input.rootUrl,
  });
  return { ...env, ...input.payloadEnv };
}
