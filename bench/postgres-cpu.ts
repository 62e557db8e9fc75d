/**
 * The CPU a Postgres server on this machine spends, read from /proc (utime +
 * stime, in `getconf CLK_TCK` ticks): a whole cluster (its postmaster, its
 * children and the children it reaped), or the backends of one database (pids
 * from `pg_stat_activity`), which other users of a shared test server cannot
 * move. Used by bench/read-standbys.ts and bench/queue-peer.ts.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

/** Clock ticks per second of /proc/PID/stat's times. */
export const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/** The fields of /proc/PID/stat after the command name (state is [0], ppid [1], utime [11], stime [12], cutime [13], cstime [14]). */
export function statFields(pid: number | string): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined; // exited
  }
}

/**
 * CPU ticks a Postgres cluster used so far: its postmaster, its live children,
 * and the children it has reaped (a backend that ended mid-round is not lost).
 */
export function clusterTicks(postmasterPID: number): number {
  let ticks = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(entry);
    if (fields === undefined) continue;
    const own = Number(fields[11]) + Number(fields[12]);
    if (Number(entry) === postmasterPID) ticks += own + Number(fields[13]) + Number(fields[14]);
    else if (Number(fields[1]) === postmasterPID) ticks += own;
  }
  return ticks;
}

/** A Postgres cluster on this machine, watched through one open connection. */
export interface Cluster {
  postmasterPID: number;
  client: pg.Client;
}

/**
 * Connects to a cluster (`url` names another database than the measured one,
 * so these queries are not counted as its backends') and finds its postmaster on this machine (the first
 * line of `postmaster.pid` in its data directory); undefined with the reason
 * when its processes cannot be read here.
 */
export async function watchCluster(url: string): Promise<Cluster | string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const directory = (await client.query<{ data_directory: string }>('show data_directory')).rows[0]!.data_directory;
  let postmasterPID: number;
  try {
    postmasterPID = Number.parseInt(readFileSync(join(directory, 'postmaster.pid'), 'utf8').split('\n')[0]!, 10);
  } catch (error) {
    await client.end();
    return `cannot read ${directory}/postmaster.pid (${(error as Error).message}): is the server on this machine?`;
  }
  if (statFields(postmasterPID) === undefined) {
    await client.end();
    return `no process ${postmasterPID} (the postmaster of ${directory}) on this machine`;
  }
  return { postmasterPID, client };
}

/** The pids of the backends connected to `database` now. */
export async function backendPIDs(cluster: Cluster, database: string): Promise<number[]> {
  return (await cluster.client.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1', [database])).rows.map((row) => row.pid);
}

/** CPU ticks so far of each of `pids` still running, read right after the cluster's so both cover the same window. */
export function backendTicks(pids: readonly number[]): Map<number, number> {
  const ticks = new Map<number, number>();
  for (const pid of pids) {
    const fields = statFields(pid);
    if (fields !== undefined) ticks.set(pid, Number(fields[11]) + Number(fields[12]));
  }
  return ticks;
}

/** Ticks the backends used between two {@link backendTicks} (one started in between counts from 0; one ended in between is missed). */
export function backendDelta(before: Map<number, number>, after: Map<number, number>): number {
  let ticks = 0;
  for (const [pid, now] of after) ticks += now - (before.get(pid) ?? 0);
  return ticks;
}

/** Ticks as ms of CPU per unit of work. */
export const msPer = (ticks: number, units: number) => ((ticks / TICKS_PER_SECOND) * 1_000) / units;

/**
 * CPU time so far, in ns, of each of `pids` still running, from
 * /proc/PID/schedstat (the process's main thread: all of a Postgres backend,
 * which has one): finer than /proc/PID/stat's 10 ms ticks, for phases that
 * last a fraction of a second.
 */
export function backendNanoseconds(pids: readonly number[]): Map<number, number> {
  const ns = new Map<number, number>();
  for (const pid of pids) {
    try {
      ns.set(pid, Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]));
    } catch {
      // exited
    }
  }
  return ns;
}
