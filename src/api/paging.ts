import type { JsonSchema } from './endpoint.js';
import { unstorableString } from './validate.js';
import { TgsError } from '../errors.js';

/**
 * Keyset paging as Taskcluster lists do it: `limit` (≤ 1000) and an opaque `continuationToken` naming the last
 * key of the previous page. One query reads `limit + 1` rows, so whether another page follows costs nothing.
 */

export const LIMIT = /^[1-9][0-9]{0,3}$/;
export const TOKEN = /^[A-Za-z0-9_-]{1,200}$/;
/** The query parameters of a paged list. */
export const PAGE_QUERY = { limit: LIMIT, continuationToken: TOKEN };

/** Continuation tokens are the last key of the previous page, base64url: opaque to clients. */
export const encodeToken = (key: string) => Buffer.from(key).toString('base64url');
/**
 * Tokens are opaque, but they come from clients: one tgs did not make (`AAAA` decodes to NUL bytes, others to
 * invalid UTF-8) is refused here rather than sent to SQL, where Postgres would turn it into a 500.
 */
export function decodeToken(token: string | undefined): string {
  if (!token) return '';
  const key = Buffer.from(token, 'base64url').toString();
  if (encodeToken(key) !== token || unstorableString(key)) {
    throw new TgsError('InputError', 'Invalid continuationToken: pass the one from the previous page unchanged');
  }
  return key;
}

/** `limit` (≤ 1000) and where a paged list resumes (`continuationToken`). */
export const pageOf = (query: Record<string, string | undefined>) => ({
  after: decodeToken(query.continuationToken),
  limit: Math.min(Number(query.limit ?? 1000), 1000),
});

/** A page from `limit + 1` rows: the first `limit`, and a token after the last when there were more. */
export function pageResult<T>(rows: T[], limit: number, key: (row: T) => string): { page: T[]; continuationToken?: string } {
  const page = rows.slice(0, limit);
  return rows.length > limit ? { page, continuationToken: encodeToken(key(page[page.length - 1])) } : { page };
}

/**
 * Reads one page: `fetch` gets where to resume and how many rows to read (`limit + 1`). `next` is what the answer
 * spreads in: `{continuationToken}` when more rows follow, `{}` on the last page.
 */
export async function readPage<T>(
  query: Record<string, string | undefined>,
  fetch: (after: string, limit: number) => Promise<T[]>,
  key: (row: T) => string,
): Promise<{ page: T[]; next: { continuationToken?: string } }> {
  const { after, limit } = pageOf(query);
  const { page, continuationToken } = pageResult(await fetch(after, limit + 1), limit, key);
  return { page, next: continuationToken === undefined ? {} : { continuationToken } };
}

/** The answer of a paged list: `{<field>: [items…], continuationToken?}`. */
export function pagedListSchema(field: string, items: JsonSchema): JsonSchema {
  return {
    type: 'object',
    additionalProperties: false,
    required: [field],
    properties: { [field]: { type: 'array', items }, continuationToken: { type: 'string' } },
  };
}
