import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runOutcome } from '../../src/ui/components/runOutcome.js';
import { byteSize } from '../../src/byteSize.js';
import { graphDurationMs, matchesSearch, searchOf } from '../../src/ui/components/graphFilter.js';

// The pure helpers of the task page (a run's exit code from its log, sizes) and the list page (its search).

test("a run's outcome is the shell worker's last end-of-command line in its log", () => {
  const line = (what: string) => `[tgs-shell-worker 2026-11-28T16:02:48.123Z] ${what} after 0.4 s`;
  assert.equal(runOutcome(`building\n${line('exit code 3')}\n`), 'exit 3');
  assert.equal(runOutcome(`${line('exit code 0')}\n[tgs-shell-worker 2026-11-28T16:02:49.000Z] uploading 2 artifacts\n`), 'exit 0');
  assert.equal(runOutcome(line('killed by SIGKILL')), 'killed by SIGKILL');
  assert.equal(runOutcome(line('could not start "/bin/nope": ENOENT')), 'could not start');
  // the last one counts (a log that quotes an earlier run's line keeps its own)
  assert.equal(runOutcome(`${line('exit code 1')}\n${line('exit code 2')}\n`), 'exit 2');
  // what the command printed itself is not the worker's line
  assert.equal(runOutcome('exit code 5 after 1 s\n  [tgs-shell-worker x] exit code 4 after 1 s'), undefined);
  assert.equal(runOutcome('no worker line here'), undefined);
});

test('sizes read as people read them', () => {
  assert.equal(byteSize(0), '0 B');
  assert.equal(byteSize(1023), '1023 B');
  assert.equal(byteSize(1536), '1.5 KiB');
  assert.equal(byteSize(20 * 1024 * 1024), '20 MiB');
  assert.equal(byteSize(-1), '');
});

test('the list search matches name or id, owner, duration and "mine"', () => {
  const now = Date.parse('2026-11-28T12:00:00Z');
  const graph = (over: object) => ({
    status: { taskGraphId: 'AbCdEfGhQ1234567890abc', state: 'finished' },
    name: 'Nightly Build',
    owner: 'ada@example.com',
    submittedBy: 'ada@example.com',
    created: '2026-11-28T11:00:00Z',
    updated: '2026-11-28T11:10:00Z',
    ...over,
  });
  const search = (q: string) => searchOf(new URLSearchParams(q));
  assert.deepEqual(search(''), { text: '', owner: '', minMinutes: 0, mine: false });
  assert.deepEqual(search('minMinutes=-3&mine=yes'), { text: '', owner: '', minMinutes: 0, mine: false });
  assert.equal(matchesSearch(graph({}), search('q=nightly'), undefined, now), true);
  assert.equal(matchesSearch(graph({}), search('q=abcdefghq'), undefined, now), true);
  assert.equal(matchesSearch(graph({}), search('q=weekly'), undefined, now), false);
  assert.equal(matchesSearch(graph({}), search('owner=ADA@'), undefined, now), true);
  assert.equal(matchesSearch(graph({}), search('owner=bob'), undefined, now), false);
  // finished: created to its last change (10 min); running: up to now (60 min)
  assert.equal(graphDurationMs(graph({}), now), 600_000);
  assert.equal(matchesSearch(graph({}), search('minMinutes=15'), undefined, now), false);
  assert.equal(matchesSearch(graph({ status: { taskGraphId: 'x', state: 'running' } }), search('minMinutes=15'), undefined, now), true);
  assert.equal(matchesSearch(graph({}), search('mine=1'), 'ada@example.com', now), true);
  assert.equal(matchesSearch(graph({}), search('mine=1'), 'static/tgs/root', now), false);
  assert.equal(matchesSearch(graph({}), search('mine=1'), undefined, now), false);
});
