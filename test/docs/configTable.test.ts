import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config.js';

// docs/configuration.md's table of environment variables and src/config.ts cannot drift: every variable config.ts reads has a row, and
// every row names a variable config.ts reads.
const ROOT = path.resolve(import.meta.dirname, '../..');

/** The variables named in the first column of docs/configuration.md's `## Environment variables` table. */
function documentedVariables(): string[] {
  const doc = readFileSync(path.join(ROOT, 'docs/configuration.md'), 'utf8');
  const start = doc.indexOf('\n## Environment variables\n');
  assert.ok(start >= 0, 'docs/configuration.md has a "## Environment variables" section');
  const lines = doc.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const end = lines.findIndex((l, i) => i > first && !l.startsWith('|'));
  // the header row and the |---| row name no variable
  const rows = lines.slice(first + 2, end);
  const names = rows.flatMap((row) => [...row.split('|')[1].matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1]));
  return [...new Set(names)].sort();
}

/** The variables src/config.ts reads: `env.NAME`, and the names handed to its parsers (`intFromEnv(env, 'NAME', …)`). */
function configVariables(): string[] {
  const source = readFileSync(path.join(ROOT, 'src/config.ts'), 'utf8');
  const names = [...source.matchAll(/\benv\.([A-Z][A-Z0-9_]*)\b/g), ...source.matchAll(/\(env, '([A-Z][A-Z0-9_]*)'/g)].map((m) => m[1]);
  return [...new Set(names)].sort();
}

test('docs/configuration.md lists exactly the environment variables src/config.ts reads', () => {
  const documented = documentedVariables();
  const config = configVariables();
  assert.ok(config.length > 20 && documented.length > 20, `both lists found (${config.length} in config.ts, ${documented.length} in docs/configuration.md)`);
  assert.deepEqual(config.filter((v) => !documented.includes(v)), [], 'read by src/config.ts but missing from docs/configuration.md § Environment variables');
  assert.deepEqual(documented.filter((v) => !config.includes(v)), [], 'in docs/configuration.md § Environment variables but not read by src/config.ts');
});

test('the scan of src/config.ts sees what it reads: a variable it finds changes the configuration', () => {
  // One of each way config.ts reads a variable, so a rewrite the regular expressions miss fails here.
  assert.equal(loadConfig({ TEMPORAL_NAMESPACE: 'ns' }).temporalNamespace, 'ns');
  assert.equal(loadConfig({ TGS_MAX_GRAPH_NODES: '7' }).maxGraphNodes, 7);
  assert.ok(configVariables().includes('TEMPORAL_NAMESPACE') && configVariables().includes('TGS_MAX_GRAPH_NODES'));
});
