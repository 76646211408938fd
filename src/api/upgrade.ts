import http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { UpgradeRequest } from './endpoint.js';

const upgrades = new WeakMap<http.IncomingMessage, UpgradeRequest>();

/** The socket of a request that asked to become a WebSocket, once the route's checks let it reach its handler. */
export const upgradeOf = (request: http.IncomingMessage): UpgradeRequest | undefined => upgrades.get(request);

/**
 * Routes `Upgrade:` requests through the same router as every other request: node hands them to the server's
 * 'upgrade' event with their socket (no response object, the HTTP parser detached), so each gets a response
 * written straight to its socket and goes through its route's checks (parameters, Hawk, scopes) in Taskcluster's
 * error shape. A handler takes the socket over (ctx.upgrade, returning UPGRADED); otherwise the answer is the
 * route's, after which the connection ends (it can carry no second request: the parser is gone).
 */
export function routeUpgrades(app: FastifyInstance): void {
  app.server.on('upgrade', (request: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const response = new http.ServerResponse(request);
    response.assignSocket(socket as Socket);
    response.shouldKeepAlive = false;
    response.once('finish', () => socket.end());
    if ((request.headers.upgrade ?? '').toLowerCase() === 'websocket') upgrades.set(request, { socket, head });
    app.routing(request, response);
  });
}
