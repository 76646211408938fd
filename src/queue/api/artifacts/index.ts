import { declare, RawReply, type Endpoint, type EndpointContext } from '../../../api/endpoint.js';
import { SLUGID } from '../../../api/patterns.js';
import { withTransaction } from '../../../db/pool.js';
import { TgsError } from '../../../errors.js';
import {
  ERROR_REASONS,
  artifactSummary,
  createArtifact as createArtifactRow,
  latestRunId,
  listArtifacts as listArtifactRows,
  loadArtifact,
  loadArtifactData,
  signedArtifactUrl,
  storeArtifactData,
  verifyArtifactSignature,
  type ArtifactRow,
} from '../../artifacts.js';
import { LIMIT, RUN_ID, TOKEN, decodeToken, encodeToken } from '../schemas.js';

// Taskcluster's artifact names: any non-empty string without a leading slash (it may contain `/`).
const ARTIFACT_NAME = /^[^/][\s\S]{0,1023}$/;
const params = { taskId: SLUGID, runId: RUN_ID, name: ARTIFACT_NAME };
const expires = { type: 'string', format: 'date-time' };

const artifactSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['storageType', 'name', 'expires', 'contentType'],
  properties: { storageType: { enum: ['s3', 'reference', 'error'] }, name: { type: 'string' }, expires: { type: 'string' }, contentType: { type: 'string' } },
};

const listOutput = {
  type: 'object',
  additionalProperties: false,
  required: ['artifacts'],
  properties: { artifacts: { type: 'array', items: artifactSchema }, continuationToken: { type: 'string' } },
};

/** Reads of private artifacts need `queue:get-artifact:<name>`; names under `public/` need nothing. */
function authorizeRead(ctx: EndpointContext, name: string): void {
  if (name.startsWith('public/')) ctx.authorizeExpression({ AllOf: [] });
  else ctx.authorizeExpression(`queue:get-artifact:${name}`);
}

const runOf = async (ctx: EndpointContext) => (ctx.params.runId !== undefined ? Number(ctx.params.runId) : latestRunId(ctx.deps.pool, ctx.params.taskId));

/** Where a reader goes for an artifact: a signed tgs URL (s3), the reference's URL, or the error. */
function artifactTarget(ctx: EndpointContext, a: ArtifactRow): { storageType: 's3' | 'reference'; url: string } {
  if (a.storage_type === 'error') {
    throw new TgsError('ArtifactNotPresent', `Artifact ${a.name} is an error artifact (${a.details.reason}): ${a.details.message}`, {
      reason: a.details.reason,
    });
  }
  if (a.storage_type === 'reference') return { storageType: 'reference', url: a.details.url as string };
  if (!a.present) throw new TgsError('ResourceNotFound', `Artifact ${a.name} of ${a.task_id}/${a.run_id} has not been uploaded yet`);
  const { url } = signedArtifactUrl(ctx.deps.config, ctx.deps.issuer.accessToken, 'GET', { taskId: a.task_id, runId: a.run_id, name: a.name });
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
        properties: { storageType: { const: 'reference' }, url: { type: 'string', format: 'uri', maxLength: 4096 }, contentType: { type: 'string', maxLength: 255 }, expires },
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
      const { url, expires: urlExpires } = signedArtifactUrl(ctx.deps.config, ctx.deps.issuer.accessToken, 'PUT', a);
      return { storageType: 's3', putUrl: url, expires: urlExpires.toISOString(), contentType: row.content_type };
    }
    return { storageType: row.storage_type };
  },
});

function getArtifactEndpoint(latest: boolean): Endpoint {
  return declare({
    service: 'queue',
    name: latest ? 'getLatestArtifact' : 'getArtifact',
    title: latest ? 'Get Artifact from Latest Run' : 'Get Artifact from Run',
    description:
      'Redirects (303) to the artifact: a signed tgs URL serving the uploaded bytes for `s3`, the URL of a `reference`; an `error` artifact answers 424 with its reason. Names under `public/` need no credentials; others need `queue:get-artifact:<name>`.',
    method: 'get',
    route: latest ? '/task/<taskId>/artifacts/<name*>' : '/task/<taskId>/runs/<runId>/artifacts/<name*>',
    params,
    scopes: 'queue:get-artifact:<name>',
    async handler(ctx) {
      authorizeRead(ctx, ctx.params.name);
      const artifact = await loadArtifact(ctx.deps.pool, { taskId: ctx.params.taskId, runId: await runOf(ctx), name: ctx.params.name });
      const { url } = artifactTarget(ctx, artifact);
      return new RawReply(303, { location: url, 'content-type': 'application/json' }, JSON.stringify({ storageType: artifact.storage_type, url }));
    },
  });
}

function artifactContentEndpoint(latest: boolean): Endpoint {
  return declare({
    service: 'queue',
    name: latest ? 'latestArtifact' : 'artifact',
    title: latest ? 'Get Latest Artifact Content' : 'Get Artifact Content',
    description: 'Where to download an artifact from, as JSON (what taskcluster-client\'s downloadArtifact reads): `{storageType, url}`, or `{storageType: \'error\', reason, message}`.',
    method: 'get',
    route: latest ? '/task/<taskId>/artifact-content/<name*>' : '/task/<taskId>/runs/<runId>/artifact-content/<name*>',
    params,
    scopes: 'queue:get-artifact:<name>',
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
    service: 'queue',
    name: latest ? 'latestArtifactInfo' : 'artifactInfo',
    title: latest ? 'Get Latest Artifact Information' : 'Get Artifact Information',
    description: 'An artifact\'s metadata: storageType, name, expires, contentType.',
    method: 'get',
    route: latest ? '/task/<taskId>/artifact-info/<name*>' : '/task/<taskId>/runs/<runId>/artifact-info/<name*>',
    params,
    output: artifactSchema,
    async handler(ctx) {
      return artifactSummary(await loadArtifact(ctx.deps.pool, { taskId: ctx.params.taskId, runId: await runOf(ctx), name: ctx.params.name }));
    },
  });
}

function listArtifactsEndpoint(latest: boolean): Endpoint {
  return declare({
    service: 'queue',
    name: latest ? 'listLatestArtifacts' : 'listArtifacts',
    title: latest ? 'Get Artifacts from Latest Run' : 'Get Artifacts from Run',
    description: 'The artifacts of a run, by name, paged (limit ≤ 1000, continuationToken).',
    method: 'get',
    route: latest ? '/task/<taskId>/artifacts' : '/task/<taskId>/runs/<runId>/artifacts',
    params,
    query: { limit: LIMIT, continuationToken: TOKEN },
    output: listOutput,
    async handler(ctx) {
      const limit = Math.min(Number(ctx.query.limit ?? 1000), 1000);
      const page = await listArtifactRows(ctx.deps.pool, ctx.params.taskId, await runOf(ctx), decodeToken(ctx.query.continuationToken), limit);
      return { artifacts: page.artifacts, ...(page.last !== undefined ? { continuationToken: encodeToken(page.last) } : {}) };
    },
  });
}

const signedQuery = { expires: /^[0-9]{13}$/, sig: /^[A-Za-z0-9_-]{43}$/ };

export const uploadArtifactData = declare({
  service: 'queue',
  name: 'uploadArtifactData',
  title: 'Upload Artifact Bytes (signed URL)',
  description:
    'The target of createArtifact\'s `putUrl`: stores the request body as the artifact\'s bytes (replacing earlier ones). Authorized by the URL\'s signature, not by Hawk. Not a Taskcluster endpoint (Taskcluster uses S3 here).',
  method: 'put',
  route: '/artifact-data/<taskId>/<runId>/<name*>',
  params,
  query: signedQuery,
  rawBody: true,
  async handler(ctx) {
    const a = { taskId: ctx.params.taskId, runId: Number(ctx.params.runId), name: ctx.params.name };
    verifyArtifactSignature(ctx.deps.issuer.accessToken, 'PUT', a, Number(ctx.query.expires), ctx.query.sig ?? '');
    ctx.authorizeExpression({ AllOf: [] });
    const body = ctx.body as unknown;
    const data = Buffer.isBuffer(body) ? body : Buffer.alloc(0);
    await withTransaction(ctx.deps.pool, (client) => storeArtifactData(client, a, data));
    return {};
  },
});

export const downloadArtifactData = declare({
  service: 'queue',
  name: 'downloadArtifactData',
  title: 'Download Artifact Bytes (signed URL)',
  description: 'Where getArtifact redirects for an `s3` artifact: the uploaded bytes with their content type. Authorized by the URL\'s signature.',
  method: 'get',
  route: '/artifact-data/<taskId>/<runId>/<name*>',
  params,
  query: signedQuery,
  async handler(ctx) {
    const a = { taskId: ctx.params.taskId, runId: Number(ctx.params.runId), name: ctx.params.name };
    verifyArtifactSignature(ctx.deps.issuer.accessToken, 'GET', a, Number(ctx.query.expires), ctx.query.sig ?? '');
    ctx.authorizeExpression({ AllOf: [] });
    const artifact = await loadArtifact(ctx.deps.pool, a);
    const data = await loadArtifactData(ctx.deps.pool, a);
    if (!data) throw new TgsError('ResourceNotFound', `Artifact ${a.name} of ${a.taskId}/${a.runId} has not been uploaded yet`);
    return new RawReply(200, { 'content-type': artifact.content_type, 'content-length': String(data.length), 'cache-control': 'no-cache' }, data);
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
