/**
 * What bench/scenarios/peer.ts and the peer's process (bench/peer/graphileWorker.ts) say to each other over IPC.
 *
 * The modes: `default` (graphile-worker as installed), `batched` (its documented fast mode: `localQueue.size` 500 and
 * completions batched), and each with `-equal`: the same with the writes tgs makes a task beside its claim and report
 * (an event row a state change, the completed job kept).
 */
export const PEER_MODES = ['default', 'batched', 'default-equal', 'batched-equal'] as const;
export type PeerMode = (typeof PEER_MODES)[number];

export type PeerRequest =
  | { type: 'prepare'; mode: PeerMode; jobs: number; concurrency: number }
  | { type: 'go' }
  | { type: 'exit' };

export type PeerReply =
  | { type: 'started' }
  | { type: 'ready' }
  | { type: 'done'; seconds: number; executed: number }
  | { type: 'error'; message: string };
