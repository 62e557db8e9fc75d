/**
 * Runs every benchmark in bench/ and prints their markdown tables
 * (`npm run bench`). Each benchmark is also runnable on its own.
 */
import { runAllocationBench } from './allocation.js';
import { runAuthCostBench } from './auth-cost.js';
import { runCompressionBench } from './compression.js';
import { runConsoleBench } from './console.js';
import { runInstructionsBench } from './instructions.js';
import { runPlansBench } from './plans.js';
import { runQueuePeerBench } from './queue-peer.js';
import { runReadStandbysBench } from './read-standbys.js';
import { runStartupMemoryBench } from './startup-memory.js';
import { runStatementCountBench } from './statement-count.js';
import { runThroughputBench } from './throughput.js';
import { runWriteBackWorkersBench } from './write-back-workers.js';
import { runWritePathBench } from './write-path.js';

const started = Date.now();
await runStatementCountBench();
await runAuthCostBench();
await runCompressionBench();
await runPlansBench();
await runThroughputBench();
await runStartupMemoryBench();
await runReadStandbysBench();
await runInstructionsBench(['list']);
await runAllocationBench('list');
await runConsoleBench();
await runWritePathBench();
await runWriteBackWorkersBench();
await runQueuePeerBench();
console.log(`\n_Benchmarks finished in ${((Date.now() - started) / 1000).toFixed(1)} s._`);
