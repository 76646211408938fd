import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

// The repo explains itself: comments, test names and docs point at docs/ (formats.md for the graph format, its
// operations G1–G8 and the exchanges), never at documents a maintainer does not have.
const ROOT = path.resolve(import.meta.dirname, '../..');
const SCANNED = ['src', 'test', 'bench', 'scripts', 'docs', 'examples', 'README.md', 'ARCHITECTURE.md'];
const OUTSIDE = /\bseed[ -]?0\d\d\b|\bseeds\/|\b(issue|ticket) #?\d+\b|\boperation [A-D]\b/i;

function files(p: string): string[] {
  if (statSync(p).isDirectory()) return readdirSync(p).flatMap((n) => (n === 'results' || n === 'node_modules' ? [] : files(path.join(p, n))));
  return /\.(ts|tsx|mjs|js|md|ya?ml|json|sql|html|css)$/.test(p) ? [p] : [];
}

test('no file refers to documents outside the repo (seeds, issues, lettered operations)', () => {
  const offenders: string[] = [];
  for (const file of SCANNED.flatMap((p) => files(path.join(ROOT, p)))) {
    if (file === import.meta.filename) continue;
    readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
      if (OUTSIDE.test(line)) offenders.push(`${path.relative(ROOT, file)}:${i + 1}: ${line.trim().slice(0, 120)}`);
    });
  }
  assert.deepEqual(offenders, [], 'point these at docs/formats.md (or another doc in docs/) instead');
});
