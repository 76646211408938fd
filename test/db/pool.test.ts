import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPool } from '../../src/db/pool.js';
import { defaultPostgresUrl } from '../../support/db.js';

test("tgs' sessions run without JIT unless DATABASE_URL's options say otherwise", async () => {
  const plain = createPool(`${defaultPostgresUrl()}/postgres`, 1);
  const chosen = createPool(`${defaultPostgresUrl()}/postgres?options=${encodeURIComponent('-c jit=on')}`, 1);
  try {
    assert.equal((await plain.query<{ jit: string }>('SHOW jit')).rows[0].jit, 'off');
    assert.equal((await chosen.query<{ jit: string }>('SHOW jit')).rows[0].jit, 'on');
  } finally {
    await plain.end();
    await chosen.end();
  }
});
