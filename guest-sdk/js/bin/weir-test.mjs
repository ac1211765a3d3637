#!/usr/bin/env node
// weir-test [DIR|FILE ...]
//
// Runs the native tests of function projects (and of the SDK) with node's
// test runner: every `*.test.{ts,mts,js,mjs}` under the given directories
// (default: `.`) is bundled with esbuild (TypeScript compiled, `@weir/sdk`
// resolved to this SDK) and the bundles are run by `node --test`.

import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative, resolve, sep } from 'node:path';
import { sdkPlugin, testFiles } from '../src/build.js';

const dirs = process.argv.slice(2);
const files = (dirs.length ? dirs : ['.']).flatMap((d) => testFiles(resolve(d)));
if (files.length === 0) {
  console.error('weir-test: no *.test.{ts,mts,js,mjs} files found');
  process.exit(1);
}
const work = mkdtempSync(join(tmpdir(), 'weir-test-'));
let status = 1;
try {
  const outs = [];
  for (const file of files) {
    const name = relative(process.cwd(), file).split(sep).filter((p) => p !== '..').join('_').replace(/\.(ts|mts|js|mjs)$/, '.mjs');
    const outfile = join(work, name || basename(file));
    await build({
      entryPoints: [file],
      bundle: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      outfile,
      sourcemap: 'inline',
      packages: 'external',
      plugins: [sdkPlugin],
      logLevel: 'error',
    });
    outs.push(outfile);
  }
  const run = spawnSync(process.execPath, ['--enable-source-maps', '--test', ...outs], { stdio: 'inherit' });
  status = run.status ?? 1;
} finally {
  rmSync(work, { recursive: true, force: true });
}
process.exit(status);
