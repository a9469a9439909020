#!/usr/bin/env node
// Watches a live capture arrive on `tickscope view`'s page (headless Debian Chromium): prints
// what the page showed at two moments while the capture was still arriving, and at its end.
//
// usage: node live.mjs URL OUTDIR
// Prints `loaded` once the page is up (start the program then), and its findings as one JSON
// line at the end.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../../../tests/readers/package.json'));
const { chromium } = require('playwright-core');

const [url, outdir] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
const out = { errors: [], seen: [] };
page.on('pageerror', (e) => out.errors.push(String(e)));
const look = () => page.evaluate(() => {
  const { S } = window.tickscope;
  const c = S.info.captures[S.c];
  return c ? { duration: c.duration_ns || 0, done: c.status.done, until: S.until, slices: window.drawn(), follow: S.follow } : null;
});
try {
  await page.goto(url);
  // What the last answer drew: slices, and pixels of slices too narrow to draw one by one.
  await page.evaluate(() => {
    window.drawn = () => {
      const a = window.tickscope && window.tickscope.TL.answer;
      return a ? [...a.byIndex.values()].reduce((n, t) => n + t.rows.reduce((m, r) => m + r.slices.length + r.busyPx.length, 0), 0) : 0;
    };
  });
  await page.waitForFunction(() => window.tickscope && window.tickscope.S.info, null, { timeout: 60000, polling: 50 });
  // Before a program connects, the page says what it waits for (it was blank).
  out.waiting = await page.evaluate(() => document.getElementById('banner').innerText);
  await page.screenshot({ path: path.join(outdir, 'live-waiting.png') });
  // The test starts the program only now, so that the page sees its capture arrive
  // however long a loaded machine took to get here.
  await new Promise((resolve) => process.stdout.write('loaded\n', resolve));
  // The capture appears once its program connects, then grows. An answer drawn while the
  // program had only just connected may hold no scopes yet: wait for one that does.
  await page.waitForFunction(() => {
    const i = window.tickscope && window.tickscope.S.info; const c = i && i.captures[0];
    return c && c.threads && c.duration_ns > 0 && window.drawn() > 0;
  }, null, { timeout: 60000, polling: 50 });
  out.seen.push(await look());
  // Its tab is named after the program once its header arrived (it was the peer's port).
  await page.waitForFunction(() => /^Live: /.test(document.querySelector('#tabs button').textContent), null, { timeout: 60000, polling: 50 });
  out.tab = await page.evaluate(() => document.querySelector('#tabs button').textContent);
  // Nothing more can arrive: say so now rather than wait out the timeouts below.
  if (out.seen[0].done) throw new Error('the capture had ended by the page\'s first look: the program ran too short for this machine');
  await page.screenshot({ path: path.join(outdir, 'live-1.png') });
  // Then the page follows it: a later window, drawn (its answer is the window's).
  const drawnAfter = (u) => {
    const { S, TL } = window.tickscope;
    return S.until > u && !TL.inflight && TL.answer && Math.abs(TL.answer.from - Math.max(0, Math.floor(S.from))) < 2;
  };
  await page.waitForFunction((d) => { const c = window.tickscope.S.info.captures[0]; return c.duration_ns > d; }, out.seen[0].duration, { timeout: 60000, polling: 50 });
  await page.waitForFunction(drawnAfter, out.seen[0].until, { timeout: 60000, polling: 50 });
  out.seen.push(await look());
  await page.screenshot({ path: path.join(outdir, 'live-2.png') });
  // Its end: the connection closed, and the last window drawn.
  await page.waitForFunction(() => window.tickscope.S.info.captures[0].status.done, null, { timeout: 120000, polling: 100 });
  const last = await page.evaluate(() => window.tickscope.S.until);
  await page.waitForFunction((u) => {
    const { S, TL } = window.tickscope;
    return (S.until > u || !S.follow) && !TL.inflight && TL.answer && Math.abs(TL.answer.from - Math.max(0, Math.floor(S.from))) < 2;
  }, last - 1, { timeout: 60000, polling: 50 });
  out.seen.push(await look());
} catch (e) {
  out.errors.push(`driver: ${e && e.stack ? e.stack : e}`);
}
await browser.close();
process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(out.errors.length ? 1 : 0));
