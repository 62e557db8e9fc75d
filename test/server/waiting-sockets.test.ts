/**
 * The budget of waiting sockets (src/server/waiting-sockets.ts, issue 41):
 * per address and in all, the oldest evicted once the event loop has polled
 * again; and on a node:http server on 127.0.0.1, slow-header sockets past an
 * address's budget are cut off while a burst of ordinary requests from that
 * one address (accepted together, headers not yet read) is served whole.
 */
import { spawn } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { countWaitingHTTPSockets, createWaitingSocketBudget } from '../../src/server/waiting-sockets.js';

/** Prints a line, then opens N sockets to PORT at once, each sending one request; prints their status lines as JSON. */
const BURST_CLIENT = `
const net = require('node:net');
const [port, n] = process.argv.slice(1).map(Number);
process.stdout.write('ready\\n');
const answers = Array.from({ length: n }, () => new Promise((resolve) => {
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.write('GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n');
  socket.on('error', (error) => resolve(error.code));
  socket.once('data', (chunk) => { resolve(chunk.toString('latin1').split('\\r\\n', 1)[0]); socket.destroy(); });
  socket.on('close', () => resolve('closed'));
}));
Promise.all(answers).then((lines) => process.stdout.write(JSON.stringify(lines)));
`;
const polled = () => new Promise((r) => setTimeout(r, 20));

describe('waiting socket budget', () => {
  it('closes the oldest waiting sockets of an address past its budget, after the next poll, and no one else’s', async () => {
    const budget = createWaitingSocketBudget({ perAddress: 2, total: 100 });
    const closed: string[] = [];
    const stops = ['a1', 'a2', 'a3', 'a4'].map((name) => budget.wait('A', () => closed.push(name)));
    budget.wait('B', () => closed.push('b1'));
    budget.wait(null, () => closed.push('none'));
    // Not at once: a burst whose headers are already in is parsed first.
    expect(closed).toEqual([]);
    stops[3]!();
    await polled();
    expect(closed).toEqual(['a1']);
    expect([budget.count('A'), budget.count('B'), budget.total()]).toEqual([2, 1, 4]);
    stops[1]!();
    stops[1]!();
    expect(budget.count('A')).toBe(1);
  });

  it('closes the oldest waiting socket anywhere past the total', async () => {
    const budget = createWaitingSocketBudget({ perAddress: 0, total: 3 });
    const closed: string[] = [];
    for (const name of ['a', 'b', 'c', 'd', 'e']) budget.wait(name, () => closed.push(name));
    await polled();
    expect(closed).toEqual(['a', 'b']);
    expect(budget.total()).toBe(3);
  });
});

describe('waiting HTTP sockets on a node:http server', () => {
  let server: Server | undefined;
  const sockets: Socket[] = [];
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    await new Promise((r) => (server ? server.close(r) : r(undefined)));
    server = undefined;
  });

  async function start(perAddress: number) {
    const budget = createWaitingSocketBudget({ perAddress, total: 1_000 });
    server = createServer((_req, res) => res.end('ok'));
    countWaitingHTTPSockets(server, budget, (address) => address ?? null);
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return { budget, port: (server.address() as AddressInfo).port };
  }

  const get = (port: number) =>
    new Promise<number | string>((resolve) => {
      const req = request({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      req.end();
    });

  it('cuts off slow-header sockets past the address’s budget, oldest first; a request still gets through', async () => {
    const { budget, port } = await start(4);
    const closedAt: number[] = [];
    for (let i = 0; i < 10; i++) {
      const socket = connect({ host: '127.0.0.1', port });
      socket.on('error', () => {});
      socket.on('close', () => closedAt.push(i));
      socket.write('GET / HTTP/1.1\r\nHost: x\r\n');
      sockets.push(socket);
      await new Promise((r) => setTimeout(r, 10));
    }
    await expect.poll(() => closedAt.length, { timeout: 2_000 }).toBe(6);
    expect(closedAt.sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(budget.count('127.0.0.1')).toBe(4);
    expect(await get(port)).toBe(200);
  });

  it('serves a burst of 60 requests from one address accepted together (headers in, not yet read) with a budget of 4', async () => {
    const { budget, port } = await start(4);
    // Another process connects and sends every request while this one's event loop is held, so the server
    // accepts all 60 in one poll with their headers already in the kernel's buffers.
    const client = spawn(process.execPath, ['-e', BURST_CLIENT, String(port), '60'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    client.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    await new Promise((r) => client.stdout.once('data', r));
    const until = Date.now() + 300;
    while (Date.now() < until);
    await new Promise((r) => client.once('exit', r));
    const statusLines = JSON.parse(output.slice(output.indexOf('\n') + 1)) as string[];
    expect(statusLines).toEqual(statusLines.map(() => 'HTTP/1.1 200 OK'));
    expect(budget.total()).toBe(0);
  });
});
