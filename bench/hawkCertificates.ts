// CPU per authenticated request signed with a worker's per-run temporary credentials, in process (no HTTP, no
// Postgres): the authenticator as the API builds it, with a client store that expands through roles the way
// expandingClientStore does. Not part of `npm run bench`: `node --import tsx bench/hawkCertificates.ts [runs]
// [usesPerRun]`. Each run's certificate is used once (a claim's first report or artifact call: a miss), then
// `usesPerRun - 1` more times (its other artifact calls and report: hits when the cache keeps it).
import hawk from 'hawk';
import { createAuthenticator, type ClientRecord, type ClientStore, type RequestForAuth } from '../src/auth/authenticate.js';
import { CertificateCache } from '../src/auth/certificateCache.js';
import { ISSUER_CLIENT_ID } from '../src/auth/clients.js';
import { testIssuer } from '../support/issuer.js';
import { ANONYMOUS_SCOPE, ScopeExpander } from '../src/auth/roles.js';
import { runCredentials } from '../src/queue/credentials.js';

const runs = Number(process.argv[2] ?? 2000);
const usesPerRun = Number(process.argv[3] ?? 4);
const rootUrl = 'http://127.0.0.1:8080';

const expander = new ScopeExpander([{ roleId: 'anonymous', scopes: ['queue:get-task:*', 'queue:status:*'] }]);
const expand = async (scopes: string[]) => expander.expand([...scopes, ANONYMOUS_SCOPE]);
const issuer: ClientRecord = testIssuer();
const store: ClientStore = { get: async (id) => (id === ISSUER_CLIENT_ID ? { ...issuer, scopes: await expand(issuer.scopes) } : undefined) };

function requests(): RequestForAuth[][] {
  const out: RequestForAuth[][] = [];
  for (let r = 0; r < runs; r++) {
    const creds = runCredentials(issuer, {
      taskId: `task${r}`,
      runId: 0,
      workerGroup: 'bench',
      workerId: `w${r % 50}`,
      takenUntil: new Date(Date.now() + 20 * 60 * 1000),
      taskScopes: ['queue:route:index.bench.*', 'secrets:get:bench/one'],
    });
    const ext = Buffer.from(JSON.stringify({ certificate: JSON.parse(creds.certificate) })).toString('base64');
    const perRun: RequestForAuth[] = [];
    for (let u = 0; u < usesPerRun; u++) {
      const url = `/api/queue/v1/task/task${r}/runs/0/artifacts/public/a${u}`;
      const { header } = hawk.client.header(`${rootUrl}${url}`, 'POST', {
        credentials: { id: creds.clientId, key: creds.accessToken, algorithm: 'sha256' },
        ext,
      });
      perRun.push({ method: 'POST', url, host: '127.0.0.1:8080', authorization: header, contentType: 'application/json' });
    }
    out.push(perRun);
  }
  return out;
}

async function measure(cache: CertificateCache): Promise<{ first: number; repeat: number }> {
  const authenticate = createAuthenticator(store, { rootUrl: () => rootUrl, expand, certificates: cache });
  const work = requests();
  const cpu = async (list: RequestForAuth[]) => {
    const before = process.cpuUsage();
    for (const req of list) await authenticate(req);
    const used = process.cpuUsage(before);
    return (used.user + used.system) / list.length;
  };
  const first = await cpu(work.map((w) => w[0]));
  const repeat = await cpu(work.flatMap((w) => w.slice(1)));
  return { first, repeat };
}

// A warm-up pass first, so both variants run JIT-compiled code.
await measure(new CertificateCache());
for (const [name, cache] of [
  ['no cache (0 entries)', () => new CertificateCache(0)],
  ['cache (10,000 entries)', () => new CertificateCache()],
] as const) {
  const results = [];
  for (let i = 0; i < 5; i++) results.push(await measure(cache()));
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const first = median(results.map((r) => r.first));
  const repeat = median(results.map((r) => r.repeat));
  const all = (first + repeat * (usesPerRun - 1)) / usesPerRun;
  console.log(`${name}: first use ${first.toFixed(1)} µs CPU, repeats ${repeat.toFixed(1)} µs, all ${all.toFixed(1)} µs a request (median of 5, ${runs} runs × ${usesPerRun})`);
}
