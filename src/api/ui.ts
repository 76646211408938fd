import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Config } from '../config.js';
import { TgsError } from '../errors.js';

/** Where `npm run build` puts the graph explorer (from src/api or dist/api alike: two levels below the root). */
export const defaultUiDir = fileURLToPath(new URL('../../dist/ui/', import.meta.url));
const repoDir = fileURLToPath(new URL('../../', import.meta.url));

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * The UI's pages and files. Everything the built UI loads is its own (module scripts, the layout Web Worker, its
 * stylesheet; `style` props are set through the CSSOM, which CSP does not restrict; WebGL needs no directive), the
 * favicon is `data:,`, and it only talks to this origin's APIs. `frame-ancestors 'none'` (and X-Frame-Options for
 * older browsers): no other site can frame the UI and trick a signed-in user into clicking its buttons.
 * Artifacts served on this origin get their own, stricter headers (src/queue/api/artifacts/serving.ts).
 */
export const UI_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "worker-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const UI_HEADERS = { 'content-security-policy': UI_CSP, 'x-frame-options': 'DENY', 'x-content-type-options': 'nosniff' };

/** What the page needs to know about this deployment, put into index.html. */
export interface UiSettings {
  /** The Temporal Web UI, for the link to a graph's workflow. */
  temporalUiUrl: string;
  temporalNamespace: string;
}

/**
 * The Temporal Web UI's address: TGS_TEMPORAL_UI_URL, else the dev server's default (its frontend port + 1000,
 * which is what `temporal server start-dev` and `tgs dev` use).
 */
export function uiSettings(config: Config): UiSettings {
  let temporalUiUrl = config.temporalUiUrl;
  if (!temporalUiUrl) {
    const m = /^(?:[a-z]+:\/\/)?([^:/]+):([0-9]+)$/.exec(config.temporalAddress);
    temporalUiUrl = m ? `http://${m[1]}:${Number(m[2]) + 1000}` : '';
  }
  return { temporalUiUrl: temporalUiUrl.replace(/\/+$/, ''), temporalNamespace: config.temporalNamespace };
}

/** A bad %-escape in a UI path is the client's mistake: 400, not 500. */
function decodeUiPath(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new TgsError('InputError', 'The UI path has an invalid %-escape');
  }
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function notBuiltPage(uiDir: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>tgs: the UI is not built</title></head>
<body>
<h1>The graph explorer is not built</h1>
<p>This API serves the web UI from <code>${escapeHtml(uiDir)}</code>, which has no <code>index.html</code>.</p>
<p>Build it, then reload this page:</p>
<pre>cd ${escapeHtml(repoDir)}
npm run build</pre>
<p>The APIs under <code>/api/</code> work without it.</p>
</body></html>`;
}

/**
 * Serves the graph explorer under `/ui/`: files of `uiDir` as they are, and index.html for every other path
 * (client-side routes such as /ui/task-graph/<id>), with a `<base>` so relative asset URLs work from any route
 * and behind a path prefix in rootUrl. A missing build answers 503 with what to run.
 */
export function registerUi(app: FastifyInstance, config: Config, uiDir = defaultUiDir): void {
  const prefix = new URL(config.rootUrl).pathname.replace(/\/+$/, '');
  let index: { html: string; mtimeMs: number } | undefined;

  const indexHtml = async (): Promise<string | undefined> => {
    const file = path.join(uiDir, 'index.html');
    const info = await stat(file).catch(() => undefined);
    if (!info) return undefined;
    if (!index || index.mtimeMs !== info.mtimeMs) {
      const settings = JSON.stringify(uiSettings(config)).replace(/</g, '\\u003c');
      const html = (await readFile(file, 'utf8'))
        .replace('<head>', `<head>\n<base href="${escapeHtml(`${prefix}/ui/`)}">`)
        .replace('</head>', `<script type="application/json" id="tgs-settings">${settings}</script>\n</head>`);
      index = { html, mtimeMs: info.mtimeMs };
    }
    return index.html;
  };

  const sendIndex = async (reply: FastifyReply) => {
    const html = await indexHtml();
    if (html === undefined) {
      return reply.status(503).header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-store').send(notBuiltPage(uiDir));
    }
    return reply.status(200).header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-cache').send(html);
  };

  app.get('/', async (_request, reply) => reply.redirect(`${prefix}/ui/`, 302));
  app.get('/ui', async (_request, reply) => reply.redirect(`${prefix}/ui/`, 301));
  app.get('/ui/*', async (request, reply) => {
    reply.headers(UI_HEADERS);
    const rest = decodeUiPath((request.params as { '*': string })['*'] ?? '');
    const ext = path.extname(rest);
    const file = path.resolve(uiDir, rest);
    // Only plain files inside uiDir; anything else is a client route.
    if (rest && ext && CONTENT_TYPES[ext] && file.startsWith(path.resolve(uiDir) + path.sep) && ext !== '.html') {
      const data = await readFile(file).catch(() => undefined);
      if (data) {
        // vite puts content hashes in asset names: they never change.
        const immutable = rest.startsWith('assets/');
        return reply
          .status(200)
          .header('content-type', CONTENT_TYPES[ext])
          .header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
          .send(data);
      }
      if (rest.startsWith('assets/')) {
        return reply.status(404).header('content-type', 'text/plain; charset=utf-8').send(`No such UI file: ${rest} (rebuilt while the page was open? reload it)`);
      }
    }
    return sendIndex(reply);
  });
}
