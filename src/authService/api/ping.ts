import { pingEndpoint } from '../../api/ping.js';

export const ping = pingEndpoint('auth');
