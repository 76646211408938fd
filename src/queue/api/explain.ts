import { declare } from '../../api/endpoint.js';
import { explainTask } from '../explainTask.js';

export const explainTaskEndpoint = declare({
  service: 'queue',
  name: 'explainTask',
  title: 'Explain Task (tgs extension)',
  description:
    'Why the task is not running yet, computed from the queue\'s rows: `{taskId, state, asOf, summary, blockers: [{kind, …, action}]}` ' +
    '(docs/formats.md § Explanations). Blocker kinds: dependency, dependency-failed, graph-blocked, graph-canceled, ' +
    'deadline-passed, no-workers, workers-busy (with the queue position and an ETA), quarantined, deadline-at-risk, ' +
    'inconsistent (every requirement met but still unscheduled: the call asks the graph\'s workflow to reconcile).',
  method: 'get',
  route: '/task/<taskId>/explain',
  scopes: 'queue:status:<taskId>',
  async handler({ params, deps }) {
    // what claimWork saw in the last 2 s is in memory until the recorder writes it
    await deps.workers.flush();
    const explanation = await explainTask(deps.pool, params.taskId, new Date(), deps.config.claimWorkWaitMs, deps.config.inconsistentAfterMs);
    if (explanation.taskGraphId && explanation.blockers.some((b) => b.kind === 'inconsistent')) await deps.taskGroups.reconcile(explanation.taskGraphId);
    return explanation;
  },
});
