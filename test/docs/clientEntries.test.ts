import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { NOT_SERVED } from '../../src/api/notServed.js';
import { referenceEntries, CLIENT_VERSION, type ReferenceService } from '../helpers/taskclusterReference.js';

// docs/api.md § Every entry of taskcluster-client lists each entry of the current official client's Queue, Auth,
// Index and Hooks references, served or not with the reason (src/api/notServed.ts); this keeps the table equal to the
// client the tests install, so a client with a new entry fails here until the table says what tgs does with it.
const ROOT = path.resolve(import.meta.dirname, '../..');
const SERVICES: ReferenceService[] = ['Queue', 'Auth', 'Index', 'Hooks'];

/** The table's rows as the reference and NOT_SERVED make them. */
export function expectedRows(): string[] {
  return SERVICES.flatMap((service) =>
    referenceEntries(service).map((e) => {
      const why = NOT_SERVED[service][e.name];
      return `| ${service} | \`${e.name}\` | \`${e.method.toUpperCase()} ${e.route}\` | ${why === undefined ? 'served' : `not served: ${why.replace(/\|/g, '\\|')}`} |`;
    }),
  );
}

test('docs/api.md lists every entry of the current taskcluster-client, served or why not', () => {
  const doc = readFileSync(path.join(ROOT, 'docs/api.md'), 'utf8');
  const section = doc.split(/^## /m).find((s) => s.startsWith('Every entry of taskcluster-client'));
  assert.ok(section, 'docs/api.md has a section "## Every entry of taskcluster-client"');
  assert.ok(section.includes(`taskcluster-client ${CLIENT_VERSION}`), `the section names the client version the tests use (${CLIENT_VERSION})`);
  const rows = section.split('\n').filter((l) => /^\| (Queue|Auth|Index|Hooks) \|/.test(l));
  const expected = expectedRows();
  assert.deepEqual(rows, expected, 'regenerate the table from the reference and src/api/notServed.ts');
  const served = expected.filter((r) => r.endsWith('| served |')).length;
  assert.ok(section.includes(`${served} of ${expected.length} are served`), `the section says ${served} of ${expected.length} are served`);
  assert.ok(rows.length > 100, `${rows.length} entries`);
});
