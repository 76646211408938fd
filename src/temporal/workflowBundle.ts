import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, type WorkerOptions } from '@temporalio/worker';

/** The workflow entry: the .ts source under tsx (tests, dev), the compiled .js in dist/. */
export function workflowsPath(): string {
  const ts = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));
  return existsSync(ts) ? ts : fileURLToPath(new URL('../workflows/index.js', import.meta.url));
}

/** ESM imports say `.js`; under tsx the sources are `.ts`: let webpack try both. */
export const bundlerOptions: WorkerOptions['bundlerOptions'] = {
  webpackConfigHook: (webpackConfig) => {
    webpackConfig.resolve = {
      ...webpackConfig.resolve,
      extensionAlias: { '.js': ['.ts', '.js'] },
    };
    return webpackConfig;
  },
};

/** Where `npm run build` writes the bundle of dist/workflows (scripts/bundleWorkflows.mjs). */
export const builtBundlePath = (): string => fileURLToPath(new URL('../workflow-bundle.js', import.meta.url));

const KEEP_BUNDLES = 8;

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error: (m: string) => console.error(m), log() {} };

/**
 * The key of the code a bundle is made from: every source file of this tree (src/ under tsx, dist/ when built)
 * and the SDK's version. Hashing the ~200 files takes about 5 ms; webpack takes 8 s on a quiet 2-core machine and
 * 15–90 s under load, which is what a restarted scheduler worker used to spend before it polled.
 */
function sourceKey(): string {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const hash = createHash('sha256');
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules' && entry.name !== 'ui') walk(p);
      } else if (/\.(ts|js|mjs|json)$/.test(entry.name) && entry.name !== 'workflow-bundle.js') {
        hash.update(path.relative(root, p)).update('\0').update(readFileSync(p)).update('\0');
      }
    }
  };
  walk(root);
  const require = createRequire(import.meta.url);
  hash.update((require('@temporalio/worker/package.json') as { version: string }).version);
  return hash.digest('hex').slice(0, 32);
}

/** Bundles the workflow code (webpack) as Temporal's worker would. */
export async function bundleWorkflows(): Promise<string> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: workflowsPath(),
    webpackConfigHook: bundlerOptions?.webpackConfigHook,
    logger: quiet as never,
  });
  return code;
}

/**
 * The workflow bundle for a worker, without webpack where it can: the one `npm run build` wrote next to
 * dist/workflows, else one cached under ~/.cache/tgs/workflow-bundles by the hash of the sources it was made
 * from (so an edited source is bundled again), else a fresh bundle that is then cached. A cache that cannot be
 * written (read-only home) only costs the bundling.
 */
export async function loadWorkflowBundle(): Promise<NonNullable<WorkerOptions['workflowBundle']>> {
  if (workflowsPath().endsWith('.js') && existsSync(builtBundlePath())) return { codePath: builtBundlePath() };
  const dir = path.join(process.env.XDG_CACHE_HOME || path.join(homedir(), '.cache'), 'tgs', 'workflow-bundles');
  const file = path.join(dir, `${sourceKey()}.js`);
  if (existsSync(file)) return { codePath: file };
  const code = await bundleWorkflows();
  try {
    mkdirSync(dir, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, code);
    renameSync(tmp, file);
    // keep the newest few: each is about 1 MB, and every edit of the sources makes another
    const old = readdirSync(dir)
      .filter((name) => name.endsWith('.js'))
      .map((name) => ({ name, mtime: statSync(path.join(dir, name)).mtimeMs }))
      .sort((a, b) => b.mtime - a.mtime)
      .slice(KEEP_BUNDLES);
    for (const { name } of old) rmSync(path.join(dir, name), { force: true });
  } catch {
    // not cacheable here: this process still has its bundle
  }
  return { code };
}
