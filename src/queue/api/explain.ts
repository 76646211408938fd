import { declare } from '../../api/endpoint.js';
import { explainTask } from '../explainTask.js';
import { ReconcileThrottle } from '../reconcileThrottle.js';

/** This process's explanations signal a graph's workflow at most once every 10 s (src/queue/reconcileThrottle.ts). */
const reconcileSignals = new ReconcileThrottle();

export const explainTaskEndpoint = declare({
  service: 'queue',
  name: 'explainTask',
  title: 'Explain Task (tgs extension)',
  description:
    'Why the task is not running yet, computed from the queue\'s rows: `{taskId, state, asOf, summary, blockers: [{kind, …, action}]}` ' +
    '(docs/formats.md § Explanations). Blocker kinds: dependency, dependency-failed, graph-blocked, graph-canceled, ' +
    'deadline-passed, no-workers, workers-busy (with the queue position and an ETA), quarantined, deadline-at-risk, ' +
    'inconsistent (every requirement met but still unscheduled: the call asks the graph\'s workflow to reconcile, at most once every 10 s a graph).',
  method: 'get',
  route: '/task/<taskId>/explain',
  scopes: 'queue:status:<taskId>',
  async handler({ params, deps }) {
    // what claimWork saw in the last 2 s is in memory until the recorder writes it
    await deps.workers.flush();
    const explanation = await explainTask(deps.pool, params.taskId, new Date(), deps.config.claimWorkWaitMs, deps.config.inconsistentAfterMs);
    const inconsistent = explanation.taskGraphId && explanation.blockers.some((b) => b.kind === 'inconsistent');
    if (inconsistent && reconcileSignals.take(explanation.taskGraphId as string)) await deps.taskGroups.reconcile(explanation.taskGraphId as string);
    return explanation;
  },
});
