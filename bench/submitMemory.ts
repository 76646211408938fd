// The API's memory over one graph submit, alone: for each size asked for, a fresh `tgs api` process (the build, as
// deployed) takes one layered graph (layers × 1,000 tasks, fan-in 4, the scale scenario's shape) through a PUT,
// and its peak RSS (VmHWM) and largest live heap after a full collection (`--trace-gc`) are printed as a JSON line.
// No workflow runs: no scheduler worker, bridge or relay is started, so the submit is all the API does. Not part of
// `npm run bench`: `node --import tsx bench/submitMemory.ts [layers ...]` (default 100 300), from a built tree;
// `TGS_BIN=<dir>/bin/tgs.js` runs another build (an A/B: a copy of bin/, dist/, src/sql/ and package.json).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import slugid from 'slugid';
import { startStack, eventually, stackEnv } from '../support/stack.js';
import { freePort } from '../src/temporal/devServer.js';
import { ApiClient } from '../src/client/http.js';
import { layeredGraph } from '../support/graphs.js';

const peakRssMb = (pid: number) => Math.round(Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024);
const sizes = process.argv.slice(2).map(Number);
const stack = await startStack({ inProcessBridge: false, inProcessWorker: false, inProcessRelay: false, configOverrides: { sweepIntervalMs: 5000 } });
try {
  for (const layers of sizes.length > 0 ? sizes : [100, 300]) {
    const port = await freePort();
    const rootUrl = `http://127.0.0.1:${port}`;
    const api = spawn(process.execPath, ['--trace-gc', process.env.TGS_BIN ?? 'bin/tgs.js', 'api'], {
      env: { ...process.env, ...stackEnv(stack), TGS_ROOT_ACCESS_TOKEN: stack.api.root.accessToken, PORT: String(port), HOST: '127.0.0.1', TGS_ROOT_URL: rootUrl },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let liveMb = 0;
    let pending = '';
    api.stdout?.on('data', (d: Buffer) => {
      const lines = (pending + d.toString()).split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        const m = /Mark-Compact[^>]*-> ([\d.]+) \(/.exec(line);
        if (m) liveMb = Math.max(liveMb, Number(m[1]));
      }
    });
    await eventually(async () => (await fetch(`${rootUrl}/api/queue/v1/ping`).catch(() => undefined))?.ok, 'tgs api answering', 60_000);
    const { graph } = layeredGraph(layers, 1000, 'submitmem', 4);
    const idleMb = peakRssMb(api.pid as number);
    const t0 = performance.now();
    const answer = await new ApiClient(rootUrl, stack.api.root).request<{ tasks: unknown[] }>('scheduler', 'PUT', `/task-graph/${slugid.nice()}`, graph);
    const submitS = (performance.now() - t0) / 1000;
    if (answer.tasks.length !== layers * 1000) throw new Error(`answered ${answer.tasks.length} tasks, not ${layers * 1000}`);
    console.log(JSON.stringify({ tasks: layers * 1000, submit_s: Math.round(submitS * 10) / 10, idle_rss_mb: idleMb, peak_rss_mb: peakRssMb(api.pid as number), max_live_heap_mb: liveMb }));
    api.kill('SIGTERM');
    await new Promise((resolve) => api.once('exit', resolve));
  }
} finally {
  await stack.stop();
}
