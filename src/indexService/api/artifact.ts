import hawk from 'hawk';
import { declare } from '../../api/endpoint.js';
import { seeOther } from '../../api/redirect.js';
import { createTemporaryCredentials } from '../../auth/temporaryCredentials.js';
import type { ClientRecord } from '../../auth/authenticate.js';
import { encodeArtifactName } from '../../queue/artifacts.js';
import { ARTIFACT_NAME, authorizeRead, isPublicArtifact } from '../../queue/api/artifacts/index.js';
import { NAMESPACE_PARAM, checkNamespace } from '../namespace.js';
import { entryAt } from './tasks.js';

/** How long the signed link to a private artifact works (Taskcluster's index signs it for 15 minutes too). */
const SIGNED_LINK_SECONDS = 15 * 60;

/**
 * The queue's getLatestArtifact URL of a private artifact, signed (a bewit) with temporary credentials the queue's
 * issuer makes for this one link: their only scope is `queue:get-artifact:<name>`, which the caller was just seen to
 * hold. The queue checks it again when the link is followed, with its own rules.
 */
function signedLink(issuer: ClientRecord, url: string, taskId: string, name: string): string {
  const now = Date.now();
  const credentials = createTemporaryCredentials({
    issuerClientId: issuer.clientId,
    issuerAccessToken: issuer.accessToken,
    clientId: `index/artifact-link/${taskId}`,
    scopes: [`queue:get-artifact:${name}`],
    // a little before now, for clocks behind ours (as a run's credentials)
    start: new Date(now - 15 * 60 * 1000),
    expiry: new Date(now + SIGNED_LINK_SECONDS * 1000),
  });
  const ext = Buffer.from(JSON.stringify({ certificate: JSON.parse(credentials.certificate) })).toString('base64');
  const bewit = hawk.client.getBewit(url, {
    credentials: { id: credentials.clientId, key: credentials.accessToken, algorithm: 'sha256' },
    ttlSec: SIGNED_LINK_SECONDS,
    ext,
  });
  return `${url}?bewit=${encodeURIComponent(bewit)}`;
}

export const findArtifactFromTask = declare({
  service: 'index',
  name: 'findArtifactFromTask',
  title: 'Get Artifact From Indexed Task',
  description:
    "Redirects (303, with a text body as Taskcluster's index sends it: no JSON) to the artifact `name` of the latest run of the task indexed at an index path, through the queue's `getLatestArtifact`. " +
    'The artifact\'s own read rule applies, the queue\'s: a name under `public/` needs no scope, any other `queue:get-artifact:<name>`, and ' +
    'its link is then signed for 15 minutes. 404 when nothing is indexed at the path.',
  method: 'get',
  route: '/task/<indexPath>/artifacts/<name*>',
  params: { indexPath: NAMESPACE_PARAM, name: ARTIFACT_NAME },
  scopes: 'queue:get-artifact:<name>',
  isPublic: isPublicArtifact,
  concurrency: 'artifacts',
  async handler(ctx) {
    const { indexPath, name } = ctx.params;
    checkNamespace(indexPath);
    authorizeRead(ctx, name);
    const { taskId } = await entryAt(ctx.deps, indexPath);
    const url = `${ctx.deps.config.rootUrl.replace(/\/+$/, '')}/api/queue/v1/task/${taskId}/artifacts/${encodeArtifactName(name)}`;
    const location = isPublicArtifact({ name }) ? url : signedLink(ctx.deps.issuer.current, url, taskId, name);
    // Taskcluster's index answers with express's res.redirect: a text body, never JSON (src/api/redirect.ts)
    return seeOther(ctx.request.headers.accept, location);
  },
});
