/**
 * Runs every benchmark in bench/ and prints their markdown tables
 * (`npm run bench`). Each benchmark is also runnable on its own.
 */
import { runStatementCountBench } from './statement-count.js';

const started = Date.now();
await runStatementCountBench();
console.log(`\n_Benchmarks finished in ${((Date.now() - started) / 1000).toFixed(1)} s._`);
