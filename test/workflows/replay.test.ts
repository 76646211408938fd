import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { Worker } from '@temporalio/worker';
import { workflowBundle } from '../../support/workflowEnv.js';

const dir = 'test/fixtures/histories';

test('recorded taskGraph histories replay deterministically against the current workflow code', async () => {
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  assert.ok(files.length >= 5, `expected recorded histories in ${dir}`);
  for (const file of files) {
    // runReplayHistory accepts the JSON `temporal workflow show --output json` writes.
    const history: unknown = JSON.parse(readFileSync(`${dir}/${file}`, 'utf8'));
    const workflowId = `task-graph/${file.replace(/\.json$/, '').split('--')[1]}`;
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, workflowId);
  }
});
