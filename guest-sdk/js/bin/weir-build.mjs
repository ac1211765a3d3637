#!/usr/bin/env node
// weir-build PROJECT_DIR -o OUT.wasm [--keep]
//
// Bundles the function module named by PROJECT_DIR/package.json
// ("weir": { "function": "src/<name>.ts" }) with @weir/sdk into one ES
// module, exports the WIT interfaces of the roles its default export
// implements (key-fn, process-fn, …: the SDK's rows of wit/roles.toml) and
// makes a Wasm component of it with componentize-js (no WASI features).

import { buildFunction, BuildError } from '../src/build.js';

const USAGE = 'usage: weir-build PROJECT_DIR -o OUT.wasm [--keep]';
const args = process.argv.slice(2);
let project, out, keep;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '-o' || a === '--out') out = args[++i];
  else if (a === '--keep') keep = true;
  else if (a === '-h' || a === '--help') {
    console.log(USAGE);
    process.exit(0);
  } else if (a.startsWith('-')) {
    console.error(`weir-build: unknown option ${a}\n${USAGE}`);
    process.exit(2);
  } else if (project === undefined) project = a;
  else {
    console.error(`weir-build: one project directory only\n${USAGE}`);
    process.exit(2);
  }
}
if (project === undefined || out === undefined) {
  console.error(USAGE);
  process.exit(2);
}
try {
  await buildFunction(project, out, { keep });
} catch (e) {
  if (e instanceof BuildError || (e && e.errors)) {
    console.error(`weir-build: ${e.message}`);
    process.exit(1);
  }
  throw e;
}
