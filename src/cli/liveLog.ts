// Reading a run's public/logs/live.log for `tgs task log` and `tgs graph logs`.
import { TgsApiError, type TgsClient } from '../client/tgsClient.js';
import { LIVE_LOG } from '../queue/liveLogName.js';

/** The live log of a run, or undefined while nothing has been uploaded yet. */
export async function readLog(client: TgsClient, taskId: string, run: number): Promise<Buffer | undefined> {
  try {
    return (await client.artifact(taskId, LIVE_LOG, { runId: run })).data;
  } catch (err) {
    if (err instanceof TgsApiError && err.status === 404) return undefined;
    throw err;
  }
}
