// The graph explorer's build: `npm run build` → dist/ui, served by `tgs api` under <rootUrl>/ui/ (src/api/ui.ts).
// Asset URLs are relative: the server puts a <base href> into index.html, so the page works from any client
// route and behind a path prefix.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('../../dist/ui', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
    chunkSizeWarningLimit: 1000,
  },
  worker: { format: 'es' },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
});
