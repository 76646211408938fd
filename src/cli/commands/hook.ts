import { readNamedFile } from '../graphFile.js';
import type { Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { requireCredentials, resolveCredentials, type ResolvedCredentials } from '../../client/credentials.js';
import { DurationError, parseDuration } from '../../duration.js';
import { pastTime } from '../pastTime.js';
import { withClient } from '../withClient.js';
import { hookWarnings } from '../hookCheck.js';

/**
 * `tgs hook …`: the Hooks service (docs/formats.md § Hooks) — hooks created from a file, listed, shown, triggered,
 * their fires listed, and tgs's schedule extensions: pause, unpause, policy, backfill.
 */

/** `<hookGroupId>/<hookId>`: the group is up to the first `/` (a hookId may hold more). */
function hookPath(ref: string): string {
  const slash = ref.indexOf('/');
  if (slash <= 0 || slash === ref.length - 1) throw new Error(`${JSON.stringify(ref)}: name a hook as <hookGroupId>/<hookId>, e.g. nightly/build`);
  return `/hooks/${encodeURIComponent(ref.slice(0, slash))}/${encodeURIComponent(ref.slice(slash + 1))}`;
}

/** A hook definition file: JSON, or YAML for .yml/.yaml. */
function readHookFile(file: string): Record<string, unknown> {
  const text = readNamedFile(file);
  let value: unknown;
  try {
    value = /\.ya?ml$/i.test(file) ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw new Error(`${file} is not valid ${/\.ya?ml$/i.test(file) ? 'YAML' : 'JSON'}: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value) || typeof (value as { task?: unknown }).task !== 'object') {
    throw new Error(`${file} must hold a hook: {"metadata": {...}, "schedule": [...], "task": {...}} (docs/formats.md § Hooks)`);
  }
  return value as Record<string, unknown>;
}

/** A fire's error as text: the API records it as JSON ({code, statusCode, message}); its message, lines and all. */
function fireError(recorded: string): string {
  try {
    const e = JSON.parse(recorded) as { code?: string; message?: string };
    if (typeof e.message === 'string') return `${e.code ? `${e.code}: ` : ''}${e.message}`.trimEnd();
  } catch {
    // not JSON: shown as it is
  }
  return recorded.trimEnd();
}

const call = <T = any>(resolved: ResolvedCredentials, method: string, path: string, body?: unknown) =>
  withClient(resolved, (c) => c.api.request<T>('hooks', method, path, body));

interface ScheduleView {
  schedule: string[];
  paused: boolean;
  overlap: string;
  catchupWindowSeconds: number;
  nextScheduledDates?: string[];
}

function showSchedule(view: ScheduleView): void {
  console.log(`schedule        ${view.schedule.length ? view.schedule.join(', ') : '(none: fired by triggers only)'}`);
  if (view.schedule.length === 0) return;
  console.log(`paused          ${view.paused ? 'yes' : 'no'}`);
  console.log(`overlap         ${view.overlap}`);
  console.log(`catch-up window ${view.catchupWindowSeconds} s`);
  if (view.nextScheduledDates?.length) console.log(`next fires      ${view.nextScheduledDates.slice(0, 3).join(', ')}`);
}

export function registerHookCommand(program: Command): void {
  const hook = program
    .command('hook')
    .description('manage hooks (tasks fired on a schedule or a trigger) through the hooks API; uses TGS_ROOT_URL, TGS_CLIENT_ID, TGS_ACCESS_TOKEN');

  hook
    .command('list [hookGroupId]')
    .description('the hook groups, or the hooks of a group with their schedules')
    .action(async (group?: string) => {
      const resolved = resolveCredentials();
      if (!group) {
        for (const g of (await call<{ groups: string[] }>(resolved, 'GET', '/hooks')).groups) console.log(g);
        return;
      }
      const { hooks } = await call<{ hooks: { hookId: string; schedule: string[]; metadata: { name: string } }[] }>(resolved, 'GET', `/hooks/${encodeURIComponent(group)}`);
      for (const h of hooks) console.log(`${group}/${h.hookId}  ${h.schedule.length ? h.schedule.join(', ') : '-'}  ${h.metadata.name}`);
    });

  hook
    .command('show <hook>')
    .description('a hook\'s definition and its schedule (paused, policy, next fires)')
    .option('--json', 'print the definition as JSON')
    .action(async (ref: string, opts: { json?: boolean }) => {
      const resolved = resolveCredentials();
      const definition = await call(resolved, 'GET', hookPath(ref));
      if (opts.json) {
        console.log(JSON.stringify(definition, null, 2));
        return;
      }
      console.log(`hook            ${ref}`);
      console.log(`name            ${definition.metadata.name}`);
      console.log(`owner           ${definition.metadata.owner}`);
      showSchedule(await call<ScheduleView>(resolved, 'GET', `${hookPath(ref)}/schedule`));
    });

  for (const [verb, method, what] of [['create', 'PUT', 'create a hook'], ['update', 'POST', 'replace a hook\'s definition']] as const) {
    hook
      .command(`${verb} <hook> <file>`)
      .description(`${what} from a file (JSON or YAML: metadata, schedule, task, triggerSchema; docs/formats.md § Hooks)`)
      .action(async (ref: string, file: string) => {
        const resolved = requireCredentials();
        const definition = readHookFile(file);
        await call(resolved, method, hookPath(ref), definition);
        console.log(`hook ${ref} ${verb}d`);
        showSchedule(await call<ScheduleView>(resolved, 'GET', `${hookPath(ref)}/schedule`));
        const slash = ref.indexOf('/');
        // best effort: a client that may not expand scopes still created the hook
        const warnings = await withClient(resolved, (c) => hookWarnings(c, ref.slice(0, slash), ref.slice(slash + 1), definition.task as Record<string, unknown>)).catch(
          (err: unknown) => [`its role's scopes could not be checked: ${(err as Error).message.split('\n')[0]}`],
        );
        for (const w of warnings) console.error(`tgs: warning: ${w}`);
      });
  }

  hook
    .command('remove <hook>')
    .description('delete a hook, its fires and its schedule')
    .action(async (ref: string) => {
      await call(requireCredentials(), 'DELETE', hookPath(ref));
      console.log(`hook ${ref} removed`);
    });

  hook
    .command('trigger <hook>')
    .description('fire a hook now; its task is created with the role hook-id:<hookGroupId>/<hookId>\'s scopes')
    .option('-p, --payload <json>', 'the trigger payload (JSON object, checked against the hook\'s triggerSchema)', '{}')
    .action(async (ref: string, opts: { payload: string }) => {
      let payload: unknown;
      try {
        payload = JSON.parse(opts.payload);
      } catch (err) {
        throw new Error(`--payload is not JSON: ${(err as Error).message}`);
      }
      const fired = await call<{ taskId?: string }>(requireCredentials(), 'POST', `${hookPath(ref)}/trigger`, payload);
      console.log(fired.taskId ? `created task ${fired.taskId}` : 'the hook\'s template rendered no task: nothing created');
    });

  hook
    .command('fires <hook>')
    .description('the hook\'s recent fires, newest first: time, who fired it, the task and its state, or the error')
    .option('-n, --limit <n>', 'how many', '20')
    .action(async (ref: string, opts: { limit: string }) => {
      const { lastFires } = await call<{ lastFires: { taskCreateTime: string; firedBy: string; taskId: string; result: string; taskState: string; error: string }[] }>(
        resolveCredentials(),
        'GET',
        `${hookPath(ref)}/last-fires?limit=${encodeURIComponent(opts.limit)}`,
      );
      for (const f of lastFires) {
        console.log(`${f.taskCreateTime}  ${f.firedBy.padEnd(20)}  ${f.taskId}  ${f.result === 'success' ? f.taskState : 'error:'}`);
        if (f.result !== 'success') console.log(fireError(f.error).replace(/^/gm, '    '));
      }
    });

  for (const verb of ['pause', 'unpause'] as const) {
    hook
      .command(`${verb} <hook>`)
      .description(verb === 'pause' ? 'stop the hook\'s scheduled fires (triggers still fire)' : 'resume the hook\'s scheduled fires')
      .action(async (ref: string) => {
        showSchedule(await call<ScheduleView>(requireCredentials(), 'POST', `${hookPath(ref)}/${verb}`));
      });
  }

  hook
    .command('policy <hook>')
    .description('set how the hook\'s schedule handles overlapping fires and fires missed during an outage')
    .option('--overlap <policy>', 'SKIP, BUFFER_ONE, BUFFER_ALL, CANCEL_OTHER, TERMINATE_OTHER or ALLOW_ALL (default)')
    .option('--catchup-window <duration>', 'how old a missed schedule time may be and still fire (e.g. 10m, 1d; at least 10 s)')
    .action(async (ref: string, opts: { overlap?: string; catchupWindow?: string }) => {
      const body: Record<string, unknown> = {};
      if (opts.overlap) body.overlap = opts.overlap.toUpperCase();
      if (opts.catchupWindow) {
        try {
          body.catchupWindowSeconds = Math.round(parseDuration(opts.catchupWindow) / 1000);
        } catch (err) {
          if (!(err instanceof DurationError)) throw err;
          throw new Error(`--catchup-window ${JSON.stringify(opts.catchupWindow)}: give a duration (10m, 1d)`);
        }
      }
      showSchedule(await call<ScheduleView>(requireCredentials(), 'PUT', `${hookPath(ref)}/schedule-policy`, body));
    });

  hook
    .command('backfill <hook>')
    .description('fire the hook once for every schedule time in a past range, each with `now` set to that time')
    .requiredOption('--from <when>', 'start: a date or a duration ago (3d)')
    .option('--to <when>', 'end: a date or a duration ago (default now)', '0s')
    .action(async (ref: string, opts: { from: string; to: string }) => {
      const body = { start: pastTime(opts.from, '--from'), end: pastTime(opts.to, '--to') };
      await call(requireCredentials(), 'POST', `${hookPath(ref)}/backfill`, body);
      console.log(`backfilling ${ref} from ${body.start} to ${body.end}; its fires follow within seconds (tgs hook fires ${ref})`);
    });
}
