// The floor: the same hop done the bare way — a signal wakes a workflow that runs one activity doing one
// Postgres UPDATE. Nothing of tgs is involved.
import * as wf from '@temporalio/workflow';
import type { FloorActivities } from './activities.js';

const regular = wf.proxyActivities<FloorActivities>({ startToCloseTimeout: '10 seconds' });
const local = wf.proxyLocalActivities<FloorActivities>({ startToCloseTimeout: '10 seconds' });
export const hopSignal = wf.defineSignal<[number]>('hop');

export async function floorWorkflow(mode: 'regular' | 'local', hops: number): Promise<void> {
  const inbox: number[] = [];
  wf.setHandler(hopSignal, (n) => {
    inbox.push(n);
  });
  for (let done = 0; done < hops; done++) {
    await wf.condition(() => inbox.length > 0);
    const n = inbox.shift() as number;
    await (mode === 'local' ? local : regular).touch(n);
  }
}
