import { declare } from '../../../api/endpoint.js';
import { SLUGID_PATTERN } from '../../../api/patterns.js';
import { TgsError } from '../../../errors.js';
import { loadArtifact } from '../../artifacts.js';
import { ARTIFACT_NAME } from './index.js';

/**
 * Taskcluster's finishArtifact marks an `object` artifact present once its bytes are uploaded; every other
 * storage type is finished by createArtifact, and finishing one is a 400. tgs has no `object` storage type (its
 * `s3` artifacts are present once their bytes arrive at the putUrl), so an existing artifact always gets that 400.
 */
export const finishArtifact = declare<{ uploadId: string }>({
  service: 'queue',
  name: 'finishArtifact',
  title: 'Finish Artifact',
  description:
    'Taskcluster marks an `object` artifact present with this. tgs stores `s3`, `reference` and `error` artifacts, ' +
    'which need no finishing: an existing artifact answers 400 InputError (as Taskcluster answers for those ' +
    'types), a missing one 404.',
  method: 'put',
  route: '/task/<taskId>/runs/<runId>/artifacts/<name*>',
  params: { name: ARTIFACT_NAME },
  scopes: 'queue:create-artifact:<taskId>/<runId>',
  input: {
    type: 'object',
    additionalProperties: false,
    required: ['uploadId'],
    properties: { uploadId: { type: 'string', pattern: SLUGID_PATTERN } },
  },
  async handler({ params, deps }) {
    const artifact = await loadArtifact(deps.pool, { taskId: params.taskId, runId: Number(params.runId), name: params.name });
    throw new TgsError('InputError', `Only object artifacts can be finished; artifact ${artifact.name} is a ${artifact.storage_type} artifact, finished when it was created`);
  },
});
