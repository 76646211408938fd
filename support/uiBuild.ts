import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';

const repo = fileURLToPath(new URL('../', import.meta.url));
export const uiSource = path.join(repo, 'src/ui');
export const uiDist = path.join(repo, 'dist/ui');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    const s = statSync(p);
    newest = Math.max(newest, s.isDirectory() ? newestMtime(p) : s.mtimeMs);
  }
  return newest;
}

/** Builds the UI (vite, a second or two) when dist/ui is missing or older than src/ui. */
export function ensureUiBuilt(): void {
  let built = 0;
  try {
    built = statSync(path.join(uiDist, 'index.html')).mtimeMs;
  } catch {
    // not built
  }
  if (built >= newestMtime(uiSource)) return;
  const r = spawnSync(process.execPath, [path.join(repo, 'node_modules/vite/bin/vite.js'), 'build', '--config', path.join(uiSource, 'vite.config.mjs')], {
    cwd: repo,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`building the UI failed (npm run build:ui):\n${r.stdout}\n${r.stderr}`);
}

/** Chromium as CI has it (Debian's package), with the flags this closed network needs. */
export const chromiumOptions = {
  executablePath: process.env.TGS_CHROMIUM ?? '/usr/bin/chromium',
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
};

/**
 * page.waitForFunction for the UI's pages: Playwright compiles a string predicate with eval inside the page, which
 * the UI's Content-Security-Policy forbids (script-src 'self'); page.evaluate goes through the DevTools protocol,
 * which CSP does not govern. Polls every 50 ms.
 */
export async function waitForExpression(page: Page, expression: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // a navigation under way destroys the context being evaluated in: ask again
    if (await page.evaluate(expression).catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${expression}`);
    await page.waitForTimeout(50);
  }
}
