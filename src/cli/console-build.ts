/**
 * `npm run console:build`: builds the operations console into console/dist
 * now (a deployment image does this once; the server then finds it fresh and
 * starts without building). `--if-stale` builds only when console/dist is
 * missing or was built from other sources, as the server does at start.
 */
import { loadConsoleBuild, rebuildConsole } from '../server/console-build.js';
import { failureLine, usageError, wantsHelp, type Command } from './command.js';

export const consoleBuildCommand: Command = {
  summary: 'build the operations console into console/dist now (or only when stale)',
  usage: `usage: npm run console:build [-- --if-stale]

Builds the operations console (console/, Vite + React) into console/dist.
With --if-stale, only when console/dist is missing or older than its sources.
`,

  async run(io) {
    if (wantsHelp(io.argv)) {
      io.stdout(consoleBuildCommand.usage);
      return 0;
    }
    const unknown = io.argv.find((arg) => arg !== '--if-stale');
    if (unknown !== undefined) return usageError(io, consoleBuildCommand, `unknown argument ${JSON.stringify(unknown)}`);
    try {
      const build = io.argv.includes('--if-stale') ? await loadConsoleBuild() : await rebuildConsole();
      const bytes = [...build.files.values()].reduce((sum, file) => sum + (file.gzip ?? file.body).length, 0);
      io.stdout(build.built ? `console built in ${build.buildMs} ms: ${build.files.size} files, ${Math.round(bytes / 1024)} kB gzipped\n` : 'console/dist is fresh: nothing to build\n');
      return 0;
    } catch (error) {
      io.stderr(failureLine('console:build', error));
      return 1;
    }
  },
};
