/**
 * `npm run ops -- <command>`: the operator's view of write-back work, against
 * DATABASE_URL (default: the embedded SQLite file), through the same store
 * functions as the API. Exit codes: 0 done, 1 refused or failed (not found,
 * changed meanwhile, wrong state, no database), 2 usage error.
 */
import { publishFromOutside } from '../server/change-feed.js';
import { createStoreContext, type StoreContext } from '../store/context.js';
import { StoreError } from '../store/errors.js';
import {
  applyOperationAction,
  getAttemptHistories,
  getOperationByKey,
  getOperationByNodeKey,
  listOperations,
  type ConnectorOperation,
  type OperationAction,
} from '../store/operations/index.js';
import { failureLine, usageError, wantsHelp, type Command, type CommandIO } from './command.js';
import { withConfiguredDatabase } from './database.js';

const USAGE = `usage: npm run ops -- <command> [args]

  stuck [--limit N]                         live operations nobody is moving (a lapsed lease,
                                            or due for 15 minutes with no live lease), newest first
  show <id | callerDID operationID>         an operation: state, schedule, last error, history
  retry <id | callerDID operationID>        a DEAD operation: again, with a new attempt budget
                                            (RECONCILE_ONLY when a request may have been sent)
  cancel <id | callerDID operationID> --reason TEXT
                                            a live operation: give it up (DEAD)
  requeue <id | callerDID operationID>      a live operation: due now, deferral cleared

<id> is the operation's GraphQL id. Actions act as OPS_ACTOR_DID (default
did:web:localhost:ops) and are recorded in the operation's history. Add --json
for machine-readable output.
`;

const ACTIONS: Record<string, OperationAction> = { retry: 'retry', cancel: 'cancel', requeue: 'requeue' };

interface Parsed {
  command: string;
  positional: string[];
  reason?: string;
  limit: number;
  json: boolean;
}

function parse(argv: readonly string[]): Parsed | string {
  const [command, ...rest] = argv;
  if (command === undefined) return 'a command is required';
  if (command.startsWith('-')) return `unknown option ${JSON.stringify(command)}`;
  const parsed: Parsed = { command, positional: [], limit: 20, json: false };
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    // `--reason TEXT` or `--reason=TEXT`.
    const [flag, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    if (flag === '--json' && inline === undefined) parsed.json = true;
    else if (flag === '--reason' || flag === '--limit') {
      const value = inline ?? rest[++i];
      if (value === undefined) return `${flag} needs a value`;
      if (flag === '--reason') parsed.reason = value;
      else {
        const limit = /^\d+$/.test(value) ? Number(value) : Number.NaN;
        if (!(limit >= 1 && limit <= 500)) return '--limit must be an integer from 1 to 500';
        parsed.limit = limit;
      }
    } else if (arg.startsWith('-')) return `unknown option ${JSON.stringify(arg)}`;
    else parsed.positional.push(arg);
  }
  if (parsed.command === 'stuck') {
    if (parsed.positional.length > 0) return 'stuck takes no operation';
  } else if (parsed.command === 'show' || parsed.command in ACTIONS) {
    if (parsed.positional.length !== 1 && parsed.positional.length !== 2) return `${parsed.command} takes an id, or a caller DID and an operation id`;
    if (parsed.command === 'cancel' && (parsed.reason === undefined || parsed.reason.trim() === '')) return 'cancel needs --reason';
  } else return `unknown command ${JSON.stringify(parsed.command)}`;
  return parsed;
}

/** The node key inside a ConnectorOperation global id (base64url of `ConnectorOperation:<key>`), or undefined. */
function nodeKeyOf(id: string): string | undefined {
  const decoded = Buffer.from(id, 'base64url').toString('utf8');
  return decoded.startsWith('ConnectorOperation:') && decoded.length > 'ConnectorOperation:'.length ? decoded.slice('ConnectorOperation:'.length) : undefined;
}

async function find(store: StoreContext, positional: readonly string[]): Promise<ConnectorOperation | null> {
  if (positional.length === 2) return getOperationByKey(store, { callerDID: positional[0]!, operationID: positional[1]! });
  const nodeKey = nodeKeyOf(positional[0]!);
  return nodeKey === undefined ? null : getOperationByNodeKey(store, nodeKey);
}

const iso = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());
const globalID = (op: ConnectorOperation) => Buffer.from(`ConnectorOperation:${op.nodeKey}`).toString('base64url');

function summary(op: ConnectorOperation): string {
  return `${globalID(op)}  ${op.state.padEnd(14)} ${op.connectorName}/${op.model} ${op.op}  caller ${op.callerDID} op ${op.operationID}  attempts ${op.attempts}  due ${iso(op.nextAttemptAt)}  lease until ${iso(op.leaseExpiresAt)}${op.lastKind !== null ? `  last ${op.lastKind}${op.lastHTTPStatus !== null ? ` ${op.lastHTTPStatus}` : ''}` : ''}${op.lastError !== null ? `  "${op.lastError}"` : ''}`;
}

async function run(io: CommandIO, store: StoreContext, parsed: Parsed): Promise<number> {
  const out = (value: unknown, text: string) => io.stdout(parsed.json ? `${JSON.stringify(value)}\n` : `${text}\n`);
  if (parsed.command === 'stuck') {
    const page = await listOperations(store, { visibleTo: null, first: parsed.limit, filter: { stuck: true } });
    out(page.operations, page.operations.length === 0 ? 'nothing is stuck' : page.operations.map(summary).join('\n') + (page.hasMore ? `\n… more (raise --limit)` : ''));
    return 0;
  }
  const operation = await find(store, parsed.positional);
  if (operation === null) {
    io.stderr(`${parsed.command}: no such operation\n`);
    return 1;
  }
  if (parsed.command === 'show') {
    const [history] = await getAttemptHistories(store, [{ key: { callerDID: operation.callerDID, operationID: operation.operationID }, first: 50 }]);
    const lines = history!.attempts.map(
      (a) =>
        `  #${a.seq} ${a.kind === 'attempt' ? `attempt ${a.attempt}` : `${a.kind} by ${a.actorDID}`}  ${iso(a.startedAt)} → ${iso(a.endedAt)}${a.sentAt !== null ? '  sent' : ''}${a.outcome !== null ? `  ${a.outcome}` : ''}${a.httpStatus !== null ? ` ${a.httpStatus}` : ''}${a.message !== null ? `  "${a.message}"` : ''}`,
    );
    out({ operation, history: history!.attempts }, [summary(operation), ...(lines.length > 0 ? ['history (newest first):', ...lines] : ['no attempts yet'])].join('\n'));
    return 0;
  }
  const changed = await applyOperationAction(store, {
    key: { callerDID: operation.callerDID, operationID: operation.operationID },
    version: operation.version,
    action: ACTIONS[parsed.command]!,
    actorDID: io.env.OPS_ACTOR_DID ?? 'did:web:localhost:ops',
    reason: parsed.reason ?? null,
  });
  // Committed: open consoles and waiting workers hear of it as of a change made through the API.
  await publishFromOutside(store, [{ kind: 'operation', nodeKey: changed.nodeKey }]);
  out(changed, `${parsed.command}: ${summary(changed)}`);
  return 0;
}

export const opsCommand: Command = {
  summary: 'stuck work, one operation\'s history, retry / cancel / requeue',
  usage: USAGE,
  async run(io) {
    if (wantsHelp(io.argv)) {
      io.stdout(USAGE);
      return 0;
    }
    const parsed = parse(io.argv);
    if (typeof parsed === 'string') return usageError(io, opsCommand, parsed);
    try {
      return await withConfiguredDatabase(io.env, (database) => run(io, createStoreContext(database.db, database.dialect), parsed));
    } catch (error) {
      // Refusals (changed meanwhile, wrong state) in their own words; anything else as one line.
      io.stderr(error instanceof StoreError ? `${parsed.command}: ${error.message}\n` : failureLine(parsed.command, error));
      return 1;
    }
  },
};
