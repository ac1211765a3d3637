#!/usr/bin/env node
// npm pack leaves out the `wit` symlink (to ../../wit); `prepack` replaces
// it with a copy of the WIT so the package carries it, `postpack` puts the
// symlink back. Not part of the package's API.

import { cpSync, lstatSync, readlinkSync, rmSync, symlinkSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const sdk = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const wit = join(sdk, 'wit');
const marker = join(sdk, '.wit-link');
const phase = process.argv[2];
if (phase === 'prepack' && lstatSync(wit).isSymbolicLink()) {
  const target = readlinkSync(wit);
  const source = resolve(sdk, target);
  rmSync(wit);
  cpSync(source, wit, { recursive: true });
  writeFileSync(marker, target);
} else if (phase === 'postpack' && existsSync(marker)) {
  const target = readFileSync(marker, 'utf8');
  rmSync(wit, { recursive: true, force: true });
  symlinkSync(target, wit);
  rmSync(marker);
}
