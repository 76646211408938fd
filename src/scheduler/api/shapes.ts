import type { JsonSchema } from '../../api/endpoint.js';
import { graphStatusSchema } from '../graphSchema.js';
import type { GraphRow } from '../graphStore.js';

export function graphStatus(row: GraphRow) {
  return { schedulerId: row.scheduler_id, taskGraphId: row.task_graph_id, state: row.state, routing: row.routing };
}

export const taskGraphResponseSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['status', 'tasks'],
  properties: {
    status: graphStatusSchema,
    tasks: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['label', 'taskId'],
        properties: { label: { type: 'string' }, taskId: { type: 'string' } },
      },
    },
  },
};

export const statusResponseSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['status'],
  properties: { status: graphStatusSchema },
};
