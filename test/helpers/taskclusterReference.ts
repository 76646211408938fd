import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
// the references the current client ships (an ES module since taskcluster-client 56)
import apisModule from 'taskcluster-client/src/apis.js';
import { NOT_SERVED } from '../../src/api/notServed.js';
import type { Endpoint } from '../../src/api/endpoint.js';

/*
 * What the parity tests (test/api/taskcluster*Reference.test.ts, hooksReference.test.ts) share: the references the
 * official taskcluster-client ships, the check that each entry is served (or listed in NOT_SERVED with a reason), and
 * a client that records which methods answered.
 */

export type ReferenceService = keyof typeof NOT_SERVED;

export interface Entry {
  type: string;
  name: string;
  method: string;
  route: string;
  args: string[];
  input?: string;
  query?: string[];
  scopes?: unknown;
}

const apis = apisModule as Record<ReferenceService, { reference: { entries: Entry[] } }>;

/** The version of taskcluster-client the tests install (package.json pins the current major). */
export const CLIENT_VERSION: string = JSON.parse(
  readFileSync(createRequire(import.meta.url).resolve('taskcluster-client/package.json'), 'utf8'),
).version;

/** The callable entries of a service's reference. */
export const referenceEntries = (service: ReferenceService): Entry[] => apis[service].reference.entries.filter((e) => e.type === 'function');

/** `get /task/<taskId>` for a method and route (a trailing `<name*>` as `<name>`, as the references write it). */
export const routeKey = (method: string, route: string) => `${method.toLowerCase()} ${route.replace(/<([a-zA-Z]+)\*>/g, '<$1>')}`;

/**
 * Every reference entry is served with its method and route (and, with `scopes`, Taskcluster's scopes), or listed in
 * NOT_SERVED; and NOT_SERVED names only entries the reference still has.
 */
export function assertReferenceServed(service: ReferenceService, endpoints: Endpoint[], options: { scopes?: boolean } = {}): void {
  const reference = referenceEntries(service);
  const names = new Set(reference.map((e) => e.name));
  for (const name of Object.keys(NOT_SERVED[service])) assert.ok(names.has(name), `NOT_SERVED.${service}.${name} is not in taskcluster-client's reference any more: drop it`);
  for (const entry of reference) {
    if (entry.name in NOT_SERVED[service]) continue;
    const endpoint = endpoints.find((e) => e.name === entry.name);
    assert.ok(endpoint, `taskcluster-client's ${service} reference has ${entry.name} (${entry.method} ${entry.route}): serve it or list it in NOT_SERVED (src/api/notServed.ts) with the reason`);
    const routes = [endpoint.route, ...(endpoint.aliases ?? [])].map((r) => routeKey(endpoint.method, r));
    assert.ok(routes.includes(routeKey(entry.method, entry.route)), `${service}.${entry.name}: tgs serves ${routes.join(', ')}, the client calls ${entry.method} ${entry.route}`);
    if (options.scopes) assert.deepEqual(endpoint.scopes, entry.scopes, `${service}.${entry.name}: Taskcluster's scopes`);
  }
}

export type Client = Record<string, (...args: unknown[]) => Promise<any>>;

/** `client`, adding the name of every method that answered to `exercised`. */
export function recording(client: Client, exercised: Set<string>): Client {
  return new Proxy(client, {
    get(target, name: string) {
      const method = target[name];
      if (typeof method !== 'function') return method;
      return async (...args: unknown[]) => {
        const result = await method.apply(target, args);
        exercised.add(name);
        return result;
      };
    },
  });
}

/** A call that must be refused with this status and Taskcluster error code. */
export async function refusedWith(call: Promise<unknown>, status: number, code: string): Promise<void> {
  await assert.rejects(call, (err: Error & { statusCode?: number; code?: string }) => {
    assert.equal(err.statusCode, status, err.message);
    assert.equal(err.code, code, err.message);
    return true;
  });
}
