/**
 * The key of per-address limits (src/server/client-address.ts, issue 41):
 * IPv4 per address, IPv6 per /64 by default (one host holds a whole /64) or
 * per configured prefix, IPv4-mapped IPv6 as IPv4. Unit tests only: the
 * tests send traffic to 127.0.0.1 alone, so no IPv6 network is bound.
 */
import { describe, expect, it } from 'vitest';
import { addressKey } from '../../src/server/client-address.js';

describe('addressKey', () => {
  it('keeps an IPv4 address as it is: each address its own key', () => {
    expect(addressKey('192.0.2.1')).toBe('192.0.2.1');
    expect(addressKey('192.0.2.2')).not.toBe(addressKey('192.0.2.1'));
    expect(addressKey('127.0.0.1', 8)).toBe('127.0.0.1');
  });

  it('keys IPv6 by its /64: every address of one host’s /64 shares a key, the next /64 does not', () => {
    const key = addressKey('2001:db8:1:2:aaaa:bbbb:cccc:dddd');
    expect(key).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:db8:1:2::1')).toBe(key);
    expect(addressKey('2001:0DB8:0001:0002:ffff:ffff:ffff:ffff')).toBe(key);
    expect(addressKey('2001:db8:1:3::1')).not.toBe(key);
    expect(addressKey('::1')).toBe('::/64');
    expect(addressKey('fe80::1%eth0')).toBe('fe80::/64');
  });

  it('keys IPv6 by the configured prefix, up to the whole address', () => {
    expect(addressKey('2001:db8:1:2::1', 48)).toBe('2001:db8:1::/48');
    expect(addressKey('2001:db8:1:ffff::1', 48)).toBe(addressKey('2001:db8:1:2::1', 48));
    expect(addressKey('2001:db8:abcd:1234::1', 56)).toBe('2001:db8:abcd:1200::/56');
    expect(addressKey('2001:db8::1', 128)).toBe('2001:db8::1/128');
    expect(addressKey('2001:db8::2', 128)).not.toBe(addressKey('2001:db8::1', 128));
  });

  it('treats an IPv4-mapped IPv6 address as the IPv4 address (a dual-stack listener’s IPv4 client)', () => {
    expect(addressKey('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(addressKey('::ffff:c000:201')).toBe('192.0.2.1');
    expect(addressKey('::FFFF:127.0.0.1', 32)).toBe('127.0.0.1');
    // Not mapped: an ordinary IPv6 address with an IPv4 tail.
    expect(addressKey('64:ff9b::192.0.2.1')).toBe('64:ff9b::/64');
  });

  it('leaves what is not an IP address as its own key', () => {
    expect(addressKey('unix-socket')).toBe('unix-socket');
  });
});
