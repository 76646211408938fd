import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { SLUGID_PATTERN } from '../../src/api/patterns.js';
import { graphTaskIds } from '../../src/scheduler/graphTaskIds.js';

test("a submit's taskIds are Taskcluster slugids sharing their first six bytes, each distinct, with the rest random", () => {
  const next = graphTaskIds();
  const ids = Array.from({ length: 20_000 }, next);
  const pattern = new RegExp(SLUGID_PATTERN);
  for (const id of ids) {
    assert.match(id, pattern);
    // what slugid.nice() makes: a version-4 UUID, its first bit clear
    const uuid = slugid.decode(id);
    assert.match(uuid, /^[0-7][0-9a-f]{7}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(slugid.encode(uuid), id);
  }
  assert.equal(new Set(ids).size, ids.length);
  assert.equal(new Set(ids.map((id) => id.slice(0, 8))).size, 1, 'one prefix a submit');
  // the 74 free bits after it vary: each base64 digit of the tail takes every value its free bits allow (those
  // holding the version's and the variant's fixed bits 4 and 16, the last one's 2 bits 4, the others 64)
  const values = (at: number) => new Set(ids.map((id) => id[at])).size;
  assert.deepEqual([8, 9, 10, 21].map(values), [4, 64, 16, 4]);
  for (let at = 11; at < 21; at++) assert.equal(values(at), 64, `position ${at} varies`);
  // another submit another prefix (47 random bits: equal once in 10^14)
  const others = new Set(Array.from({ length: 50 }, () => graphTaskIds()().slice(0, 8)));
  assert.equal(others.size, 50);
});
