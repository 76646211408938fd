import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { objectMembers, type StreamedMember } from '../../src/api/jsonObjectStream.js';
import { TgsError } from '../../src/errors.js';
import { fuzzParameters } from '../helpers/fuzz.js';

/** The bytes of `text` split at `cuts` (byte offsets, anywhere: inside keys, escapes, multi-byte characters). */
async function* split(text: string, cuts: number[], asStrings = false) {
  const bytes = Buffer.from(text);
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  for (const p of [...points, bytes.length]) {
    if (p <= from && p !== bytes.length) continue;
    const piece = bytes.subarray(from, p);
    // string pieces only where the cut falls between characters
    yield asStrings && Buffer.from(piece.toString()).equals(piece) ? piece.toString() : piece;
    from = p;
  }
}

async function collect(source: AsyncIterable<Uint8Array | string>, expand: string[], maxValueBytes = 1 << 20): Promise<StreamedMember[]> {
  const out: StreamedMember[] = [];
  for await (const m of objectMembers(source, { expand, maxValueBytes })) out.push(m);
  return out;
}

/** What objectMembers must yield for a text JSON.parse accepts (without duplicate keys). */
function expected(text: string, expand: string[]): StreamedMember[] {
  const out: StreamedMember[] = [];
  for (const [key, value] of Object.entries(JSON.parse(text) as Record<string, unknown>)) {
    if (expand.includes(key) && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) out.push({ parent: key, key: k, value: v });
      out.push({ key, expanded: true, count: Object.keys(value).length });
    } else {
      out.push({ key, value });
    }
  }
  return out;
}

/** JSON text with random whitespace between tokens. */
function spaced(value: unknown, ws: string[]): string {
  let n = 0;
  const w = () => ws[n++ % ws.length];
  const write = (v: unknown): string => {
    if (Array.isArray(v)) return `[${w()}${v.map((x) => `${write(x)}${w()}`).join(`,${w()}`)}]`;
    if (v !== null && typeof v === 'object') {
      return `{${w()}${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}${w()}:${w()}${write(x)}${w()}`).join(`,${w()}`)}}`;
    }
    return JSON.stringify(v);
  };
  return `${w()}${write(value)}${w()}`;
}

const keys = fc.oneof(fc.constantFrom('tasks', 'routing', '__proto__', 'a', '', 'ü✓"\\', '\u0074asks'), fc.string({ unit: 'binary' }));
const whitespace = fc.array(fc.constantFrom('', ' ', '\n', '\t', '\r\n  '), { minLength: 1, maxLength: 8 });

test('members of any JSON object, split anywhere and spaced anyhow, are what JSON.parse gives', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.dictionary(keys, fc.oneof(fc.jsonValue(), fc.dictionary(keys, fc.jsonValue(), { maxKeys: 5 })), { maxKeys: 6 }),
      whitespace,
      fc.array(fc.nat(), { maxLength: 20 }),
      fc.subarray(['tasks', 'a', '__proto__']),
      fc.boolean(),
      async (object, ws, cuts, expand, asStrings) => {
        const text = spaced(object, ws);
        assert.deepStrictEqual(await collect(split(text, cuts, asStrings), expand), expected(text, expand));
      },
    ),
    fuzzParameters(300),
  );
});

test('a text is refused exactly when JSON.parse refuses it or its top level is not an object, always as a 400', async () => {
  const accepts = (text: string) => {
    try {
      const v: unknown = JSON.parse(text);
      return v !== null && typeof v === 'object' && !Array.isArray(v);
    } catch {
      return false;
    }
  };
  await fc.assert(
    fc.asyncProperty(
      fc.dictionary(keys, fc.jsonValue(), { maxKeys: 4 }),
      fc.nat(),
      fc.constantFrom('insert', 'delete', 'replace'),
      fc.constantFrom('{', '}', '[', ']', '"', ',', ':', '\\', ' ', 'x', '1', 'e', '-', 'n', 'ü'),
      fc.array(fc.nat(), { maxLength: 6 }),
      async (object, at, how, char, cuts) => {
        const valid = JSON.stringify(object);
        const i = at % (valid.length + 1);
        const text = how === 'insert' ? valid.slice(0, i) + char + valid.slice(i) : how === 'delete' ? valid.slice(0, i) + valid.slice(i + 1) : valid.slice(0, i) + char + valid.slice(i + 1);
        if (text.trim() === '') return; // an empty body yields nothing: the caller reports the missing member
        let refused: unknown;
        try {
          await collect(split(text, cuts), ['tasks']);
        } catch (err) {
          refused = err;
        }
        if (accepts(text)) assert.equal(refused, undefined, `${text} was refused: ${String(refused)}`);
        else {
          assert.ok(refused instanceof TgsError, `${text}: ${String(refused)}`);
          assert.equal(refused.code, 'InputError');
        }
      },
    ),
    fuzzParameters(1000),
  );
});

test('a value over the limit is refused as soon as it passes it, without reading the rest', async () => {
  async function* source() {
    yield '{"tasks": {"a": {"payload": "';
    yield 'x'.repeat(2000);
    throw new Error('read past the limit');
  }
  await assert.rejects(collect(source(), ['tasks'], 1000), (err: TgsError) => err.code === 'InputTooLarge' && /tasks\.a is larger than 1000 bytes/.test(err.message));
});

test('nesting deeper than 1,000 levels is a 400, never a RangeError', async () => {
  const deep = `{"a": ${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
  await assert.rejects(collect(split(deep, [7, 50_000]), []), (err: TgsError) => err.code === 'InputError' && /nesting deeper/.test(err.message));
  const ok = `{"a": ${'['.repeat(900)}${']'.repeat(900)}}`;
  assert.equal((await collect(split(ok, [100]), [])).length, 1);
});

test('a consumer that stops early closes the source', async () => {
  let closed = false;
  async function* source() {
    try {
      yield '{"tasks": {"a": 1, "b": 2, ';
      yield '"c": 3}}';
    } finally {
      closed = true;
    }
  }
  for await (const m of objectMembers(source(), { expand: ['tasks'], maxValueBytes: 100 })) if ('parent' in m) break;
  assert.equal(closed, true);
});
