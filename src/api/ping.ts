import { declare, type ServiceName } from './endpoint.js';

/** Taskcluster's `ping` of a service: answers without doing anything, to show the service is up. */
export function pingEndpoint(service: ServiceName) {
  return declare({
    service,
    name: 'ping',
    title: 'Ping Server',
    description: 'Respond without doing anything. This endpoint is used to check that the service is up.',
    method: 'get',
    route: '/ping',
    output: { type: 'object', properties: { alive: { type: 'boolean' }, uptime: { type: 'number' } }, required: ['alive'] },
    async handler() {
      return { alive: true, uptime: process.uptime() };
    },
  });
}
