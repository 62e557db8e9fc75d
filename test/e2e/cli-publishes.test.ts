/**
 * Writes made outside the server publish their change (issue 38 item 4), on
 * both dialects: `npm run ops` cancel / retry / requeue against the database
 * a running server serves reach that server's subscribers within a second,
 * as a change made through the API does (a NOTIFY on Postgres, the change
 * outbox on SQLite, which the server's feed polls), and nobody else's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DialectName } from '../../src/db/connect.js';
import { opsCommand } from '../../src/cli/ops.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2eGraphQLClient, e2ePrincipals, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';

const AUDIENCE = 'connector-store-cli-publishes';
const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['alice', 'mallory', 'worker']);
const { gql, subscribe, closeSubscriptions } = e2eGraphQLClient(tokens, 'alice');
const OPERATIONS_CHANGED = `subscription { operationsChanged { id operationID state } }`;
const dialects: DialectName[] = testDialects().filter(dialectAvailable);

describe.each(dialects)('%s: the operator CLI publishes what it changed', (dialect) => {
  let started: E2EServers | undefined;

  beforeAll(async () => {
    await mint();
    started = await startE2EServers(dialect, { audience: AUDIENCE, serviceDID: keys.worker.did, name: 'cli_publishes' });
  }, 60_000);
  afterAll(async () => {
    await closeSubscriptions();
    await started?.dispose();
  });

  /** Runs `npm run ops -- …argv` in this process, against the server's database. */
  const ops = async (argv: string[]) => {
    let stdout = '';
    let stderr = '';
    const code = await opsCommand.run({ argv, env: { DATABASE_URL: started!.databaseURL }, cwd: process.cwd(), stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
    return { code, stdout, stderr };
  };

  it('cancel, retry and requeue each reach the owner’s open subscription within a second; a stranger hears nothing', async () => {
    const server = started!.server;
    // Subscribed before the claim, whose own event is then the first: a claim's NOTIFY reaches the feed after its answer
    // (on a loaded machine, after a subscription opened next), so only this order says which event is whose.
    const owner = await subscribe(server, OPERATIONS_CHANGED, {}, 'alice');
    const stranger = await subscribe(server, OPERATIONS_CHANGED, {}, 'mallory');
    const claimed = (await gql(server, CLAIM, { input: claimInput({ operationID: `op-cli-${dialect}` }) })).data.claimOperation;
    expect(claimed.outcome).toBe('CLAIMED');
    await owner.waitFor(1, 5_000);
    expect(owner.events[0]!.data.operationsChanged).toMatchObject({ id: claimed.operation.id, state: 'ATTEMPTED' });

    const steps: [string[], string][] = [
      [['cancel', claimed.operation.id, '--reason', 'stuck for a day'], 'DEAD'],
      [['retry', claimed.operation.id], 'ATTEMPTED'],
      [['requeue', claimed.operation.id], 'ATTEMPTED'],
    ];
    for (const [i, [argv, state]] of steps.entries()) {
      const at = Date.now();
      expect(await ops(argv)).toMatchObject({ code: 0, stderr: '' });
      await owner.waitFor(i + 2, 1_000);
      const event = owner.events[i + 1]!.data.operationsChanged;
      expect({ step: argv[0], id: event.id, state: event.state }).toEqual({ step: argv[0], id: claimed.operation.id, state });
      expect(Date.now() - at).toBeLessThan(1_000);
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(owner.events).toHaveLength(1 + steps.length);
    expect(stranger.events).toEqual([]);
  });

  it('a refused action publishes nothing', async () => {
    const server = started!.server;
    const owner = await subscribe(server, OPERATIONS_CHANGED, {}, 'alice');
    const claimed = (await gql(server, CLAIM, { input: claimInput({ operationID: `op-cli-refused-${dialect}` }) })).data.claimOperation;
    await owner.waitFor(1, 5_000);
    // Retry applies to a DEAD operation only.
    expect(await ops(['retry', claimed.operation.id])).toMatchObject({ code: 1 });
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(owner.events.map((event) => event.data.operationsChanged)).toEqual([{ id: claimed.operation.id, operationID: `op-cli-refused-${dialect}`, state: 'ATTEMPTED' }]);
  });
});
