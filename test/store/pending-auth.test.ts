import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/store/errors.js';
import {
  consumePendingAuth,
  createPendingAuth,
  deleteExpiredPendingAuth,
  getPendingAuthSummary,
  toPendingAuthSummary,
  type NewPendingAuth,
} from '../../src/store/pending-auth/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { OWNER } from '../helpers/row-fixtures.js';

const VERIFIER = 'pkce-verifier-Secret-0123456789abcdefghijklmnopqrstuvwxyz';
const MINUTE = 60_000;

describeEachDialect('pending auth', (suite) => {
  function newAuth(overrides: Partial<NewPendingAuth> = {}): NewPendingAuth {
    return {
      state: 'state-1',
      codeVerifier: VERIFIER,
      provider: 'google',
      ownerDID: OWNER,
      redirectURL: 'https://app.example/callback',
      scopes: ['calendar.read', 'contacts.read'],
      expiresAt: suite.clock.now() + 10 * MINUTE,
      ...overrides,
    };
  }

  /** Everything an error exposes: message, stack, own properties and its cause chain. */
  function everythingIn(error: unknown): string {
    const parts: string[] = [];
    let current: unknown = error;
    while (current instanceof Error) {
      parts.push(String(current.message), String(current.stack), JSON.stringify(current, Object.getOwnPropertyNames(current)));
      current = current.cause;
    }
    parts.push(String(current));
    return parts.join('\n');
  }

  describe('create and consume', () => {
    it('round-trips every field, defaulting createdAt to the clock', async () => {
      const summary = await createPendingAuth(
        suite.store,
        newAuth({ ownerWrappableDID: 'did:key:z6MkWrapO', controllerWrappableDID: 'did:key:z6MkWrapC', isIncremental: true }),
      );
      expect(summary).not.toHaveProperty('codeVerifier');
      const record = await consumePendingAuth(suite.store, 'state-1');
      expect(record).toEqual({
        state: 'state-1',
        codeVerifier: VERIFIER,
        provider: 'google',
        ownerDID: OWNER,
        ownerWrappableDID: 'did:key:z6MkWrapO',
        controllerWrappableDID: 'did:key:z6MkWrapC',
        createdAt: suite.clock.now(),
        redirectURL: 'https://app.example/callback',
        scopes: ['calendar.read', 'contacts.read'],
        isIncremental: true,
        expiresAt: suite.clock.now() + 10 * MINUTE,
      });
      expect(summary).toEqual(toPendingAuthSummary(record!));
    });

    it('is_incremental round-trips both ways and defaults to false', async () => {
      await createPendingAuth(suite.store, newAuth({ state: 'inc', isIncremental: true }));
      await createPendingAuth(suite.store, newAuth({ state: 'full', isIncremental: false }));
      await createPendingAuth(suite.store, newAuth({ state: 'default' }));
      expect((await consumePendingAuth(suite.store, 'inc'))?.isIncremental).toBe(true);
      expect((await consumePendingAuth(suite.store, 'full'))?.isIncremental).toBe(false);
      expect((await consumePendingAuth(suite.store, 'default'))?.isIncremental).toBe(false);
    });

    it('scopes round-trip in order, including none and unusual characters', async () => {
      const scopes = ['https://www.googleapis.com/auth/calendar', 'a b', 'ünï"code', 'repo:status'];
      await createPendingAuth(suite.store, newAuth({ state: 'many', scopes }));
      await createPendingAuth(suite.store, newAuth({ state: 'none', scopes: [] }));
      expect((await consumePendingAuth(suite.store, 'many'))?.scopes).toEqual(scopes);
      expect((await consumePendingAuth(suite.store, 'none'))?.scopes).toEqual([]);
    });

    it('is single use', async () => {
      await createPendingAuth(suite.store, newAuth());
      expect(await consumePendingAuth(suite.store, 'state-1')).not.toBeNull();
      expect(await consumePendingAuth(suite.store, 'state-1')).toBeNull();
    });

    it('an unknown state consumes to null', async () => {
      expect(await consumePendingAuth(suite.store, 'never-created')).toBeNull();
    });

    it('a record expiring exactly now is still consumable', async () => {
      await createPendingAuth(suite.store, newAuth({ expiresAt: suite.clock.now() + MINUTE }));
      suite.clock.advance(MINUTE);
      expect(await consumePendingAuth(suite.store, 'state-1')).toMatchObject({ state: 'state-1', codeVerifier: VERIFIER });
    });

    it('an expired record is not returned, and the attempt spends it', async () => {
      const expiresAt = suite.clock.now() + MINUTE;
      await createPendingAuth(suite.store, newAuth({ expiresAt }));
      suite.clock.advance(MINUTE + 1);
      expect(await consumePendingAuth(suite.store, 'state-1')).toBeNull();
      // Even a clock that goes back cannot revive it.
      suite.clock.set(expiresAt - MINUTE);
      expect(await consumePendingAuth(suite.store, 'state-1')).toBeNull();
      expect(await getPendingAuthSummary(suite.store, 'state-1')).toBeNull();
    });

    it('a reused state is refused and leaves the first record intact', async () => {
      await createPendingAuth(suite.store, newAuth());
      const attempt = createPendingAuth(suite.store, newAuth({ codeVerifier: 'other-verifier', provider: 'github' }));
      await expect(attempt).rejects.toBeInstanceOf(InvalidInputError);
      expect(everythingIn(await attempt.catch((e: unknown) => e))).not.toContain('other-verifier');
      expect(await consumePendingAuth(suite.store, 'state-1')).toMatchObject({ provider: 'google', codeVerifier: VERIFIER });
    });

    it.runIf(suite.dialect === 'postgres')('20 concurrent consumes of one state: exactly one record, 19 null', async () => {
      await createPendingAuth(suite.store, newAuth());
      const results = await Promise.all(Array.from({ length: 20 }, () => consumePendingAuth(suite.store, 'state-1')));
      const records = results.filter((r) => r !== null);
      expect(records).toHaveLength(1);
      expect(records[0]).toMatchObject({ state: 'state-1', codeVerifier: VERIFIER });
      expect(results.filter((r) => r === null)).toHaveLength(19);
    });
  });

  describe('the code verifier stays secret', () => {
    it('the summary reader and summary mapper never carry it', async () => {
      await createPendingAuth(suite.store, newAuth());
      const summary = await getPendingAuthSummary(suite.store, 'state-1');
      expect(summary).toMatchObject({ state: 'state-1', provider: 'google' });
      expect(JSON.stringify(summary)).not.toContain(VERIFIER);
      // Reading a summary does not consume the record.
      expect(await consumePendingAuth(suite.store, 'state-1')).not.toBeNull();
    });

    it('invalid input is refused without quoting the verifier', async () => {
      const bad = [
        newAuth({ provider: null as unknown as string }),
        newAuth({ scopes: 'calendar' as unknown as string[] }),
        newAuth({ expiresAt: Number.NaN }),
        newAuth({ state: '' }),
        newAuth({ isIncremental: 'yes' as unknown as boolean }),
      ];
      for (const input of bad) {
        const error = await createPendingAuth(suite.store, input).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(InvalidInputError);
        expect(everythingIn(error)).not.toContain(VERIFIER);
      }
      expect(await getPendingAuthSummary(suite.store, 'state-1')).toBeNull();
    });

    it('a driver failure is rethrown without the driver detail', async () => {
      // Make the database refuse a row that passes validation, in a way that quotes the row back:
      // Postgres puts the failing row (verifier included) in a check violation's detail; the SQLite
      // trigger puts the verifier in the message itself.
      const db = suite.store.db;
      if (suite.dialect === 'postgres') {
        await sql`alter table kubun_connector_pending_auth add constraint test_refuse check (provider <> 'refused')`.execute(db);
      } else {
        await sql`create trigger test_refuse before insert on kubun_connector_pending_auth when new.provider = 'refused'
          begin select raise(abort, 'refused ' || new.code_verifier); end`.execute(db);
      }
      try {
        const raw = await db
          .insertInto('kubun_connector_pending_auth')
          .values({ state: 'raw', code_verifier: VERIFIER, provider: 'refused', owner_did: 'o', created_at: 0, redirect_url: 'r', scopes: '[]', is_incremental: 0, expires_at: 0 })
          .execute()
          .catch((e: unknown) => e);
        // The unscrubbed driver error does carry the verifier: the scrubbing below is not vacuous.
        expect(everythingIn(raw)).toContain(VERIFIER);

        const error = await createPendingAuth(suite.store, newAuth({ provider: 'refused' })).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(Error);
        expect((error as Error).name).toBe('PendingAuthWriteError');
        expect((error as Error).message).toMatch(/could not store the pending authorization/);
        expect(everythingIn(error)).not.toContain(VERIFIER);
      } finally {
        if (suite.dialect === 'postgres') {
          await sql`alter table kubun_connector_pending_auth drop constraint test_refuse`.execute(db);
        } else {
          await sql`drop trigger test_refuse`.execute(db);
        }
      }
    });
  });

  describe('deleteExpiredPendingAuth', () => {
    it('deletes strictly before the cutoff: a record expiring at the cutoff stays consumable', async () => {
      const cutoff = suite.clock.now();
      await createPendingAuth(suite.store, newAuth({ state: 'before', expiresAt: cutoff - 1 }));
      await createPendingAuth(suite.store, newAuth({ state: 'at', expiresAt: cutoff }));
      await createPendingAuth(suite.store, newAuth({ state: 'after', expiresAt: cutoff + 1 }));
      expect(await deleteExpiredPendingAuth(suite.store, cutoff)).toBe(1);
      expect(await getPendingAuthSummary(suite.store, 'before')).toBeNull();
      expect(await consumePendingAuth(suite.store, 'at')).toMatchObject({ state: 'at' });
      expect(await getPendingAuthSummary(suite.store, 'after')).not.toBeNull();
    });

    it('works through many rows in bounded batches and returns the total', async () => {
      const cutoff = suite.clock.now();
      for (let i = 0; i < 23; i++) {
        await createPendingAuth(suite.store, newAuth({ state: `old-${i}`, expiresAt: cutoff - 1 - i }));
      }
      await createPendingAuth(suite.store, newAuth({ state: 'live', expiresAt: cutoff + MINUTE }));
      expect(await deleteExpiredPendingAuth(suite.store, cutoff, { batchSize: 5 })).toBe(23);
      expect(await deleteExpiredPendingAuth(suite.store, cutoff, { batchSize: 5 })).toBe(0);
      expect(await getPendingAuthSummary(suite.store, 'live')).not.toBeNull();
    });

    it('an exact multiple of the batch size ends cleanly', async () => {
      const cutoff = suite.clock.now();
      for (let i = 0; i < 10; i++) await createPendingAuth(suite.store, newAuth({ state: `old-${i}`, expiresAt: cutoff - 1 }));
      expect(await deleteExpiredPendingAuth(suite.store, cutoff, { batchSize: 5 })).toBe(10);
    });

    it('rejects a batch size below one', async () => {
      await expect(deleteExpiredPendingAuth(suite.store, 0, { batchSize: 0 })).rejects.toBeInstanceOf(InvalidInputError);
    });

    it.runIf(suite.dialect === 'postgres')('concurrent sweeps delete each row once', async () => {
      const cutoff = suite.clock.now();
      for (let i = 0; i < 40; i++) await createPendingAuth(suite.store, newAuth({ state: `old-${i}`, expiresAt: cutoff - 1 }));
      const counts = await Promise.all(Array.from({ length: 4 }, () => deleteExpiredPendingAuth(suite.store, cutoff, { batchSize: 3 })));
      expect(counts.reduce((a, b) => a + b, 0)).toBe(40);
    });
  });
});
