import type { ClaimWaiter } from './claimWaiter.js';
import type { GroupAnnouncer } from './groupAnnouncer.js';
import type { WorkerRecorder } from './workers.js';
import type { WorkerStreams } from './workerStream/streams.js';
import type { TaskGroupOwner } from './taskGroupOwner.js';

// The queue's members of the API's deps (src/api/deps.ts), declared by the queue: the framework's ApiDeps is
// merged with these wherever this file is part of the program, which the composition root (src/processes/api.ts)
// makes sure of by importing it.

declare module '../api/deps.js' {
  interface ApiDeps {
    /** Wakes long-polling claimWork callers on LISTEN/NOTIFY. */
    claimWaiter: ClaimWaiter;
    /** Announces task groups whose last task a report resolved. */
    groupAnnouncer: GroupAnnouncer;
    /** Records the task queues and workers claimWork sees, in batches. */
    workers: WorkerRecorder;
    /** The worker streams open on this process (src/queue/workerStream/). */
    workerStreams: WorkerStreams;
    /** Whoever owns a task group (the scheduler, for a task-graph's): asked when a task joins it, or to reconcile it. */
    taskGroups: TaskGroupOwner;
  }
}
