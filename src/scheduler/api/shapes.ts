import { Readable } from 'node:stream';
import { RawReply, type JsonSchema } from '../../api/endpoint.js';
import type { LabelledTask } from '../graphIntake.js';
import { graphStatusSchema } from '../graphSchema.js';
import type { GraphRow } from '../graphStore.js';

/**
 * The scope of every read of one graph (status, info, inspect, nodes, changes), as Taskcluster names a read of
 * one resource. The `anonymous` role grants it for every graph by default (migration 023).
 */
export const GET_TASK_GRAPH = 'scheduler:get-task-graph:<taskGraphId>';

export function graphStatus(row: GraphRow) {
  return { schedulerId: row.scheduler_id, taskGraphId: row.task_graph_id, state: row.state, routing: row.routing };
}

/**
 * A create's or extend's answer (taskGraphResponseSchema), written a page of tasks at a time as the client reads
 * it: the labels and taskIds of a 300,000-task graph (16 MB of JSON) are never one string or one array of objects.
 */
export function graphTasksReply(row: GraphRow, tasks: Iterable<LabelledTask[]> | AsyncIterable<LabelledTask[]>): RawReply {
  async function* text() {
    yield `{"status":${JSON.stringify(graphStatus(row))},"tasks":[`;
    let first = true;
    for await (const page of tasks) {
      if (page.length === 0) continue;
      yield `${first ? '' : ','}${page.map((t) => `{"label":${JSON.stringify(t.label)},"taskId":${JSON.stringify(t.taskId)}}`).join(',')}`;
      first = false;
    }
    yield ']}';
  }
  return new RawReply(200, { 'content-type': 'application/json' }, Readable.from(text()));
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
