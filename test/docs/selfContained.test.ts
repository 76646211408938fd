import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

// The repo explains itself: comments, test names and docs point at docs/ (formats.md for the graph format, its
// operations G1–G8 and the exchanges), never at documents a maintainer does not have.
const ROOT = path.resolve(import.meta.dirname, '../..');
const SCANNED = ['src', 'test', 'bench', 'scripts', 'docs', 'examples', 'README.md', 'ARCHITECTURE.md'];
const OUTSIDE = /\bseed[ -]?0\d\d\b|\bseeds\/|\b(issue|ticket) #?\d+\b|\boperation [A-D]\b|\bshared\/(reviews|notes)\b/i;

function files(p: string): string[] {
  if (statSync(p).isDirectory()) return readdirSync(p).flatMap((n) => (n === 'results' || n === 'node_modules' ? [] : files(path.join(p, n))));
  return /\.(ts|tsx|mjs|js|md|ya?ml|json|sql|html|css)$/.test(p) ? [p] : [];
}

test('no file refers to documents outside the repo (seeds, issues, lettered operations, the reviews and notes beside it)', () => {
  const offenders: string[] = [];
  for (const file of SCANNED.flatMap((p) => files(path.join(ROOT, p)))) {
    if (file === import.meta.filename) continue;
    readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
      if (OUTSIDE.test(line)) offenders.push(`${path.relative(ROOT, file)}:${i + 1}: ${line.trim().slice(0, 120)}`);
    });
  }
  assert.deepEqual(offenders, [], 'point these at docs/formats.md (or another doc in docs/) instead');
});

// A pointer into docs/ from code, tests, scripts or the docs must lead somewhere: a file that exists and, where the
// pointer names a section (`docs/x.md § Heading`), a heading of that file the text after § starts with. Comments
// wrap, so the text after § is read across the next lines with comment markers dropped.
const POINTING = ['src', 'bench', 'support', 'test', 'scripts', 'docs', 'README.md', 'ARCHITECTURE.md'];
const POINTER = /(?<![\w./-])docs\/[\w./-]*\w\.(?:md|png|svg|json|ya?ml)/g;

/** The headings of a markdown file, without their #s. */
function headings(file: string): string[] {
  return readFileSync(file, 'utf8').split('\n').filter((l) => /^#{1,6} /.test(l)).map((l) => l.replace(/^#+ /, '').trim());
}

/** How a pointer may name a heading, lower case: whole, before its colon, or without its closing parenthesis. */
function shortForms(heading: string): string[] {
  const h = heading.toLowerCase();
  return [h, h.split(':')[0], h.replace(/\s*\([^)]*\)$/, '')];
}

/** `lines` from `i` on, from `col` on the first, as one line: comment markers and indentation dropped. */
function joined(lines: string[], i: number, col: number): string {
  const rest = [lines[i].slice(col), ...lines.slice(i + 1, i + 3)].map((l, k) => (k === 0 ? l : l.replace(/^\s*(?:\/\/|\*|--|#)?\s*/, '')));
  return rest.join(' ').replace(/\s+/g, ' ');
}

/** Every broken pointer in `lines` (of a file at `where`), as `where:line: why`. */
export function brokenPointers(where: string, lines: string[]): string[] {
  const broken: string[] = [];
  lines.forEach((line, i) => {
    for (const m of line.matchAll(POINTER)) {
      const target = m[0].replace(/\.$/, '');
      const file = path.join(ROOT, target);
      let exists = false;
      try {
        exists = statSync(file).isFile();
      } catch {
        exists = false;
      }
      if (!exists) {
        broken.push(`${where}:${i + 1}: ${target} does not exist`);
        continue;
      }
      const after = joined(lines, i, (m.index ?? 0) + m[0].length);
      const section = /^\s*§\s*(.+)/.exec(after);
      if (!section || !target.endsWith('.md')) continue;
      const named = section[1].toLowerCase();
      const found = headings(file).flatMap(shortForms).some((h) => named.startsWith(h) && !/^[\w-]/.test(named.slice(h.length)));
      if (!found) broken.push(`${where}:${i + 1}: ${target} has no heading that "§ ${named.slice(0, 60)}…" names`);
    }
  });
  return broken;
}

test('every pointer into docs/ names a file that exists, and a § a heading of it', () => {
  const broken: string[] = [];
  for (const file of POINTING.flatMap((p) => files(path.join(ROOT, p)))) {
    if (file === import.meta.filename) continue;
    broken.push(...brokenPointers(path.relative(ROOT, file), readFileSync(file, 'utf8').split('\n')));
  }
  assert.deepEqual(broken, [], 'point these at a file of docs/ (and a heading of it) that exists');
});

test('the pointer check refuses a missing file and a missing heading, and accepts a wrapped one', () => {
  assert.deepEqual(brokenPointers('x', ['see docs/no-such-file.md']), ['x:1: docs/no-such-file.md does not exist']);
  assert.equal(brokenPointers('x', ['see docs/formats.md § No such heading']).length, 1);
  assert.deepEqual(brokenPointers('x', [' * (docs/bench-journal/2026-11-26.md § Afternoon of', ' * 2026-11-26). More']), []);
  assert.deepEqual(brokenPointers('x', ['docs/formats.md § Explanations (every blocker)']), []);
  assert.deepEqual(brokenPointers('x', ['docs/formats.md § Task definition). It']), []);
  assert.equal(brokenPointers('x', ['docs/formats.md § Task definitions']).length, 1);
});
