import { Readable } from 'node:stream';
import { declare, RawReply } from '../../api/endpoint.js';
import { openGraphFile } from '../graphFile.js';
import { GET_TASK_GRAPH } from './shapes.js';

export const graphFileEndpoint = declare({
  service: 'scheduler',
  name: 'taskGraphFile',
  title: 'Task-Graph File (tgs extension)',
  description: [
    "The graph's current file, to edit and send to amendTaskGraph (docs/formats.md § The graph's current file): `tasks` holds every member",
    'node as it was submitted, extended or last amended (`requires`, `reruns`, `cache`, `task` with its `$subs`), in node',
    'order; `missing` names the members stored before tgs kept their nodes (migration 041), which the file cannot give',
    'back: amend with your own file then. 409 for a task group with queue-level dependencies (it has no graph file).',
  ].join(' '),
  method: 'get',
  route: '/task-graph/<taskGraphId>/file',
  scopes: GET_TASK_GRAPH,
  // a page of nodes at a time, each read and written out in one transaction held while the reader reads
  concurrency: 'graphNodes',
  output: {
    type: 'object',
    additionalProperties: false,
    required: ['taskGraphId', 'tasks', 'missing'],
    properties: {
      taskGraphId: { type: 'string' },
      tasks: { type: 'object', additionalProperties: { type: 'object' }, description: 'the nodes by label, in node order (docs/formats.md § Task-graph format)' },
      missing: { type: 'array', items: { type: 'string' }, description: 'labels of members whose node was stored before migration 041' },
    },
  },
  async handler({ params, deps }) {
    const text = await openGraphFile(deps.pool, params.taskGraphId);
    return new RawReply(200, { 'content-type': 'application/json' }, Readable.from(text));
  },
});
