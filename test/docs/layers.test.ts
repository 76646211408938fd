import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

// The layers of src/, as ARCHITECTURE.md § Layers states them (that table is the one statement; this test reads it):
// a file imports only files of its own layer or of a lower one, and no files import each other in a circle. Every
// import counts: `import type`, `export … from` and `import()` included, since a type import ties two files' designs
// together as much as a value import does (the 25-file circle this test was written against was made of type
// imports alone).
const ROOT = path.resolve(import.meta.dirname, '../..');
const SRC = path.join(ROOT, 'src');

/** One row of the Layers table: a path prefix under src/ (`*.ts` for the top-level files) and its rank. */
interface Layer { rank: number; prefix: string }

/** The Layers table of ARCHITECTURE.md: rows `| rank | `prefix`, `prefix` … | …`. */
export function layersTable(markdown: string): Layer[] {
  const section = markdown.split(/^## /m).find((s) => s.startsWith('Layers'));
  assert.ok(section, 'ARCHITECTURE.md has a "## Layers" section');
  const layers: Layer[] = [];
  for (const line of section.split('\n')) {
    const m = /^\|\s*(\d+)\s*\|([^|]*)\|/.exec(line);
    if (!m) continue;
    for (const p of m[2].matchAll(/`([^`]+)`/g)) layers.push({ rank: Number(m[1]), prefix: p[1] });
  }
  return layers;
}

/** The rank of a file (a path relative to the repo), by the longest prefix that names it. */
export function rankOf(layers: Layer[], file: string): number | undefined {
  let best: Layer | undefined;
  for (const l of layers) {
    const matches = l.prefix === 'src/*.ts'
      ? path.dirname(file) === 'src' && /\.tsx?$/.test(file)
      : l.prefix.endsWith('/') ? file.startsWith(l.prefix) : file === l.prefix;
    if (matches && (!best || l.prefix.length > best.prefix.length)) best = l;
  }
  return best?.rank;
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) return sources(p);
    return /\.tsx?$/.test(name) && !name.endsWith('.d.ts') ? [p] : [];
  });
}

/** The file a relative specifier names: `.js` written for `.ts`/`.tsx`, the UI's extensionless ones, `index`. */
function resolveSpecifier(from: string, spec: string): string | undefined {
  const base = path.resolve(path.dirname(from), spec);
  const stem = base.replace(/\.(js|jsx|mjs)$/, '');
  const candidates = [base, `${stem}.ts`, `${stem}.tsx`, path.join(base, 'index.ts'), path.join(base, 'index.tsx')];
  return candidates.find((c) => /\.tsx?$/.test(c) && existsSync(c) && statSync(c).isFile());
}

/** An import of one file by another: where it is written and what it names. */
export interface Edge { from: string; line: number; to: string }

/** Every relative import, re-export and `import()` of every file under src/, resolved to files (repo-relative). */
export function importGraph(): Edge[] {
  const edges: Edge[] = [];
  for (const file of sources(SRC)) {
    const text = readFileSync(file, 'utf8');
    const info = ts.preProcessFile(text, true, true);
    for (const ref of info.importedFiles) {
      if (!ref.fileName.startsWith('.')) continue;
      const spec = ref.fileName.replace(/\?.*$/, '');
      if (/\.(css|svg|png|json)$/.test(spec)) continue; // assets the UI's bundler takes in, not modules of a layer
      const target = resolveSpecifier(file, spec);
      assert.ok(target, `${path.relative(ROOT, file)}: cannot resolve '${ref.fileName}'`);
      const line = text.slice(0, ref.pos).split('\n').length;
      edges.push({ from: path.relative(ROOT, file), line, to: path.relative(ROOT, target) });
    }
  }
  return edges;
}

/** The strongly connected components of more than one file (Tarjan), each sorted. */
export function circles(edges: Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const e of edges) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const visit = (v: string): void => {
    index.set(v, counter); low.set(v, counter); counter++;
    stack.push(v); onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) { visit(w); low.set(v, Math.min(low.get(v)!, low.get(w)!)); }
      else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do { w = stack.pop()!; onStack.delete(w); component.push(w); } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of [...next.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

// The ratchet: imports and circles that broke these rules when the test came, as `from → to` file pairs (lines
// drift) and circles as their files joined by ↔. The list may only shrink: an entry that no longer exists fails too,
// so whoever removes a violation removes its entry.
const KNOWN: string[] = [
];

const layers = layersTable(readFileSync(path.join(ROOT, 'ARCHITECTURE.md'), 'utf8'));
const edges = importGraph();

test('every file under src/ has a layer in ARCHITECTURE.md § Layers', () => {
  const unranked = sources(SRC).map((f) => path.relative(ROOT, f)).filter((f) => rankOf(layers, f) === undefined);
  assert.deepEqual(unranked, [], 'add a row (or a prefix to a row) of ARCHITECTURE.md § Layers for these');
});

const upwardEdges = edges.filter((e) => rankOf(layers, e.to)! > rankOf(layers, e.from)!);
const circleKeys = circles(edges).map((c) => c.join(' ↔ '));

test('no import runs to a higher layer', () => {
  const upward = upwardEdges
    .filter((e) => !KNOWN.includes(`${e.from} → ${e.to}`))
    .map((e) => `${e.from}:${e.line} → ${e.to} (layer ${rankOf(layers, e.from)} → ${rankOf(layers, e.to)})`);
  assert.deepEqual(upward, [], 'a lower layer that must consult a higher one declares a port the higher one implements (ARCHITECTURE.md § Layers)');
});

test('no files import each other in a circle', () => {
  const found = circleKeys.filter((c) => !KNOWN.includes(c));
  assert.deepEqual(found, [], 'move what the files share beside its users, or into a file both import');
});

test('every entry of the ratchet still exists (remove the ones you fixed)', () => {
  const present = new Set([...upwardEdges.map((e) => `${e.from} → ${e.to}`), ...circleKeys]);
  assert.deepEqual(KNOWN.filter((k) => !present.has(k)), []);
});

test('the checks catch what they are for', () => {
  const table = layersTable('## Layers\n| rank | prefix |\n|---|---|\n| 0 | `src/*.ts`, `src/types/` |\n| 2 | `src/queue/` |\n| 1 | `src/db/` |\n');
  assert.equal(rankOf(table, 'src/errors.ts'), 0);
  assert.equal(rankOf(table, 'src/queue/api/tasks.ts'), 2);
  assert.equal(rankOf(table, 'src/db/pool.ts'), 1);
  assert.equal(rankOf(table, 'src/hooks/fire.ts'), undefined);
  const loop = circles([
    { from: 'a', line: 1, to: 'b' }, { from: 'b', line: 1, to: 'c' }, { from: 'c', line: 1, to: 'a' }, { from: 'c', line: 2, to: 'd' },
  ]);
  assert.deepEqual(loop, [['a', 'b', 'c']]);
  assert.ok(edges.length > 1000, `the import graph was read (${edges.length} imports)`);
  assert.ok(edges.some((e) => e.from.startsWith('src/workflows/')), 'type imports are in the graph');
});
