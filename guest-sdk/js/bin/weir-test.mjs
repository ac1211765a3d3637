#!/usr/bin/env node
// weir-test [DIR|FILE ...]
//
// Runs the native tests of function projects (and of the SDK) with node's
// test runner: every `*.test.{ts,mts,js,mjs}` under the given directories
// (default: `.`) is bundled with esbuild (TypeScript compiled, `@weir/sdk`
// resolved to this SDK) and the bundles are run by `node --test`.

import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { sdkPlugin, testFiles } from '../src/build.js';

const dirs = process.argv.slice(2);
const files = (dirs.length ? dirs : ['.']).flatMap((d) => testFiles(resolve(d)));
if (files.length === 0) {
  console.error('weir-test: no *.test.{ts,mts,js,mjs} files found');
  process.exit(1);
}
// Each bundle is written next to its test (in a directory removed at the
// end), so the packages it imports resolve from the project's node_modules.
const works = new Set();
let status = 1;
try {
  const outs = [];
  for (const file of files) {
    const work = join(dirname(file), `.weir-test-${process.pid}`);
    mkdirSync(work, { recursive: true });
    works.add(work);
    const outfile = join(work, basename(file).replace(/\.(ts|mts|js|mjs)$/, '.mjs'));
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
  for (const work of works) rmSync(work, { recursive: true, force: true });
}
process.exit(status);
