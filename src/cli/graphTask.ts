// One task of a graph named by taskId or label, as `tgs graph inspect` and `tgs task log <graph> <label>` take it.
import { TgsApiError, type GraphTask, type TgsClient } from '../client/tgsClient.js';
import { didYouMean } from './didYouMean.js';

/** One task of the graph by taskId or label; a label that is not the graph's gets the closest one it has. */
export async function inspectOne(client: TgsClient, taskGraphId: string, taskIdOrLabel: string): Promise<GraphTask> {
  try {
    return await client.inspect(taskGraphId, taskIdOrLabel);
  } catch (err) {
    if (!(err instanceof TgsApiError && err.status === 404)) throw err;
    const labels = await client.inspect(taskGraphId).then((tasks) => tasks.map((t) => t.label), () => undefined);
    if (!labels) throw err;
    throw new Error(`task-graph ${taskGraphId} has no task ${JSON.stringify(taskIdOrLabel)}${didYouMean(taskIdOrLabel, labels)}: tgs graph inspect ${taskGraphId} lists its labels`);
  }
}
