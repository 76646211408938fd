import { canonicalDigest } from '../canonicalJson.js';

/**
 * A task's fields an amend patches in place instead of rerunning the task (docs/formats.md § Amend): they change
 * when or how visibly it runs, never what it does. `created` is here because a generated graph file stamps it anew
 * each time; it is never patched.
 */
export const METADATA_FIELDS = ['created', 'deadline', 'expires', 'priority', 'routes', 'tags', 'metadata'] as const;

/**
 * A validated graph node's two digests: of the whole node (the version-2 graph hash's part) and of the node without
 * its task's metadata fields. Stored per node (migration 037) so an amend classifies each label.
 */
export function nodeDigests(node: { task: Record<string, unknown> }): { digest: Buffer; workDigest: Buffer } {
  const task: Record<string, unknown> = { ...node.task };
  for (const field of METADATA_FIELDS) delete task[field];
  return { digest: canonicalDigest(node), workDigest: canonicalDigest({ ...node, task }) };
}
