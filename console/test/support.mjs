// What the browser tests share: launching the system Chromium headless
// with playwright-core, collecting the page's errors (a CSP violation is
// one), and where screenshots go.

import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

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
