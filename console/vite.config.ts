/**
 * The console's Vite build (docs/console.md). `npm start` runs it when
 * console/dist is missing or stale (src/server/console-build.ts);
 * `npm run console:build` runs it ahead. Everything is bundled: the page
 * loads nothing from anywhere but the server that serves it.
 */
import react from '@vitejs/plugin-react';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  plugins: [react()],
  // The page's only inputs are its sources: no public/ folder, no env variables.
  publicDir: false,
  envPrefix: 'CONSOLE_BUILD_',
  // The shared event stream's SharedWorker (src/stream-worker.ts) is an ES module, as the page is.
  worker: { format: 'es' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    // One module preload polyfill fewer: every browser the console supports has modulepreload.
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
