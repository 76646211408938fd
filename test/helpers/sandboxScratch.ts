import { chmodSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * A scratch directory (0755) for a sandbox test file, with `work` inside it (0711) as the workers' --work-dir: per-run
 * uids must be able to enter the parent of their directories (mode user), and nothing more.
 */
export function sandboxScratch(prefix: string): { scratch: string; workDir: string } {
  const scratch = mkdtempSync(path.join(tmpdir(), prefix));
  chmodSync(scratch, 0o755);
  const workDir = path.join(scratch, 'work');
  mkdirSync(workDir, { mode: 0o711 });
  chmodSync(workDir, 0o711);
  return { scratch, workDir };
}
