#!/usr/bin/env node
// Times `tickscope view` as a person meets it, in headless Debian Chromium: the browser is
// started first, then the viewer; the clock runs from the viewer's start to the first
// complete picture. Prints one JSON line. Used by `cargo bench -p tickscope-cli --bench view`.
//
// usage: node bench.mjs timeline TICKSCOPE CAPTURE
//          from `tickscope view CAPTURE` starting to the timeline drawn with its answer
//        node bench.mjs flame TICKSCOPE PROFILE
//          from the page's load to the profile's flame graph drawn
//        node bench.mjs frames TICKSCOPE CAPTURE
//          at 1440 x 900, the whole capture in view: the time of one full redraw (30 of them),
//          and the frames drawn while the timeline is dragged and zoomed by the mouse
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../../../tests/readers/package.json'));
const { chromium } = require('playwright-core');

const [what, tickscope, file] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = await browser.newPage({ viewport: what === 'frames' ? { width: 1440, height: 900 } : { width: 2200, height: 1000 } });
const errors = [];
page.on('pageerror', (e) => errors.push(String(e)));

const t0 = performance.now();
const server = spawn(tickscope, ['view', '--no-open', file], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve, reject) => {
  let buf = '';
  server.stdout.on('data', (d) => {
    buf += d;
    const nl = buf.indexOf('\n');
    if (nl >= 0) resolve(buf.slice(0, nl));
  });
  server.on('exit', (code) => reject(new Error(`tickscope view exited ${code}`)));
});
const out = { what, url_ms: Math.round(performance.now() - t0) };
await page.goto(url);
await page.waitForFunction(() => window.tickscope && window.tickscope.S.info, null, { timeout: 120000, polling: 10 });
const loaded = performance.now();
if (what === 'timeline') {
  await page.waitForFunction(() => document.body.dataset.painted === '1', null, { timeout: 120000, polling: 10 });
  out.first_paint_ms = Math.round(performance.now() - t0);
  out.px = await page.evaluate(() => window.tickscope.TL.answer.px);
  out.index = await page.evaluate(() => {
    const c = window.tickscope.S.info.captures[0];
    return { seconds: c.status.seconds, bytes: c.index_bytes, file: c.status.size, events: c.events };
  });
  // The summary, a few moments later (it waits for the index on two cores).
  await page.waitForSelector('#summary-table tbody tr', { timeout: 120000 });
  out.summary_ms = Math.round(performance.now() - t0);
} else if (what === 'frames') {
  await page.waitForFunction(() => document.body.dataset.painted === '1' && !window.tickscope.TL.inflight, null, { timeout: 120000, polling: 10 });
  // Full redraws of the same answer.
  out.redraw_ms = await page.evaluate(() => {
    const { TL } = window.tickscope;
    const t = [];
    for (let i = 0; i < 30; i++) {
      const a = performance.now();
      TL.draw();
      t.push(performance.now() - a);
    }
    return t.sort((x, y) => x - y);
  });
  // Frames while dragged (pan) and wheeled (zoom): requestAnimationFrame's intervals.
  await page.evaluate(() => {
    window.frameTimes = [];
    let last = performance.now();
    const tick = (now) => { window.frameTimes.push(now - last); last = now; if (window.recording) requestAnimationFrame(tick); };
    window.recording = true;
    requestAnimationFrame(tick);
  });
  const box = await page.evaluate(() => { const r = document.getElementById('tl-canvas').getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; });
  const y = box.y + box.h / 2;
  await page.mouse.move(box.x + box.w * 0.8, y);
  await page.mouse.down();
  for (let i = 0; i < 60; i++) await page.mouse.move(box.x + box.w * (0.8 - i * 0.01), y);
  await page.mouse.up();
  for (let i = 0; i < 30; i++) await page.mouse.wheel(0, i < 15 ? -120 : 120);
  out.frame_ms = await page.evaluate(() => { window.recording = false; return window.frameTimes.slice(1).sort((x, y) => x - y); });
  out.draws = await page.evaluate(() => window.tickscope.TL.draws || null);
} else {
  await page.waitForFunction(() => document.body.dataset.flamePainted === '1', null, { timeout: 120000, polling: 10 });
  out.flame_after_load_ms = Math.round(performance.now() - loaded);
  out.flame_request_ms = await page.evaluate(() => Number(document.body.dataset.flameMs));
  out.samples = await page.evaluate(() => window.tickscope.S.info.profiles[0].samples);
}
// The server's peak memory.
const status = readFileSync(`/proc/${server.pid}/status`, 'utf8');
out.server_peak_rss = Number((status.match(/VmHWM:\s+(\d+) kB/) || [0, 0])[1]) * 1024;
out.errors = errors;
server.kill('SIGINT');
await browser.close();
process.stdout.write(JSON.stringify(out) + '\n');
