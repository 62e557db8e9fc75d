/**
 * The key every per-address limit counts a client under (admission's cap for
 * fresh keys, the rate limit per IP, the budget of waiting sockets). An IPv4
 * address is its own key. An IPv6 host is usually given a whole /64 (SLAAC,
 * privacy addresses), so one host could take a fresh address per socket:
 * IPv6 addresses are keyed by their first `ipv6PrefixBits` bits
 * (IPV6_PREFIX_BITS, 64 by default), written `prefix::/bits`. An IPv4-mapped
 * IPv6 address (`::ffff:192.0.2.1`, what a dual-stack listener reports for an
 * IPv4 client) is the IPv4 address. Only the socket's own remote address is
 * keyed: no proxy header is trusted.
 */
import { isIPv4, isIPv6 } from 'node:net';

/** IPv6 prefix length per-address limits use by default. */
export const DEFAULT_IPV6_PREFIX_BITS = 64;

/**
 * The per-address key of `address` (a socket's `remoteAddress`): an IPv4
 * address as is, an IPv6 address as its `ipv6PrefixBits` prefix
 * (`2001:db8:1:2::/64`), an IPv4-mapped IPv6 address as the IPv4 address.
 * Anything else (not an IP address) is its own key.
 */
export function addressKey(address: string, ipv6PrefixBits = DEFAULT_IPV6_PREFIX_BITS): string {
  if (isIPv4(address)) return address;
  // A zone (`fe80::1%eth0`) names the interface, not the host.
  const bare = address.split('%', 1)[0]!;
  if (!isIPv6(bare)) return address;
  const groups = ipv6Groups(bare);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`;
  const bits = Math.max(0, Math.min(128, Math.trunc(ipv6PrefixBits)));
  const masked = groups.map((group, i) => {
    const kept = Math.max(0, Math.min(16, bits - i * 16));
    return kept === 0 ? 0 : group & (0xffff << (16 - kept)) & 0xffff;
  });
  return `${compressed(masked)}/${bits}`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a trailing dotted IPv4 part as two groups). */
function ipv6Groups(address: string): number[] {
  const [head = '', tail] = address.split('::');
  const parse = (part: string): number[] => {
    if (part === '') return [];
    return part.split(':').flatMap((piece) => {
      if (!piece.includes('.')) return [Number.parseInt(piece, 16)];
      const [a = 0, b = 0, c = 0, d = 0] = piece.split('.').map(Number);
      return [(a << 8) | b, (c << 8) | d];
    });
  };
  const front = parse(head);
  if (tail === undefined) return front;
  const back = parse(tail);
  return [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
}

/** RFC 5952 text of eight groups: lower-case hex, the longest run of two or more zero groups as `::`. */
function compressed(groups: number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < groups.length; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < groups.length && groups[j] === 0) j++;
    if (j - i > bestLength) [bestStart, bestLength] = [i, j - i];
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}
