import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { temporalCacheDir } from '../src/temporal/devServer.js';

/** The Helm version the tests render deploy/helm/tgs with, built from the Go module proxy when none is found. */
export const HELM_VERSION = 'v3.22.0';
/** The same cache as the Temporal binaries (~/.cache/tgs/bin). */
export const helmCacheDir = temporalCacheDir;

/** `helm` on PATH, then the cache. */
export function findHelm(): string | undefined {
  const which = spawnSync('sh', ['-c', 'command -v helm'], { encoding: 'utf8' });
  if (which.status === 0 && which.stdout.trim()) return which.stdout.trim();
  const cached = path.join(helmCacheDir, 'helm');
  return existsSync(cached) ? cached : undefined;
}

/**
 * Finds helm or builds it with `go install helm.sh/helm/v3/cmd/helm@HELM_VERSION` into the cache (a few minutes
 * on a 2-core machine, once; needs `go`). Says what it does: a silent build of minutes looks like a hang.
 */
export function ensureHelm(log: (line: string) => void = (l) => console.error(l)): string {
  const found = findHelm();
  if (found) return found;
  const go = spawnSync('sh', ['-c', 'command -v go'], { encoding: 'utf8' });
  if (go.status !== 0) {
    throw new Error(`No helm found (PATH or ${helmCacheDir}) and no Go toolchain to build one: install helm (https://helm.sh/docs/intro/install/) or Go.`);
  }
  mkdirSync(helmCacheDir, { recursive: true });
  log(`no helm found; building helm ${HELM_VERSION} from source into ${helmCacheDir}`);
  log('this happens once and takes a few minutes on a 2-core machine...');
  const started = Date.now();
  const result = spawnSync('go', ['install', `helm.sh/helm/v3/cmd/helm@${HELM_VERSION}`], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, GOBIN: helmCacheDir },
  });
  if (result.status !== 0) throw new Error(`building helm failed (go install exited ${result.status})`);
  log(`built helm in ${Math.round((Date.now() - started) / 1000)} s`);
  return path.join(helmCacheDir, 'helm');
}
