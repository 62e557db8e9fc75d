/**
 * The start line of the queue peer benchmark's worker processes: each says it
 * is loaded, with the CPU it spent on that (`{ "readyCPUms" }` on stdout, not
 * the queue's), and waits for a line on stdin, so every worker starts on the
 * same signal however long its loading took.
 */
export async function ready(): Promise<void> {
  const { user, system } = process.cpuUsage();
  process.stdout.write(`${JSON.stringify({ readyCPUms: (user + system) / 1000 })}\n`);
  await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
  // Nothing more is read: stdin must not keep the process alive once it is done.
  process.stdin.destroy();
}
