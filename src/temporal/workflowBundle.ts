import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { WorkerOptions } from '@temporalio/worker';

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
