import { TgsError } from '../errors.js';

export interface ObjectMember {
  key: string;
  value: unknown;
  parent?: undefined;
}
export interface NestedMember {
  parent: string;
  key: string;
  value: unknown;
}
export interface ExpandedEnd {
  key: string;
  expanded: true;
  count: number;
}
export type StreamedMember = ObjectMember | NestedMember | ExpandedEnd;

/** Nesting refused inside one value: far past any real payload (validation allows 128), and safe for JSON.parse. */
const MAX_DEPTH = 1000;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

const enum At {
  Start, // before the top-level `{`
  KeyOrEnd, // after `{`: a key or `}`
  Key, // after `,`: a key
  Colon,
  ValueStart,
  Value, // inside a value being captured
  CommaOrEnd,
  Done, // after the top-level `}`
}

const malformed = (what: string, offset: number) => new TgsError('InputError', `Malformed JSON body: ${what} at byte ${offset}`);

/**
 * The members of the one JSON object `source` holds, in document order, each as soon as its text is complete.
 * A member whose key is in `expand` and whose value is an object is not yielded whole: each of its own members
 * is yielded as {parent, key, value}, then {key, expanded: true, count}. Each value is JSON.parse of its text,
 * so it is exactly what parsing the whole body would give; only the current value's bytes are held. An empty
 * source yields nothing. Malformed JSON → 400 InputError; a value over `maxValueBytes` → 413 InputTooLarge as
 * soon as it passes the limit.
 */
export async function* objectMembers(
  source: AsyncIterable<Uint8Array | string>,
  options: { expand: readonly string[]; maxValueBytes: number },
): AsyncGenerator<StreamedMember> {
  const expand = new Set(options.expand);
  let at: At = At.Start;
  /** the expanded member being read (its members are nested), or undefined at the top level */
  let parent: string | undefined;
  let nestedCount = 0;
  let key = '';
  /** what is being captured: a key's string or a value */
  let capturing: 'key' | 'value' = 'value';
  let parts: Uint8Array[] = [];
  let captured = 0;
  // the scan state of the value being captured
  let kind: 'string' | 'container' | 'scalar' = 'scalar';
  let depth = 0;
  let inString = false;
  let escaped = false;
  let offset = 0; // bytes of the source before the current chunk

  const text = () => {
    const bytes = parts.length === 1 ? parts[0] : Buffer.concat(parts, captured);
    parts = [];
    captured = 0;
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  };
  const parse = (json: string, where: number): unknown => {
    try {
      return JSON.parse(json);
    } catch (err) {
      throw malformed(`${(err as Error).message.slice(0, 200)} (in ${capturing === 'key' ? 'a key' : `the value of ${JSON.stringify(key.slice(0, 100))}`})`, where);
    }
  };
  const keep = (chunk: Uint8Array, from: number, to: number) => {
    if (to <= from) return;
    captured += to - from;
    if (captured > options.maxValueBytes) {
      const what = capturing === 'key' ? 'a key' : parent !== undefined ? `${parent}.${key.slice(0, 100)}` : key.slice(0, 100);
      throw new TgsError('InputTooLarge', `${what} is larger than ${options.maxValueBytes} bytes`);
    }
    parts.push(chunk.subarray(from, to));
  };

  for await (const piece of source) {
    const chunk = typeof piece === 'string' ? Buffer.from(piece) : piece;
    let i = 0;
    const n = chunk.length;
    while (i < n) {
      if (at === At.Value) {
        // Scan to the end of the value (or of the chunk), keeping its bytes.
        const start = i;
        let end = -1;
        if (kind === 'scalar') {
          while (i < n) {
            const b = chunk[i];
            if (b === COMMA || b === CLOSE_BRACE || b === CLOSE_BRACKET || isSpace(b)) {
              end = i;
              break;
            }
            i++;
          }
        } else {
          while (i < n) {
            const b = chunk[i++];
            if (inString) {
              if (escaped) escaped = false;
              else if (b === BACKSLASH) escaped = true;
              else if (b === QUOTE) {
                inString = false;
                if (kind === 'string') {
                  end = i;
                  break;
                }
              }
            } else if (b === QUOTE) inString = true;
            else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
              if (++depth > MAX_DEPTH) throw malformed(`nesting deeper than ${MAX_DEPTH} levels`, offset + i - 1);
            } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
              if (--depth === 0) {
                end = i;
                break;
              }
            }
          }
        }
        keep(chunk, start, end < 0 ? n : end);
        if (end < 0) break; // the value goes on in the next chunk
        const json = text();
        if (capturing === 'key') {
          const decoded = parse(json, offset + end);
          if (typeof decoded !== 'string') throw malformed('expected a string key', offset + end);
          key = decoded;
          at = At.Colon;
          continue;
        }
        const value = parse(json, offset + end);
        if (parent !== undefined) {
          nestedCount++;
          yield { parent, key, value };
        } else {
          yield { key, value };
        }
        at = At.CommaOrEnd;
        continue;
      }
      const b = chunk[i];
      if (isSpace(b)) {
        i++;
        continue;
      }
      switch (at) {
        case At.Start:
          if (b !== OPEN_BRACE) throw malformed('the body must be a JSON object', offset + i);
          at = At.KeyOrEnd;
          i++;
          break;
        case At.KeyOrEnd:
        case At.Key:
          if (b === CLOSE_BRACE && at === At.KeyOrEnd) {
            // an empty object: its '}' is read again as the one after a member, which closes an object once
            at = At.CommaOrEnd;
            break;
          }
          if (b !== QUOTE) throw malformed('expected a key', offset + i);
          capturing = 'key';
          kind = 'string';
          inString = true;
          escaped = false;
          keep(chunk, i, i + 1);
          i++;
          at = At.Value;
          break;
        case At.Colon:
          if (b !== COLON) throw malformed("expected ':'", offset + i);
          i++;
          at = At.ValueStart;
          break;
        case At.ValueStart:
          if (parent === undefined && b === OPEN_BRACE && expand.has(key)) {
            parent = key;
            nestedCount = 0;
            at = At.KeyOrEnd;
            i++;
            break;
          }
          capturing = 'value';
          inString = b === QUOTE;
          escaped = false;
          depth = 0;
          kind = b === QUOTE ? 'string' : b === OPEN_BRACE || b === OPEN_BRACKET ? 'container' : 'scalar';
          if (kind === 'string') {
            keep(chunk, i, i + 1);
            i++;
          }
          at = At.Value;
          break;
        case At.CommaOrEnd:
          if (b === COMMA) {
            at = At.Key;
            i++;
          } else if (b === CLOSE_BRACE) {
            i++;
            if (parent !== undefined) {
              yield { key: parent, expanded: true, count: nestedCount };
              parent = undefined;
              at = At.CommaOrEnd;
            } else {
              at = At.Done;
            }
          } else {
            throw malformed("expected ',' or '}'", offset + i);
          }
          break;
        case At.Done:
          throw malformed('unexpected data after the JSON object', offset + i);
      }
    }
    offset += n;
  }
  if (at === At.Value && kind === 'scalar' && capturing === 'value') {
    // a scalar running to the end of the body: the object was never closed
    throw malformed('unexpected end of the body', offset);
  }
  if (at !== At.Done && at !== At.Start) throw malformed('unexpected end of the body', offset);
}
