/**
 * The `tgs` package: `import { TgsClient } from 'tgs'`.
 *
 * TgsClient submits, extends, watches, reruns and cancels task-graphs and reads tasks and artifacts over HTTP
 * with Hawk; startShellWorker runs a `tgs shell-worker` inside a Node process; startTaskGraph starts a graph the
 * Temporal-native way, with a `@temporalio/client` Client.
 */
export {
  TgsClient,
  TgsApiError,
  GraphNotFinishedError,
  type TgsCredentials,
  type TaskGraph,
  type TaskGraphNode,
  type GraphState,
  type GraphStatus,
  type GraphInfo,
  type GraphTask,
  type SubmittedGraph,
  type GraphFile,
  type TaskState,
  type TaskStatus,
  type TaskRun,
  type ArtifactInfo,
  type ArtifactContent,
  type WaitOptions,
  type Resolution,
  type ResolutionResult,
  WorkerStream,
  type WorkerStreamOptions,
  type StreamClaim,
} from './client/tgsClient.js';
export { startShellWorker, type ShellWorker, type ShellWorkerOptions, type ShellPayload, type ArtifactSpec } from './shellWorker/index.js';
export {
  startTaskGraph,
  GraphTooLargeForTemporalError,
  TEMPORAL_PAYLOAD_LIMIT_BYTES,
  type StartTaskGraphOptions,
} from './temporal/startTaskGraph.js';
