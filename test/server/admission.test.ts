/**
 * The admission rule itself (src/server/admission.ts), without a server: the
 * order of its checks and their codes, which counts a known viewer escapes,
 * releases, and the cached standing lookup.
 */
import { describe, expect, it } from 'vitest';
import { AdmissionRefusedError, createAdmissionPool, createStandingLookup, type Applicant } from '../../src/server/admission.js';

const refusal = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    if (error instanceof AdmissionRefusedError) return { code: error.code, status: error.status, retryable: error.retryable };
    throw error;
  }
  return undefined;
};

describe('admission pool', () => {
  const fresh = (n: number, ip: string | null = '10.0.0.1'): Applicant => ({ viewerDID: `did:key:zFresh${n}`, ip, standing: 'unknown' });
  const owner = (ip: string | null = '10.0.0.1'): Applicant => ({ viewerDID: 'did:key:zOwner', ip, standing: 'known' });

  it('caps each viewer (429 TOO_MANY_SUBSCRIPTIONS), then fresh keys per address (429 TOO_MANY_SUBSCRIPTIONS_PER_IP)', () => {
    const pool = createAdmissionPool({ perViewer: 2, perIP: 3, total: 100, unknownPercent: 100 }, 'things');
    pool.admit(fresh(1));
    pool.admit(fresh(1));
    expect(refusal(() => pool.admit(fresh(1)))).toEqual({ code: 'TOO_MANY_SUBSCRIPTIONS', status: 429, retryable: false });
    pool.admit(fresh(2));
    expect(refusal(() => pool.admit(fresh(2)))).toEqual({ code: 'TOO_MANY_SUBSCRIPTIONS_PER_IP', status: 429, retryable: false });
    // Known viewers are not counted per address; another address, or none, is not this one.
    pool.admit(owner());
    pool.admit(owner());
    pool.admit(fresh(3, '10.0.0.2'));
    pool.admit(fresh(4, null));
    expect(pool.total()).toBe(7);
  });

  it('keeps the rest of the total for known viewers: fresh keys past their share and anyone past the total get 503 OVERLOADED (retryable)', () => {
    const pool = createAdmissionPool({ perViewer: 10, perIP: 0, total: 4, unknownPercent: 50 }, 'things');
    const releases = [pool.admit(fresh(1)), pool.admit(fresh(2))];
    expect(refusal(() => pool.admit(fresh(3)))).toEqual({ code: 'OVERLOADED', status: 503, retryable: true });
    pool.admit(owner());
    pool.admit(owner());
    expect(refusal(() => pool.admit(owner()))).toEqual({ code: 'OVERLOADED', status: 503, retryable: true });
    expect(pool.unknown()).toBe(2);
    // A release (once, however often called) frees the place for either kind.
    releases[0]!();
    releases[0]!();
    expect(pool.unknown()).toBe(1);
    expect(pool.total()).toBe(3);
    pool.admit(fresh(3));
    expect(pool.count('did:key:zFresh3')).toBe(1);
  });

  it('0 % admits no fresh key; known viewers fill the whole total', () => {
    const pool = createAdmissionPool({ perViewer: 10, perIP: 0, total: 2, unknownPercent: 0 }, 'things');
    expect(refusal(() => pool.admit(fresh(1)))?.code).toBe('OVERLOADED');
    pool.admit(owner());
    pool.admit(owner());
    expect(pool.total()).toBe(2);
  });
});

describe('standing lookup', () => {
  it('knows service DIDs without asking, asks once per DID while cached, and re-asks an unknown answer sooner than a known one', async () => {
    let clock = 0;
    const asked: string[] = [];
    const owners = new Set(['did:key:zOwner']);
    const standingOf = createStandingLookup({
      serviceDIDs: new Set(['did:key:zService']),
      ownsRows: async (did) => {
        asked.push(did);
        return owners.has(did);
      },
      knownTtlMs: 1_000,
      unknownTtlMs: 100,
      now: () => clock,
    });
    expect(await standingOf('did:key:zService')).toBe('known');
    expect(await Promise.all([standingOf('did:key:zOwner'), standingOf('did:key:zOwner')])).toEqual(['known', 'known']);
    expect(await standingOf('did:key:zNew')).toBe('unknown');
    expect(asked).toEqual(['did:key:zOwner', 'did:key:zNew']);
    // The new viewer writes a row: known once the short answer runs out; the owner's answer lasts longer.
    owners.add('did:key:zNew');
    clock = 50;
    expect(await standingOf('did:key:zNew')).toBe('unknown');
    clock = 150;
    expect(await standingOf('did:key:zNew')).toBe('known');
    expect(await standingOf('did:key:zOwner')).toBe('known');
    expect(asked).toEqual(['did:key:zOwner', 'did:key:zNew', 'did:key:zNew']);
  });

  it('counts a failed probe as unknown and does not keep it', async () => {
    let fail = true;
    const standingOf = createStandingLookup({
      serviceDIDs: new Set(),
      ownsRows: async () => {
        if (fail) throw new Error('database unavailable');
        return true;
      },
    });
    expect(await standingOf('did:key:zOwner')).toBe('unknown');
    fail = false;
    expect(await standingOf('did:key:zOwner')).toBe('known');
  });
});
