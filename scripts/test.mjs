#!/usr/bin/env node
// The whole test suite: typecheck, lint, then every test/**/*.test.ts with node's test runner.
// Fails on a failing, skipped or todo test. Usage: npm test [-- file-or-dir-filter ...]
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync, readFileSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

const filters = process.argv.slice(2);
const run = (cmd, args, extraEnv = {}) => {
  console.log(`$ ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { stdio: 'inherit', env: { ...process.env, ...extraEnv } });
  if (r.status !== 0) process.exit(r.status ?? 1);
};

function findTests(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return findTests(p);
    return p.endsWith('.test.ts') ? [p] : [];
  });
}

if (filters.length === 0) {
  run('npx', ['tsc', '-p', 'tsconfig.json', '--noEmit']);
  run('npx', ['eslint', '--no-error-on-unmatched-pattern', 'src', 'test', 'bench', 'scripts']);
}
const files = findTests('test').sort().filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const tap = join(mkdtempSync(join(tmpdir(), 'tgs-test-')), 'results.tap');
const concurrency = process.env.TGS_TEST_CONCURRENCY || '3';
const r = spawnSync(
  process.execPath,
  [
    '--import', 'tsx', '--test', `--test-concurrency=${concurrency}`,
    '--test-reporter=spec', '--test-reporter-destination=stdout',
    '--test-reporter=tap', `--test-reporter-destination=${tap}`,
    ...files,
  ],
  { stdio: 'inherit', env: { ...process.env, NODE_ENV: 'test' } },
);
const summary = readFileSync(tap, 'utf8');
const count = (name) => Number((new RegExp(`^# ${name} (\\d+)$`, 'm').exec(summary) ?? [])[1] ?? 0);
const [pass, fail, skipped, todo, cancelled] = ['pass', 'fail', 'skipped', 'todo', 'cancelled'].map(count);
console.log(`\n${pass} passed, ${fail + cancelled} failed, ${skipped + todo} skipped`);
if (r.status !== 0 || fail + cancelled > 0) process.exit(1);
if (skipped + todo > 0) {
  console.error('skipped or todo tests count as failures');
  process.exit(1);
}
if (pass === 0) {
  console.error('no test ran');
  process.exit(1);
}
