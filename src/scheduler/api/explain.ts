import { lastAmend } from '../lastAmend.js';
import { declare } from '../../api/endpoint.js';
import { requireGraph } from '../graphStore.js';
import { explainGraph } from '../explainGraph.js';
import { reconcileNow } from '../reconcileNow.js';
import { explainQuery, workflowIdFor, type ExplainQueryResult } from '../../workflows/contract.js';
import { GET_TASK_GRAPH } from './shapes.js';
import { withinTime } from '../../withinTime.js';

/** How many sources the workflow's model lists for one explanation (the rest are counted). */
const MODEL_CAUSES = 5_000;

/**
 * How long an explanation waits for the workflow's answer before explaining from the queue's rows alone: a query is
 * answered by the scheduler worker within milliseconds while it holds the workflow, and an unreachable Temporal must
 * not hold the request (and its concurrency slot) for the client's own timeouts.
 */
const MODEL_WAIT_MS = 3000;


export const explainGraphEndpoint = declare({
  service: 'scheduler',
  name: 'explainTaskGraph',
  title: 'Explain Task-Graph (tgs extension)',
  description:
    'Why the graph has not finished: `{taskGraphId, state, asOf, summary, unresolved, rootCauses: [{kind, taskId?, label?, taskQueueId?, count, action}], …}`, ' +
    'the causes explaining most tasks first (at most `limit`, default 20), each unresolved task counted under one cause ' +
    '(docs/formats.md § Explanations). From the graph workflow\'s model (its `explain` query) and the queue\'s rows.',
  method: 'get',
  route: '/task-graph/<taskGraphId>/explain',
  scopes: GET_TASK_GRAPH,
  concurrency: 'graphReads',
  query: { limit: /^[1-9][0-9]{0,2}$/ },
  async handler({ params, query, deps }) {
    const row = await requireGraph(deps.pool, params.taskGraphId);
    await deps.workers.flush();
    // a workflow that is not running (yet, or any more), or a Temporal that does not answer: the rows alone explain
    const model: ExplainQueryResult | undefined =
      row.state === 'running' || row.state === 'blocked'
        ? await withinTime(
            deps.temporal.get().then((client) => client.workflow.getHandle(workflowIdFor(row.task_graph_id)).query(explainQuery, { limit: MODEL_CAUSES })),
            MODEL_WAIT_MS,
          ).catch(() => undefined)
        : undefined;
    const explanation = await explainGraph(deps.pool, row, model, { now: new Date(), claimWorkWaitMs: deps.config.claimWorkWaitMs, limit: Number(query.limit ?? 20), inconsistentAfterMs: deps.config.inconsistentAfterMs });
    if (explanation.reconciling) explanation.reconciling = await reconcileNow(deps, row.task_graph_id);
    const amended = await lastAmend(deps.pool, row.task_graph_id, Number(query.limit ?? 20));
    return { ...explanation, ...(amended ? { lastAmend: amended } : {}) };
  },
});
