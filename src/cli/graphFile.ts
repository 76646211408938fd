// A task-graph file as `tgs graph submit`/`extend`/`amend` and `tgs dev` read it from disk; its text and the defaults
// the CLI fills in are src/client/graphFileText.ts's, which the web UI shares.
import { readFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { parseGraphText } from '../client/graphFileText.js';

export { fromNow, mergeDefaults, withTaskDefaults } from '../client/graphFileText.js';

/** A file the user named, as text; an error that says which file and why it cannot be read. */
export function readNamedFile(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
}

/** Reads a graph (or extension) file: JSON, or YAML for .yml/.yaml (and anything that is not JSON), its `defaults` applied. */
export function readGraphFile(file: string): Record<string, unknown> {
  return parseGraphText(readNamedFile(file), file);
}

/** Who a graph's tasks name as owner when the file does not say: the local user at this host. */
export function defaultOwner(): string {
  try {
    return `${userInfo().username}@${hostname()}`;
  } catch {
    return 'tgs-cli';
  }
}
