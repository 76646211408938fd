import { Readable } from 'node:stream';
import { declare, RawReply, type Endpoint, type EndpointContext } from '../../../api/endpoint.js';
import { withTransaction } from '../../../db/pool.js';
import { TgsError } from '../../../errors.js';
import {
  ERROR_REASONS,
  artifactSummary,
  createArtifact as createArtifactRow,
  latestRunId,
  listArtifacts as listArtifactRows,
  loadArtifact,
  openArtifactData,
  signedArtifactUrl,
  storeArtifactData,
  verifyArtifactSignature,
  type ArtifactRow,
} from '../../artifacts.js';
import { PAGE_QUERY, pagedListSchema, readPage } from '../../../api/paging.js';
import { artifactServingHeaders } from './serving.js';

// Taskcluster's artifact names: any non-empty string without a leading slash (it may contain `/`).
export const ARTIFACT_NAME = /^[^/][\s\S]{0,1023}$/;
const params = { name: ARTIFACT_NAME };
const expires = { type: 'string', format: 'date-time' };

const artifactSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['storageType', 'name', 'expires', 'contentType'],
  properties: { storageType: { enum: ['s3', 'reference', 'error'] }, name: { type: 'string' }, expires: { type: 'string' }, contentType: { type: 'string' } },
};


/** Whether an artifact (route parameter `name`) is readable without scopes: names under `public/`. */
export const isPublicArtifact = (p: Record<string, string>) => p.name.startsWith('public/');

/** Reads of private artifacts need `queue:get-artifact:<name>`; names under `public/` need nothing. */
export function authorizeRead(ctx: EndpointContext, name: string): void {
  if (isPublicArtifact({ name })) ctx.authorizeExpression({ AllOf: [] });
  else ctx.authorizeExpression(`queue:get-artifact:${name}`);
}

const artifactOf = (p: Record<string, string>) => ({ taskId: p.taskId, runId: Number(p.runId), name: p.name });

/**
 * What a read of a run's artifact and its latest-run twin share: the twin's route has no `<runId>` and it reads
 * the latest run (`runOf`). `names` and `titles` are [of a given run, of the latest run]; `path` follows the run.
 */
function artifactRead(latest: boolean, names: [string, string], titles: [string, string], path: string) {
  return {
    service: 'queue',
    name: names[latest ? 1 : 0],
    title: titles[latest ? 1 : 0],
    method: 'get',
    route: latest ? `/task/<taskId>/${path}` : `/task/<taskId>/runs/<runId>/${path}`,
    params,
    concurrency: 'artifacts',
  } as const;
}

const listScope = (latest: boolean) => (latest ? 'queue:list-artifacts:<taskId>' : 'queue:list-artifacts:<taskId>:<runId>');

/**
 * A reference's URL: http(s) only. Readers are redirected to it from the API's (and the UI's) origin, where a
 * `javascript:` or `data:` URL would run as tgs, and `public/` references need no credentials.
 */
const HTTP_URL = /^[hH][tT][tT][pP][sS]?:\/\/[^/]/;

const runOf = async (ctx: EndpointContext) => (ctx.params.runId !== undefined ? Number(ctx.params.runId) : latestRunId(ctx.deps.pool, ctx.params.taskId));

/** Where a reader goes for an artifact: a signed tgs URL (s3), the reference's URL, or the error. */
function artifactTarget(ctx: EndpointContext, a: ArtifactRow): { storageType: 's3' | 'reference'; url: string } {
  if (a.storage_type === 'error') {
    throw new TgsError('ArtifactNotPresent', `Artifact ${a.name} is an error artifact (${a.details.reason}): ${a.details.message}`, {
      reason: a.details.reason,
    });
  }
  if (a.storage_type === 'reference') {
    const url = a.details.url as string;
    // createArtifact takes http(s) only; a row written before that rule is not followed either
    if (!HTTP_URL.test(url)) throw new TgsError('ArtifactNotPresent', `Artifact ${a.name} is a reference to a URL that is not http(s): tgs does not redirect there`);
    return { storageType: 'reference', url };
  }
  if (!a.present) throw new TgsError('ResourceNotFound', `Artifact ${a.name} of ${a.task_id}/${a.run_id} has not been uploaded yet`);
  const { url } = signedArtifactUrl(ctx.deps.config, ctx.deps.issuer.current.accessToken, 'GET', { taskId: a.task_id, runId: a.run_id, name: a.name });
  return { storageType: 's3', url };
}

export const createArtifact = declare({
  service: 'queue',
  name: 'createArtifact',
  title: 'Create Artifact',
  description:
    'Create an artifact for a running run. `s3`: answers with a `putUrl` (signed by tgs, valid 30 min) to PUT the bytes to; they are kept in Postgres, up to TGS_MAX_ARTIFACT_BYTES. Creating the same `s3` artifact again while the run is running answers with a fresh putUrl, and every PUT replaces the bytes (a live log is re-uploaded this way). `reference`: a URL readers are redirected to (may be updated). `error`: readers get 424 with the reason.',
  method: 'post',
  route: '/task/<taskId>/runs/<runId>/artifacts/<name*>',
  params,
  scopes: 'queue:create-artifact:<taskId>/<runId>',
  input: {
    oneOf: [
      {
        type: 'object',
        additionalProperties: false,
        required: ['storageType', 'contentType', 'expires'],
        properties: { storageType: { const: 's3' }, contentType: { type: 'string', minLength: 1, maxLength: 255 }, expires },
      },
      {
        type: 'object',
        additionalProperties: false,
        required: ['storageType', 'url', 'expires'],
        properties: { storageType: { const: 'reference' }, url: { type: 'string', format: 'uri', pattern: HTTP_URL.source, maxLength: 4096 }, contentType: { type: 'string', maxLength: 255 }, expires },
      },
      {
        type: 'object',
        additionalProperties: false,
        required: ['storageType', 'reason', 'message', 'expires'],
        properties: { storageType: { const: 'error' }, reason: { enum: [...ERROR_REASONS] }, message: { type: 'string', maxLength: 4096 }, expires },
      },
    ],
  },
  async handler(ctx) {
    const a = { taskId: ctx.params.taskId, runId: Number(ctx.params.runId), name: ctx.params.name };
    const row = await withTransaction(ctx.deps.pool, (client) => createArtifactRow(client, ctx.deps.config, a, ctx.body));
    if (row.storage_type === 's3') {
      const { url, expires: urlExpires } = signedArtifactUrl(ctx.deps.config, ctx.deps.issuer.current.accessToken, 'PUT', a);
      return { storageType: 's3', putUrl: url, expires: urlExpires.toISOString(), contentType: row.content_type };
    }
    return { storageType: row.storage_type };
  },
});

function getArtifactEndpoint(latest: boolean): Endpoint {
  return declare({
    ...artifactRead(latest, ['getArtifact', 'getLatestArtifact'], ['Get Artifact from Run', 'Get Artifact from Latest Run'], 'artifacts/<name*>'),
    description:
      'Redirects (303) to the artifact: a signed tgs URL serving the uploaded bytes for `s3`, the URL of a `reference`; an `error` artifact answers 424 with its reason. Names under `public/` need no credentials; others need `queue:get-artifact:<name>`.',
    scopes: 'queue:get-artifact:<name>',
    isPublic: isPublicArtifact,
    async handler(ctx) {
      authorizeRead(ctx, ctx.params.name);
      const artifact = await loadArtifact(ctx.deps.pool, { taskId: ctx.params.taskId, runId: await runOf(ctx), name: ctx.params.name });
      // Taskcluster's queue names the storage type in a header on every answer about the artifact's data
      const storageType = { 'x-taskcluster-artifact-storage-type': artifact.storage_type };
      if (artifact.storage_type === 'error') {
        // Taskcluster's body for an error artifact: its reason and message, no requestInfo (`code` is tgs's: the
        // Python client reads `message`, the JS client `code` when there is one)
        const body = { code: 'ArtifactNotPresent', reason: artifact.details.reason, message: artifact.details.message };
        return new RawReply(424, { ...storageType, 'content-type': 'application/json' }, JSON.stringify(body));
      }
      const { url } = artifactTarget(ctx, artifact);
      // Unlike the index's redirect (src/api/redirect.ts), the queue's carries JSON: Taskcluster's getArtifact answers
      // `res.reply({storageType, url}, 303)`, and clients read it (taskgraph's get_artifact: `response["url"]`).
      return new RawReply(303, { ...storageType, location: url, 'content-type': 'application/json' }, JSON.stringify({ storageType: artifact.storage_type, url }));
    },
  });
}

function artifactContentEndpoint(latest: boolean): Endpoint {
  return declare({
    ...artifactRead(latest, ['artifact', 'latestArtifact'], ['Get Artifact Content', 'Get Latest Artifact Content'], 'artifact-content/<name*>'),
    description: 'Where to download an artifact from, as JSON (what taskcluster-client\'s downloadArtifact reads): `{storageType, url}`, or `{storageType: \'error\', reason, message}`.',
    scopes: 'queue:get-artifact:<name>',
    isPublic: isPublicArtifact,
    async handler(ctx) {
      authorizeRead(ctx, ctx.params.name);
      const artifact = await loadArtifact(ctx.deps.pool, { taskId: ctx.params.taskId, runId: await runOf(ctx), name: ctx.params.name });
      if (artifact.storage_type === 'error') return { storageType: 'error', reason: artifact.details.reason, message: artifact.details.message };
      return artifactTarget(ctx, artifact);
    },
  });
}

function artifactInfoEndpoint(latest: boolean): Endpoint {
  return declare({
    ...artifactRead(latest, ['artifactInfo', 'latestArtifactInfo'], ['Get Artifact Information', 'Get Latest Artifact Information'], 'artifact-info/<name*>'),
    description: 'An artifact\'s metadata: storageType, name, expires, contentType.',
    scopes: listScope(latest),
    output: artifactSchema,
    async handler(ctx) {
      return artifactSummary(await loadArtifact(ctx.deps.pool, { taskId: ctx.params.taskId, runId: await runOf(ctx), name: ctx.params.name }));
    },
  });
}

function listArtifactsEndpoint(latest: boolean): Endpoint {
  return declare({
    ...artifactRead(latest, ['listArtifacts', 'listLatestArtifacts'], ['Get Artifacts from Run', 'Get Artifacts from Latest Run'], 'artifacts'),
    description: 'The artifacts of a run, by name, paged (limit ≤ 1000, continuationToken).',
    scopes: listScope(latest),
    query: PAGE_QUERY,
    output: pagedListSchema('artifacts', artifactSchema),
    async handler(ctx) {
      const run = await runOf(ctx);
      const { page, next } = await readPage(ctx.query, (after, limit) => listArtifactRows(ctx.deps.pool, ctx.params.taskId, run, after, limit), (a) => a.name);
      return { artifacts: page, ...next };
    },
  });
}

const signedQuery = { expires: /^[0-9]{13}$/, sig: /^[A-Za-z0-9_-]{43}$/ };

export const uploadArtifactData = declare({
  service: 'queue',
  name: 'uploadArtifactData',
  title: 'Upload Artifact Bytes (signed URL)',
  description:
    'The target of createArtifact\'s `putUrl`: stores the request body as the artifact\'s bytes (replacing earlier ones), streamed into Postgres, up to TGS_MAX_ARTIFACT_BYTES. Authorized by the URL\'s signature, not by Hawk: a bad or expired signature is refused before the body is read. Not a Taskcluster endpoint (Taskcluster uses S3 here).',
  method: 'put',
  route: '/artifact-data/<taskId>/<runId>/<name*>',
  params,
  query: signedQuery,
  rawBody: true,
  beforeBody({ params: p, query, deps, request }) {
    verifyArtifactSignature(deps.issuer.current.accessToken, 'PUT', artifactOf(p), Number(query.expires), query.sig ?? '');
    if (Number(request.headers['content-length'] ?? 0) > deps.config.maxArtifactBytes) {
      throw new TgsError('InputTooLarge', `The artifact is larger than this deployment accepts (TGS_MAX_ARTIFACT_BYTES=${deps.config.maxArtifactBytes})`);
    }
  },
  async handler(ctx) {
    // beforeBody checked the URL's signature: that is this endpoint's authorization.
    ctx.authorizeExpression({ AllOf: [] });
    const body = (ctx.body as AsyncIterable<Buffer> | undefined) ?? [];
    await withTransaction(ctx.deps.pool, (client) => storeArtifactData(client, artifactOf(ctx.params), body, ctx.deps.config.maxArtifactBytes));
    return {};
  },
});

export const downloadArtifactData = declare({
  service: 'queue',
  name: 'downloadArtifactData',
  title: 'Download Artifact Bytes (signed URL)',
  description:
    'Where getArtifact redirects for an `s3` artifact: the uploaded bytes with their content type, made inert on this origin (`X-Content-Type-Options: nosniff`, `Content-Security-Policy: sandbox`, and `Content-Disposition: attachment` for every type but plain text, CSV, Markdown, JSON and raster images). Authorized by the URL\'s signature.',
  method: 'get',
  route: '/artifact-data/<taskId>/<runId>/<name*>',
  params,
  query: signedQuery,
  concurrency: 'artifacts',
  async handler(ctx) {
    const a = { taskId: ctx.params.taskId, runId: Number(ctx.params.runId), name: ctx.params.name };
    verifyArtifactSignature(ctx.deps.issuer.current.accessToken, 'GET', a, Number(ctx.query.expires), ctx.query.sig ?? '');
    ctx.authorizeExpression({ AllOf: [] });
    const artifact = await loadArtifact(ctx.deps.pool, a);
    const data = await openArtifactData(ctx.deps.pool, a);
    if (!data) throw new TgsError('ResourceNotFound', `Artifact ${a.name} of ${a.taskId}/${a.runId} has not been uploaded yet`);
    const headers: Record<string, string> = { ...artifactServingHeaders(a.name, artifact.content_type), 'cache-control': 'no-cache' };
    if (data.length !== undefined) headers['content-length'] = String(data.length);
    // HEAD (the UI asks an artifact's size so): the headers alone. Fastify answers HEAD from this GET route by
    // reading the whole stream and dropping it, which would pull every chunk of a large artifact out of Postgres;
    // an empty stream keeps the content-length given here.
    if (ctx.request.method === 'HEAD') return new RawReply(200, headers, Readable.from([]));
    return new RawReply(200, headers, Readable.from(data.chunks, { objectMode: false }));
  },
});

/** Artifact endpoints of the queue API. */
export const artifactEndpoints: Endpoint[] = [
  createArtifact,
  getArtifactEndpoint(false),
  getArtifactEndpoint(true),
  artifactContentEndpoint(false),
  artifactContentEndpoint(true),
  artifactInfoEndpoint(false),
  artifactInfoEndpoint(true),
  listArtifactsEndpoint(false),
  listArtifactsEndpoint(true),
  uploadArtifactData,
  downloadArtifactData,
];
