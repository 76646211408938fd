/**
 * Headers for artifact bytes served on the API's origin, which is also the UI's (/ui/). A task author chooses both
 * the bytes and the content type, so served as they are, `public/x.html` holding `<script>` would run as the UI's
 * origin: it could read the credentials the UI keeps in sessionStorage and sign requests with them. Chosen over a
 * separate artifact origin (which needs a second host name in every deployment):
 * - `X-Content-Type-Options: nosniff`: the browser takes the content type as declared, never guesses HTML/script;
 * - `Content-Security-Policy: sandbox`: whatever renders runs in a unique opaque origin with scripts, forms, popups
 *   and plugins disabled, even if a browser displays it;
 * - `Content-Disposition: attachment` for every type not on a short list of types browsers show inertly (text,
 *   JSON, raster images): HTML, SVG, XML, JavaScript and anything unknown download instead of rendering.
 */

/** Content types shown in the browser (inline); everything else downloads. */
const INLINE_TYPES = new Set([
  'text/plain',
  'text/csv',
  'text/markdown',
  'application/json',
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
  'image/avif',
]);

/**
 * `type/subtype` and parameters, nothing else: a value with a comma (`text/plain, text/html`, which browsers read as
 * its last type), control characters or anything a header cannot hold is served as application/octet-stream.
 */
const CONTENT_TYPE = /^([a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+)(\s*;\s*[a-z0-9!#$&^_.+-]+=("[^"\\\x00-\x1f\x7f]*"|[a-z0-9!#$&^_.+-]+))*$/i;

export const ARTIFACT_CSP = 'sandbox';

/** The file name a download gets: the last segment of the artifact name, quoted for both header forms. */
function disposition(name: string): string {
  const base = name.split('/').pop() || 'artifact';
  const ascii = base.replace(/[^\x20-\x7e]|["\\%;]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(base)}`;
}

/** Headers for one artifact's bytes (besides content-length and caching). */
export function artifactServingHeaders(name: string, storedContentType: string): Record<string, string> {
  const m = CONTENT_TYPE.exec(storedContentType.trim());
  const contentType = m ? storedContentType.trim() : 'application/octet-stream';
  const essence = m ? m[1].toLowerCase() : contentType;
  return {
    'content-type': contentType,
    'x-content-type-options': 'nosniff',
    'content-security-policy': ARTIFACT_CSP,
    ...(INLINE_TYPES.has(essence) ? {} : { 'content-disposition': disposition(name) }),
  };
}
