import { canonicalDigest } from '../canonicalJson.js';
import { METADATA_FIELDS } from './metadataFields.js';

/**
 * A validated graph node's two digests: of the whole node (the version-2 graph hash's part) and of the node without
 * its task's metadata fields. Stored per node (migration 037) so an amend classifies each label.
 */
export function nodeDigests(node: { task: Record<string, unknown> }): { digest: Buffer; workDigest: Buffer } {
  const task: Record<string, unknown> = { ...node.task };
  for (const field of METADATA_FIELDS) delete task[field];
  return { digest: canonicalDigest(node), workDigest: canonicalDigest({ ...node, task }) };
}
