#!/usr/bin/env node
// Runs the TypeScript CLI directly through tsx, so a fresh clone needs no build step.
//
// `payrecon report ...` runs in a child node with a small young generation (`--max-semi-space-size=2`):
// a workbook streams millions of rows and keeps little, and with V8's default young generation (up to
// three 16 MB semi-spaces) and the old generation it lets grow between collections, a month of
// 2,530,937 postings peaked at 287-312 MB RSS, with 2 MB semi-spaces at 243 MB in the same time (56.8 s
// against 56.5 s; BENCHMARKS.md). V8 reads the flag only at start, hence the child; this process only
// waits for it (about 40 MB), passes on the signals that stop it and exits with its code.
const REPORT_FLAGS = ['--max-semi-space-size=2'];

if (process.argv[2] === 'report' && !process.execArgv.includes(REPORT_FLAGS[0])) {
  const { spawn } = await import('node:child_process');
  const child = spawn(process.execPath, [...process.execArgv, ...REPORT_FLAGS, ...process.argv.slice(1)], {
    stdio: 'inherit',
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else process.exit(code ?? 1);
  });
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli.ts');
}
