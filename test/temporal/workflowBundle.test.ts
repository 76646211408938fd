import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadWorkflowBundle } from '../../src/temporal/workflowBundle.js';

test('the workflow bundle is made once per source tree and then read from the cache', async () => {
  const cache = mkdtempSync(path.join(tmpdir(), 'tgs-bundle-cache-'));
  const saved = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = cache;
  try {
    const first = await loadWorkflowBundle();
    assert.ok('code' in first && first.code.includes('taskGraph'), 'the first load bundles the workflow code');
    const dir = path.join(cache, 'tgs', 'workflow-bundles');
    const cached = readdirSync(dir);
    assert.equal(cached.length, 1, 'and caches it');
    const second = await loadWorkflowBundle();
    assert.ok('codePath' in second, 'a second load reads the cache instead of bundling');
    assert.equal(second.codePath, path.join(dir, cached[0]));
    assert.equal(readFileSync(second.codePath, 'utf8'), first.code, 'the same code');
  } finally {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME;
    else process.env.XDG_CACHE_HOME = saved;
    rmSync(cache, { recursive: true, force: true });
  }
});
