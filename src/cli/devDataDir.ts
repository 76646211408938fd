import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { generateAccessToken } from '../auth/clients.js';

/** What marks a directory as a tgs dev data directory (safe to tighten). */
const MARKERS = ['root-access-token', 'pglite', 'temporal.db', 'dev.lock'];

/**
 * Creates `tgs dev`'s data directory owner-only (0700): it holds the root access token and the whole database, and
 * tasks of `tgs shell-worker` run as other users must not read them. An existing tgs data directory left open by
 * an older tgs is tightened; any other existing directory (`--data-dir .`) is left alone, with a warning.
 */
export function prepareDataDir(dataDir: string, warn: (line: string) => void = (l) => console.error(l)): void {
  const existed = existsSync(dataDir);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const mode = statSync(dataDir).mode & 0o777;
  if ((mode & 0o077) === 0) return;
  if (!existed || MARKERS.some((m) => existsSync(path.join(dataDir, m)))) {
    chmodSync(dataDir, 0o700);
    return;
  }
  warn(`tgs dev: ${dataDir} can be read by other users (mode ${mode.toString(8)}); its root token file is 0600, but the database is not: chmod 700 it, or use a directory of its own`);
}

/** The root access token of this data directory (0600): kept across restarts so exported credentials keep working. */
export function rootAccessToken(dataDir: string, env: NodeJS.ProcessEnv = process.env): string {
  if (env.TGS_ROOT_ACCESS_TOKEN) return env.TGS_ROOT_ACCESS_TOKEN;
  const file = path.join(dataDir, 'root-access-token');
  if (existsSync(file)) {
    const token = readFileSync(file, 'utf8').trim();
    chmodSync(file, 0o600);
    if (token) return token;
  }
  const token = generateAccessToken();
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return token;
}
