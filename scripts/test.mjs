#!/usr/bin/env node
// The whole test suite: sets up what it needs (scripts/testSetup.mjs), typechecks, lints, then runs every
// test/**/*.test.ts with node's test runner — each file in its own `node --test` process, TGS_TEST_CONCURRENCY
// (3) at a time, and the files under test/serial/ (they restart RabbitMQ or Postgres, which every other file uses, or
// run clusters that take a third of Postgres's 100 connections)
// one at a time after all the others. Fails on a failing, skipped or todo test.
//
// Nothing can hang it: a file still running after TGS_TEST_FILE_TIMEOUT_S (900 s; the slowest file takes about
// 130 s alone) is killed with its process group and counted as failed, by name, with what it printed. Each file's
// output is printed whole when it ends, so concurrent files do not interleave; a line says when each starts. The
// failures of each failed file, with their errors, are printed again at the end, next to the totals.
// Usage: npm test [-- file-or-dir-filter ...]
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, readFileSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { setUpTestMachine, SetupError } from './testSetup.mjs';

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

try {
  await setUpTestMachine();
} catch (err) {
  if (!(err instanceof SetupError)) throw err;
  console.error(`\nThe test suite cannot run on this machine yet: ${err.message}`);
  process.exit(2);
}
console.log(`node ${process.version}`);

if (filters.length === 0) {
  run('npx', ['tsc', '-p', 'tsconfig.json', '--noEmit']);
  // the UI has its own tsconfig (DOM, JSX) and vite's build does not typecheck: a field the API added and the UI's
  // types lacked went unnoticed until this ran
  run('npx', ['tsc', '-p', 'src/ui/tsconfig.json', '--noEmit']);
  run('npx', ['eslint', '--no-error-on-unmatched-pattern', 'src', 'test', 'bench', 'scripts', 'support']);
}
const files = findTests('test').sort().filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}

const fileTimeoutS = Number(process.env.TGS_TEST_FILE_TIMEOUT_S || 900);
const tmp = mkdtempSync(join(tmpdir(), 'tgs-test-'));
const children = new Set();
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    for (const child of children) {
      try {
        process.kill(-child.pid, sig);
      } catch {
        /* already gone */
      }
    }
    process.exit(130);
  });
}

/** One test file in its own process group; resolves with its counts (a killed or crashed file counts as failed). */
function runFile(file, index) {
  return new Promise((resolve) => {
    const tap = join(tmp, `${index}.tap`);
    const started = Date.now();
    console.log(`▶ ${file}`);
    const child = spawn(
      process.execPath,
      [
        '--import', 'tsx', '--test',
        '--test-reporter=spec', '--test-reporter-destination=stdout',
        '--test-reporter=tap', `--test-reporter-destination=${tap}`,
        file,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env: { ...process.env, NODE_ENV: 'test' } },
    );
    children.add(child);
    const output = [];
    child.stdout.on('data', (chunk) => output.push(chunk));
    child.stderr.on('data', (chunk) => output.push(chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }, fileTimeoutS * 1000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      const seconds = Math.round((Date.now() - started) / 1000);
      process.stdout.write(`\n=== ${file} (${seconds} s)\n`);
      process.stdout.write(Buffer.concat(output));
      const summary = existsSync(tap) ? readFileSync(tap, 'utf8') : '';
      const count = (name) => Number((new RegExp(`^# ${name} (\\d+)$`, 'm').exec(summary) ?? [])[1] ?? 0);
      const [pass, fail, skipped, todo, cancelled] = ['pass', 'fail', 'skipped', 'todo', 'cancelled'].map(count);
      let problem;
      if (timedOut) problem = `killed after ${fileTimeoutS} s (TGS_TEST_FILE_TIMEOUT_S): a test or an open handle kept it running`;
      else if (code !== 0) problem = `exited with ${signal ?? `code ${code}`}`;
      else if (!/^# pass \d+$/m.test(summary)) problem = 'ended without a test summary';
      if (problem) console.log(`✖ ${file}: ${problem}`);
      // the spec reporter's closing list of failures, with each one's error, repeated at the end of the run
      const text = Buffer.concat(output).toString();
      const at = text.lastIndexOf('✖ failing tests:');
      let failures = at >= 0 ? text.slice(at).split('\n').slice(0, 60).join('\n') : problem ? text.split('\n').slice(-40).join('\n') : '';
      // A file that fails with every test passed ("test at <file>:1:1 … 'test failed'") died of an error thrown
      // after its tests, which the runner prints once, far above: repeat it here, where CI's excerpt shows it.
      const late = text.split('\n').filter((l) => /^ℹ Error: |generated asynchronous activity|uncaughtException|unhandledRejection/.test(l));
      if (late.length > 0) failures += `\nerrors thrown outside a test:\n${late.slice(0, 10).join('\n')}`;
      resolve({ file, seconds, pass, fail: fail + cancelled + (problem && fail + cancelled === 0 ? 1 : 0), skipped: skipped + todo, failures });
    });
  });
}

/** Runs files `concurrency` at a time, in order. */
async function runAll(list, concurrency) {
  const results = [];
  let next = 0;
  const lane = async () => {
    while (next < list.length) {
      const i = next++;
      results.push(await runFile(list[i], `${concurrency}-${i}`));
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, list.length) }, lane));
  return results;
}

const serial = join('test', 'serial');
const phases = [
  { files: files.filter((f) => !f.startsWith(serial)), concurrency: Number(process.env.TGS_TEST_CONCURRENCY || 3) },
  { files: files.filter((f) => f.startsWith(serial)), concurrency: 1 },
].filter((phase) => phase.files.length > 0);

const results = [];
for (const phase of phases) {
  if (phases.length > 1) console.log(`\n--- ${phase.files.length} file(s), ${phase.concurrency} at a time`);
  results.push(...(await runAll(phase.files, phase.concurrency)));
}
const totals = results.reduce((t, r) => ({ pass: t.pass + r.pass, fail: t.fail + r.fail, skipped: t.skipped + r.skipped }), {
  pass: 0,
  fail: 0,
  skipped: 0,
});
const slowest = [...results].sort((a, b) => b.seconds - a.seconds).slice(0, 5);
console.log(`\nslowest files: ${slowest.map((r) => `${r.file} ${r.seconds} s`).join(', ')}`);
const failed = results.filter((r) => r.fail > 0);
for (const r of failed) console.log(`\n--- what failed in ${r.file} (its whole output is above)\n${r.failures}`);
if (failed.length > 0) console.log(`files with failures: ${failed.map((r) => r.file).join(', ')}`);
console.log(`\n${totals.pass} passed, ${totals.fail} failed, ${totals.skipped} skipped`);
if (totals.fail > 0) process.exit(1);
if (totals.skipped > 0) {
  console.error('skipped or todo tests count as failures');
  process.exit(1);
}
if (totals.pass === 0) {
  console.error('no test ran');
  process.exit(1);
}
