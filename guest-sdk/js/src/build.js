// `weir-build`: bundle a function with the SDK and make a Wasm component.

import { build as esbuild } from 'esbuild';
import { existsSync, mkdtempSync, readFileSync, writeFileSync, rmSync, mkdirSync, statSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ROLES } from './roles.js';

/** The SDK's directory (guest-sdk/js, or node_modules/@weir/sdk): the nearest one up with its package.json. */
export const SDK_DIR = (() => {
  const here = dirname(fileURLToPath(import.meta.url));
  for (let dir = here; ; dir = dirname(dir)) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && JSON.parse(readFileSync(pkg, 'utf8')).name === '@weir/sdk') return dir;
    if (dirname(dir) === dir) return resolve(here, '..');
  }
})();

/** An esbuild plugin resolving `@weir/sdk` (and `/testing`) to this SDK, with or without node_modules. */
export const sdkPlugin = {
  name: 'weir-sdk',
  setup(b) {
    b.onResolve({ filter: /^@weir\/sdk(\/testing)?$/ }, (args) => ({
      path: join(SDK_DIR, 'src', args.path.endsWith('/testing') ? 'testing.js' : 'index.js'),
    }));
  },
};

/** Thrown for a user error (no stack trace needed). */
export class BuildError extends Error {}

/** The project's function module, from package.json's `weir.function`. */
export function functionModule(projectDir) {
  const pkgPath = join(projectDir, 'package.json');
  if (!existsSync(pkgPath)) throw new BuildError(`${pkgPath} not found: a function project has a package.json with "weir": { "function": "src/<name>.ts" }`);
  const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'));
  const rel = pkg.weir && pkg.weir.function;
  if (typeof rel !== 'string') throw new BuildError(`${pkgPath} has no "weir": { "function": "src/<name>.ts" } entry naming the function's module`);
  const path = resolve(projectDir, rel);
  if (!existsSync(path)) throw new BuildError(`the function module ${rel} (weir.function in ${pkgPath}) does not exist`);
  return { pkg, path, rel };
}

/** The roles of this SDK (wit/roles.toml's rows), by name. */
const ROLE = Object.fromEntries(ROLES.map((row) => [row.name, row]));

/** What the SDK's Wasm host (`wasm-host.js`) imports, whatever the roles. */
const HOST_IMPORTS = ['state', 'timers', 'context'];

let probes = 0;

/** The roles of the module's default export, found by loading it natively. */
export async function rolesOfModule(path, work) {
  const probe = join(work, `probe-${++probes}.mjs`); // a new URL: import() caches by URL
  await esbuild({
    entryPoints: [path],
    bundle: true,
    format: 'esm',
    platform: 'node',
    outfile: probe,
    plugins: [sdkPlugin],
    logLevel: 'error',
  });
  const mod = await import(pathToFileURL(probe).href);
  const F = mod.default;
  if (F === undefined) throw new BuildError(`${path} has no default export: export the function's class with \`export default class …\``);
  let fn = F;
  if (typeof F === 'function') {
    try {
      fn = new F();
    } catch (e) {
      throw new BuildError(`${path}: constructing the default export failed: ${e.message}`);
    }
  }
  const { rolesOf, rolesWanted } = await import(pathToFileURL(join(SDK_DIR, 'src', 'runtime.js')).href);
  const roles = rolesOf(fn);
  if (roles.length === 0) {
    throw new BuildError(`${path}: the default export implements no role: give it ${rolesWanted()}`);
  }
  return roles;
}

function worldText(roles) {
  const imports = [...new Set([...HOST_IMPORTS, ...roles.flatMap((r) => ROLE[r].imports)])];
  const lines = ['world weir-js-app {', ...imports.map((i) => `    import ${i};`)];
  for (const r of roles) lines.push(`    export ${ROLE[r].export};`);
  lines.push('}');
  return '\n' + lines.join('\n') + '\n';
}

/**
 * Build the function project `projectDir` into the component `out`.
 * Options: `keep` (keep the temporary directory), `log` (a line printer).
 */
export async function buildFunction(projectDir, out, options = {}) {
  const log = options.log || ((line) => console.log(line));
  const started = Date.now();
  projectDir = resolve(projectDir);
  const { path, rel } = functionModule(projectDir);
  const work = mkdtempSync(join(tmpdir(), 'weir-build-'));
  try {
    const roles = await rolesOfModule(path, work);
    const { exportObject } = await import(pathToFileURL(join(SDK_DIR, 'src', 'runtime.js')).href);
    const object = (r) => exportObject(ROLE[r].export);
    const entry = join(work, 'entry.js');
    const src = (p) => JSON.stringify(join(SDK_DIR, 'src', p));
    writeFileSync(
      entry,
      [
        `import Function from ${JSON.stringify(path)};`,
        `import { wasmHost } from ${src('wasm-host.js')};`,
        `import { installHost } from ${src('scope.js')};`,
        `import { exportsFor } from ${src('runtime.js')};`,
        `installHost(wasmHost);`,
        `const all = exportsFor(typeof Function === 'function' ? new Function() : Function);`,
        ...roles.map((r) => `export const ${object(r)} = all.${object(r)};`),
        '',
      ].join('\n'),
    );
    const bundle = join(work, 'app.js');
    await esbuild({
      entryPoints: [entry],
      bundle: true,
      format: 'esm',
      platform: 'neutral',
      target: 'es2022',
      outfile: bundle,
      external: ['weir:*'],
      plugins: [sdkPlugin],
      nodePaths: [join(projectDir, 'node_modules')],
      logLevel: 'error',
    });
    const witDir = join(work, 'wit');
    mkdirSync(witDir);
    const wit = readFileSync(join(SDK_DIR, 'wit', 'weir.wit'), 'utf8');
    writeFileSync(join(witDir, 'weir.wit'), wit + worldText(roles));
    const { componentize } = await import('@bytecodealliance/componentize-js');
    const { component } = await componentize({
      sourcePath: bundle,
      witPath: witDir,
      worldName: 'weir-js-app',
      disableFeatures: ['stdio', 'random', 'clocks', 'http', 'fetch-event'],
    });
    const outPath = resolve(out);
    mkdirSync(dirname(outPath), { recursive: true });
    writeFileSync(outPath, withLanguage(component, 'javascript'));
    const mb = (component.length / 1e6).toFixed(1);
    const secs = ((Date.now() - started) / 1000).toFixed(1);
    log(
      `weir-build: ${relative(process.cwd(), outPath) || outPath} (${mb} MB) from ${rel}: ` +
        `exports ${roles.map((r) => ROLE[r].export).join(', ')} (${secs} s)`,
    );
    return { out: outPath, roles, bytes: component.length };
  } finally {
    if (!options.keep) rmSync(work, { recursive: true, force: true });
    else log(`weir-build: kept ${work}`);
  }
}

/** Test files under `dir`: `*.test.{ts,mts,js,mjs}` outside node_modules. */
export function testFiles(dir) {
  const out = [];
  if (statSync(dir).isFile()) return [dir];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...testFiles(p));
    else if (/\.test\.(ts|mts|js|mjs)$/.test(name)) out.push(p);
  }
  return out.sort();
}

/** The custom section naming a component's language for the host. */
const LANGUAGE_SECTION = 'weir:language';

/** `value` as unsigned LEB128 bytes. */
function leb128(value) {
  const out = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value !== 0) byte |= 0x80;
    out.push(byte);
  } while (value !== 0);
  return out;
}

/**
 * `component` with a top-level `weir:language` custom section naming
 * `language`, so the host gives it an interpreter's default limits (see
 * docs/isolation.md).
 * @param {Uint8Array} component
 * @param {string} language
 * @returns {Uint8Array}
 */
export function withLanguage(component, language) {
  const encoder = new TextEncoder();
  const name = encoder.encode(LANGUAGE_SECTION);
  const body = [...leb128(name.length), ...name, ...encoder.encode(language)];
  const section = Uint8Array.from([0, ...leb128(body.length), ...body]);
  const out = new Uint8Array(component.length + section.length);
  out.set(component, 0);
  out.set(section, component.length);
  return out;
}
