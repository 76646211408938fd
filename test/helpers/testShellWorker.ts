import { startShellWorker, type ShellWorker, type ShellWorkerOptions } from '../../src/shellWorker/index.js';
import type { TestApi } from '../../support/api.js';

/**
 * A shell worker on a test API, claiming tgs-test/<workerType> as root, its log lines kept: what every shell-worker
 * test starts, with capacity 2 and progress lines every 200 ms unless `options` says otherwise.
 */
export function startTestShellWorker(
  t: Pick<TestApi, 'rootUrl' | 'root'>,
  workerType: string,
  options: Partial<ShellWorkerOptions> & { workDir: string },
): { worker: ShellWorker; lines: string[] } {
  const lines: string[] = [];
  const worker = startShellWorker({
    rootUrl: t.rootUrl,
    credentials: t.root,
    provisionerId: 'tgs-test',
    workerType,
    capacity: 2,
    workerId: `w-${workerType}`,
    logIntervalMs: 200,
    log: (line) => lines.push(line),
    ...options,
  });
  return { worker, lines };
}
