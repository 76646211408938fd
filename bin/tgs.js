#!/usr/bin/env node
// The `tgs` command. Runs the compiled CLI from dist/ (npm install runs the build via `prepare`).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  console.error('tgs: dist/ is missing. Run `npm run build` (or `npm install`, which builds) in the tgs directory.');
  process.exit(1);
}
const { main } = await import(entry.href);
await main(process.argv.slice(2));
