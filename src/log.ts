import pino, { type Logger } from 'pino';
import pinoPretty from 'pino-pretty';
import { logFormatFromEnv, logLevelFromEnv } from './config.js';
import { TurnBufferedDestination } from './logDestination.js';

/**
 * The processes' logs: one pino root logger per process, JSON lines on stdout (level, time, pid, role,
 * msg and fields such as taskId / taskGraphId / runId / reqId). Each part of a process logs through
 * `logger(role)`; `tgs dev` runs every part in one process, so its lines tell the parts apart by role.
 * CLI output meant for a person (tgs graph submit's progress, tgs task log, tgs dev's banner) is not
 * logging and stays plain text.
 */
export type { Logger } from 'pino';

export type LogFormat = 'json' | 'pretty';

let root: Logger | undefined;

function create(level: string, format: LogFormat, destination?: NodeJS.WritableStream): Logger {
  const options: pino.LoggerOptions = { level, timestamp: pino.stdTimeFunctions.isoTime };
  if (format === 'pretty') {
    // In-process and synchronous (no transport thread): lines keep their order with the banner's console output.
    // One line an event ("12:00:01.234 INFO: bridge: <msg> {fields}"): pino-pretty's default put each field on a line of
    // its own, 3-7 lines an event, ~8,500 lines for a 330-task graph on `tgs dev`.
    return pino(options, pinoPretty({
      sync: true, colorize: process.stdout.isTTY === true, destination: destination ?? 1, ignore: 'pid,hostname,role', translateTime: 'HH:MM:ss.l',
      singleLine: true, messageFormat: '{if role}{role}: {end}{msg}',
    }));
  }
  return pino(options, destination ?? new TurnBufferedDestination(pino.destination({ dest: 1, sync: true })));
}

/**
 * (Re)creates the root logger: level from TGS_LOG_LEVEL, format from TGS_LOG_FORMAT unless given (tgs dev
 * asks for pretty lines on a terminal). Loggers handed out before keep the old settings, so call it first.
 */
export function configureLogging(options: { level?: string; format?: LogFormat; destination?: NodeJS.WritableStream } = {}): Logger {
  root = create(options.level ?? logLevelFromEnv(), options.format ?? logFormatFromEnv() ?? 'json', options.destination);
  return root;
}

export function rootLogger(): Logger {
  return root ?? configureLogging();
}

/** The logger of one part of the process: every line carries `role`. */
export function logger(role: string): Logger {
  return rootLogger().child({ role });
}

/** `<taskId>/<runId>: ...`, how the shell worker starts the lines about one run. */
const RUN_LINE = /^([A-Za-z0-9_-]{22})\/(\d{1,3})\b/;

/** What a line is about, for code that logs through a `log(line, fields)` function. */
export interface LineFields {
  taskId?: string;
  runId?: number;
  taskGraphId?: string;
  [key: string]: unknown;
}

/** The shape of the `log` option of the relay, bridge, sweeps and shell worker. */
export type LineLog = (line: string, fields?: LineFields) => void;

/**
 * For code that takes a `log(line, fields?)` function (relay, bridge, sweeps, shell worker, dev server): each line
 * becomes a log line with the fields it names (`taskGraphId`, …); one that starts with `<taskId>/<runId>` gets
 * those as fields too.
 */
export function lineLogger(log: Logger, level: 'info' | 'warn' = 'info'): LineLog {
  return (line, fields) => {
    const run = RUN_LINE.exec(line);
    const all = run ? { taskId: run[1], runId: Number(run[2]), ...fields } : fields;
    if (all) log[level](all, line);
    else log[level](line);
  };
}
