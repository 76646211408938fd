// What `tgs hook create|update` checks once the hook exists: that its template renders, and that the role its fires
// use grants what creating its task needs (a hook whose role has no scopes can never fire).
import type { TgsClient } from '../client/tgsClient.js';
import { renderHookTask, isGraph } from '../hooks/render.js';
import { unsatisfiedPart, type ScopeExpression } from '../auth/scopes.js';
import { createTaskScopes } from '../queue/createTaskScopes.js';

/** The scopes a grant needs to satisfy `expr`: every part of an AllOf; of an AnyOf its last (the task's own priority). */
function grantable(expr: ScopeExpression): string[] {
  if (typeof expr === 'string') return [expr];
  if ('AllOf' in expr) return expr.AllOf.flatMap(grantable);
  if ('AnyOf' in expr) return expr.AnyOf.length ? grantable(expr.AnyOf[expr.AnyOf.length - 1]) : [];
  return [];
}

/**
 * The warnings for a hook just written: its template rendered as a scheduled fire would render it, then the scopes
 * its task needs against those of the role `hook-id:<hookGroupId>/<hookId>`, with the `tgs role grant` that adds
 * what is missing.
 */
export async function hookWarnings(client: TgsClient, hookGroupId: string, hookId: string, template: Record<string, unknown>): Promise<string[]> {
  const now = new Date();
  let task: Record<string, unknown> | undefined;
  // the renderer's thread is unref'd and its time limit starts once the thread is up: until then nothing else keeps
  // this short-lived process alive (it exited with 13, a top-level await unsettled)
  const alive = setInterval(() => undefined, 1000);
  try {
    task = await renderHookTask(template, { firedBy: 'schedule', payload: {} }, 'AAAAAAAAQAAAAAAAAAAAAA', { now, firedAt: now }, `${hookGroupId}/${hookId}`);
  } catch (err) {
    return [
      `its task template does not render (as a scheduled fire would render it): ${(err as Error).message.split('\n')[0]}. ` +
        'The template is JSON-e: a shell variable `${VAR}` in it is read as a JSON-e expression; write `$${VAR}` to keep `${VAR}` for the shell (docs/formats.md § Hooks)',
    ];
  } finally {
    clearInterval(alive);
  }
  if (!task || isGraph(task) || typeof task.provisionerId !== 'string' || typeof task.workerType !== 'string') return [];
  const needed = createTaskScopes({
    scopes: Array.isArray(task.scopes) ? (task.scopes as string[]) : [],
    routes: Array.isArray(task.routes) ? (task.routes as string[]) : [],
    schedulerId: typeof task.schedulerId === 'string' ? task.schedulerId : '-',
    priority: typeof task.priority === 'string' ? task.priority : undefined,
    provisionerId: task.provisionerId,
    workerType: task.workerType,
  });
  const role = `hook-id:${hookGroupId}/${hookId}`;
  const { scopes } = await client.api.request<{ scopes: string[] }>('auth', 'POST', '/scopes/expand', { scopes: [`assume:${role}`] });
  const missing = unsatisfiedPart(scopes, needed);
  if (!missing) return [];
  const grant = grantable(missing);
  return [`its fires create their task with the scopes of the role ${role}, which lacks ${grant.join(', ')}: every fire would be refused. Grant them:\n  tgs role grant ${role} ${grant.join(' ')}`];
}
