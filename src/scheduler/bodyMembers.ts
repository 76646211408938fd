import { TgsError } from '../errors.js';
import type { StreamedMember } from '../api/jsonObjectStream.js';

/** A graph body as the intake reads it: members streamed from the request, or an object already parsed. */
export type GraphBody = AsyncIterable<StreamedMember> | unknown;

/**
 * The members of a parsed body in the order objectMembers (src/api/jsonObjectStream.ts) yields a streamed one:
 * the `tasks` object node by node, everything else whole. For bodies that arrive parsed (a graph given to the
 * workflow natively through Temporal).
 */
function* membersOf(body: unknown): Generator<StreamedMember> {
  if (body === undefined) return;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new TgsError('InputValidationError', 'Input does not match the schema:\nbody must be object');
  }
  for (const [key, value] of Object.entries(body)) {
    if (key === 'tasks' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      let count = 0;
      for (const [label, node] of Object.entries(value)) {
        count++;
        yield { parent: 'tasks', key: label, value: node };
      }
      yield { key, expanded: true, count };
    } else {
      yield { key, value };
    }
  }
}

export function bodyMembers(body: GraphBody): AsyncIterable<StreamedMember> | Iterable<StreamedMember> {
  if (body !== null && typeof body === 'object' && Symbol.asyncIterator in body) return body as AsyncIterable<StreamedMember>;
  return membersOf(body);
}
