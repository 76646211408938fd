import { RawReply } from './endpoint.js';

/** The bodies a redirect offers, in the order a tie goes to (the first when the client states no preference). */
const OFFERED = ['text/plain', 'text/html'] as const;
type Offered = (typeof OFFERED)[number];

interface Range {
  type: string;
  subtype: string;
  q: number;
  order: number;
}

function ranges(accept: string): Range[] {
  const out: Range[] = [];
  accept.split(',').forEach((part, order) => {
    const [media, ...parameters] = part.trim().split(';');
    const [type, subtype] = media.trim().toLowerCase().split('/');
    if (!type || !subtype) return;
    let q = 1;
    for (const p of parameters) {
      const [key, value] = p.trim().split('=');
      if (key.trim().toLowerCase() === 'q') q = Number(value);
    }
    if (Number.isFinite(q)) out.push({ type, subtype, q, order });
  });
  return out;
}

/**
 * The body type `accept` prefers among text/plain and text/html, as express's `res.format` chooses it (negotiator's
 * rules: the most specific range that names a type gives its quality; ties go to the range listed first, then to
 * the order offered). No Accept header: text/plain. Undefined when the client accepts neither.
 */
export function preferredRedirectBody(accept: string | undefined): Offered | undefined {
  if (accept === undefined || accept.trim() === '') return OFFERED[0];
  const listed = ranges(accept);
  const scored = OFFERED.map((offered, index) => {
    const [type, subtype] = offered.split('/');
    let best: { q: number; specificity: number; order: number } | undefined;
    for (const r of listed) {
      const specificity = r.type === type && r.subtype === subtype ? 2 : r.type === type && r.subtype === '*' ? 1 : r.type === '*' && r.subtype === '*' ? 0 : -1;
      if (specificity < 0) continue;
      if (!best || specificity > best.specificity || (specificity === best.specificity && (r.q > best.q || (r.q === best.q && r.order < best.order)))) {
        best = { q: r.q, specificity, order: r.order };
      }
    }
    return { offered, index, ...(best ?? { q: 0, specificity: -1, order: Infinity }) };
  });
  scored.sort((a, b) => b.q - a.q || b.specificity - a.specificity || a.order - b.order || a.index - b.index);
  return scored[0].q > 0 ? scored[0].offered : undefined;
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);

/**
 * A 303 See Other to `location` as Taskcluster's services send it with express's `res.redirect(303, url)` (the
 * index's findArtifactFromTask): a short text body naming the URL (text/plain, or text/html for a browser), an empty
 * one for a client that accepts neither, and never JSON: Taskcluster's Python client returns a JSON body as the call's
 * result, and `{"response": <the response>}` for any other body, which is what taskgraph's get_artifact_from_index
 * reads the Location header from.
 */
export function seeOther(accept: string | undefined, location: string): RawReply {
  const headers: Record<string, string> = { location, vary: 'Accept' };
  const type = preferredRedirectBody(accept);
  if (type === 'text/plain') return new RawReply(303, { ...headers, 'content-type': 'text/plain; charset=utf-8' }, `See Other. Redirecting to ${location}`);
  if (type === 'text/html') {
    const html = `<!DOCTYPE html><head><title>See Other</title></head><body><p>See Other. Redirecting to ${escapeHtml(location)}</p></body>`;
    return new RawReply(303, { ...headers, 'content-type': 'text/html; charset=utf-8' }, html);
  }
  return new RawReply(303, headers, '');
}
