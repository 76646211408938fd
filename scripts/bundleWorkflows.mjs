#!/usr/bin/env node
// Part of `npm run build`: bundles dist/workflows into dist/workflow-bundle.js, so a scheduler worker started
// from the build (bin/tgs.js, the Docker image) loads its workflow code at once instead of running webpack.
// Fails the build if the worker's loader would not pick the file up.
import { writeFileSync } from 'node:fs';
import { builtBundlePath, bundleWorkflows, loadWorkflowBundle } from '../dist/temporal/workflowBundle.js';

const started = Date.now();
writeFileSync(builtBundlePath(), await bundleWorkflows());
const loaded = await loadWorkflowBundle();
if (loaded.codePath !== builtBundlePath()) {
  console.error(`the built worker would not load ${builtBundlePath()}: ${JSON.stringify(Object.keys(loaded))}`);
  process.exit(1);
}
console.log(`workflow bundle: ${builtBundlePath()} (${Date.now() - started} ms)`);
