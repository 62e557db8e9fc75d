/** Small facts about local processes and ports the e2e helpers that run servers share. */
import { createServer } from 'node:net';

/** A TCP port on 127.0.0.1 free at the moment of asking (the OS picks it). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Whether process `pid` exists (the server's own check, which counts EPERM as alive). */
export { processAlive } from '../../src/db/sqlite-lock.js';
