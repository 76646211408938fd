import { declare } from '../../api/endpoint.js';

export const ping = declare({
  service: 'auth',
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
