/**
 * Three shapes of per-request code that make short-lived objects outlive
 * V8's young-generation collections (scavenges) on this server's Node, each
 * against the shape the server uses instead (issue 21; docs/architecture.md,
 * "Per-request objects must die young"). Every case runs in its own
 * `node --trace-gc-nvp` child, makes the same short-lived objects in a loop,
 * and reports the bytes its scavenges promoted to the old generation, their
 * pause and how many full collections it took. The promoted garbage is what
 * slows each scavenge and fills the old space until a full collection.
 *
 *   npx tsx bench/gc-shapes.ts        (about 30 s; the pg cases need Postgres: PG_TEST_URL)
 *
 * - weakmap / property: a process-wide WeakMap keyed by each "request", or
 *   the same value kept on the request under a symbol (Pothos's context
 *   caches, patched in patches/@pothos+core+*.patch; src/server/request-state.ts).
 * - getter-literal / class: an object literal with a getter over the page,
 *   or a class with the getter on its prototype (resolvers/pagination.ts).
 * - pg-promise / pg-callback: `client.query(text, values)` awaited, or the
 *   same statement with a callback (src/db/connect.ts); pg-promise once more
 *   under `--no-allocation-site-pretenuring`, which shows that V8's
 *   pretenuring of the promise path's objects is what promotes its rows.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const CASES = ['weakmap', 'property', 'getter-literal', 'class', 'pg-promise', 'pg-callback'] as const;
type Case = (typeof CASES)[number];

/** One case's loop, in the child. */
async function run(name: Case): Promise<void> {
  const page = () => Array.from({ length: 20 }, (_, j) => ({ j, text: `row ${j}` }));
  let sink: unknown;
  if (name === 'weakmap' || name === 'property') {
    const entries = new WeakMap<object, unknown>();
    const slot = Symbol('entry');
    for (let i = 0; i < 1_000_000; i++) {
      const request: Record<PropertyKey, unknown> = { i };
      const value = { request, rows: page() };
      if (name === 'weakmap') entries.set(request, value);
      else request[slot] = value;
      sink = request;
    }
  } else if (name === 'getter-literal' || name === 'class') {
    class PageInfo {
      constructor(private readonly items: readonly unknown[]) {}
      get first() {
        return this.items[0];
      }
    }
    for (let i = 0; i < 1_000_000; i++) {
      const items = page();
      sink =
        name === 'class'
          ? new PageInfo(items)
          : {
              get first() {
                return items[0];
              },
            };
    }
  } else {
    const client = new pg.Client({ connectionString: process.env.PG_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
    await client.connect();
    const text = `select i, 'row ' || i as text, now() as at from generate_series(1, $1::int) as i`;
    for (let i = 0; i < 20_000; i++) {
      sink =
        name === 'pg-promise'
          ? await client.query(text, [50])
          : await new Promise((resolve, reject) => client.query(text, [50], (error: Error | null, result: unknown) => (error ? reject(error) : resolve(result))));
    }
    await client.end();
  }
  void sink;
}

/** `node --trace-gc-nvp` (and `flags`) for one case: what its scavenges promoted. */
function measure(name: Case, flags: string[] = []): string {
  const child = spawnSync(process.execPath, ['--trace-gc-nvp', ...flags, '--import', 'tsx', fileURLToPath(import.meta.url), name], { encoding: 'utf8', maxBuffer: 1 << 28 });
  const label = [name, ...flags].join(' ');
  if (child.status !== 0) return `| ${label} | failed: ${(child.stderr || child.stdout).trim().split('\n').at(-1)} | | | |`;
  const lines = child.stdout.split('\n');
  const field = (line: string, key: string) => Number(new RegExp(`\\b${key}=([\\d.]+)`).exec(line)?.[1] ?? 0);
  const scavenges = lines.filter((l) => l.includes(' gc=s '));
  const sum = (key: string) => scavenges.reduce((total, l) => total + field(l, key), 0);
  const mib = (bytes: number) => (bytes / 1_048_576).toFixed(1);
  return `| ${label} | ${mib(sum('allocated'))} | ${mib(sum('promoted'))} | ${sum('pause').toFixed(0)} | ${lines.filter((l) => l.includes(' gc=mc ')).length} |`;
}

const wanted = process.argv[2];
if (wanted !== undefined && (CASES as readonly string[]).includes(wanted)) {
  await run(wanted as Case);
} else {
  console.log('\n### Promotion by code shape (node --trace-gc-nvp; scavenges summed)\n');
  console.log('| case | allocated MiB | promoted MiB | scavenge pause ms | full collections |\n|---|--:|--:|--:|--:|');
  for (const name of CASES) console.log(measure(name));
  console.log(measure('pg-promise', ['--no-allocation-site-pretenuring']));
}
