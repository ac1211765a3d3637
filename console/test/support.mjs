// What the browser tests share: launching the system Chromium headless
// with playwright-core, collecting the page's errors (a CSP violation is
// one), and where screenshots go; starting `weir` processes and stopping
// them; serving console/dist in front of a `weir` that does not serve it.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { createServer, request as httpRequest } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { hostCsp } from './stub-server.mjs';

const here = dirname(fileURLToPath(import.meta.url));

/** The Chromium the tests drive (`$CHROMIUM`, else Debian's). */
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** Where screenshots go: `$WEIR_ARTIFACTS`, else console/test-artifacts/. */
export const ARTIFACTS = resolve(process.env.WEIR_ARTIFACTS ?? join(here, '..', 'test-artifacts'));

/** Why the browser tests cannot run here, or null. */
export function browserMissing() {
  if (!existsSync(CHROMIUM)) {
    return `no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM)`;
  }
  return null;
}

/**
 * A headless browser and a page on it; `errors` collects uncaught page
 * errors, console errors and CSP violations.
 */
export async function openBrowser() {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const errors = [];
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  return { browser, context, page, errors };
}

/** Save a screenshot of `target` (a page or a locator) as `<ARTIFACTS>/<name>.png`. */
export async function screenshot(target, name, options = {}) {
  await mkdir(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await target.screenshot({ path, ...options });
  return path;
}

/** Errors besides the 4xx answers the tests provoke (and check in the page). */
export function unexpected(errors) {
  return errors.filter((e) => !/Failed to load resource: the server responded with a status of 4\d\d/.test(e));
}

/** Wait until `check()` is truthy (it may throw meanwhile); its value. */
export async function eventually(check, { timeout = 30_000, interval = 250, what = 'a condition' } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, interval));
  }
}

/**
 * Start `bin args` and wait for the line of its stdout matching `listening`
 * (a regex whose first group is the URL); `{ child, url }`, the child
 * with `stderrTail()` (its last 8 kB of stderr, for failure messages).
 */
export function startListening(bin, args, { env = {}, listening, what = bin, timeout = 120_000 }) {
  const child = spawn(bin, args, {
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr = (stderr + d).slice(-8000);
  });
  child.stderrTail = () => stderr;
  return new Promise((resolveUrl, reject) => {
    let out = '';
    let found = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${what} did not say where it listens:\n${stderr}`));
    }, timeout);
    child.stdout.on('data', (d) => {
      if (found) return; // read on, so it never blocks on a full pipe
      out += d;
      const match = out.match(listening);
      if (match) {
        found = true;
        clearTimeout(timer);
        resolveUrl({ child, url: match[1] });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (!found) reject(new Error(`${what} exited (${code}):\n${stderr}`));
    });
  });
}

/** Stop `child`: SIGTERM, then SIGKILL after `graceMs`; resolves once it exited. */
export async function stopProcess(child, graceMs = 30_000) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** console/dist on a port of its own, `/v1/*` passed to `target`. */
export async function startProxy(target) {
  const csp = await hostCsp();
  const dist = join(here, '..', 'dist');
  const files = {
    '/console/': ['text/html; charset=utf-8', 'index.html'],
    '/console/console.js': ['text/javascript; charset=utf-8', 'console.js'],
    '/console/console.css': ['text/css; charset=utf-8', 'console.css'],
  };
  const upstream = new URL(target);
  const server = createServer(async (req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    if (files[path]) {
      const [type, file] = files[path];
      res.writeHead(200, { 'content-type': type, 'content-security-policy': csp, 'cache-control': 'no-cache' });
      res.end(await readFile(join(dist, file)));
      return;
    }
    const forward = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${server.address().port}` };
}
