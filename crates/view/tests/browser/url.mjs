#!/usr/bin/env node
// The URL holds a profile's view (headless Debian Chromium): the flame graph's zoom and
// search come back with a reload; Back returns to the view before; an edited hash is shown.
//
// usage: node url.mjs URL OUTDIR   (a viewer of one CPU profile)
// Prints what it saw as one JSON document.
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
const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
const out = { errors: [] };
page.on('pageerror', (e) => out.errors.push(String(e)));
const flameDrawn = () => page.waitForFunction(() => document.body.dataset.flamePainted === '1' && window.tickscope.PF.flame && window.tickscope.PF.flame.tree, null, { timeout: 60000 });
const hashHas = (s) => page.waitForFunction((s) => location.hash.includes(s), s, { timeout: 30000 });
const view = () => page.evaluate(() => {
  const { S, PF } = window.tickscope;
  return { pv: S.pv, fn: S.fn, root: PF.flame ? PF.flame.root : null, search: document.getElementById('pf-search').value, hash: location.hash };
});
try {
  await page.goto(url);
  await flameDrawn();
  // Zoom: a click on the widest frame two rows above the root.
  const target = await page.evaluate(() => {
    const f = window.tickscope.PF.flame;
    const r = f.canvas.getBoundingClientRect();
    let best = -1;
    for (const i of f.drawn) if (f.depth[i] === 2 && (best < 0 || f.width(i) > f.width(best))) best = i;
    const scale = r.width / (f.width(f.root) || 1);
    return { x: r.left + (f.x[best] - f.x[f.root] + f.width(best) / 2) * scale, y: r.bottom - 2.5 * f.rowH, node: best };
  });
  await page.mouse.click(target.x, target.y);
  await hashHas(`z=${target.node}`);
  await page.fill('#pf-search', 'demo');
  await hashHas('q=demo');
  out.before = await view();
  out.target = target.node;
  // A reload: the same zoom and search.
  await page.reload();
  await flameDrawn();
  out.reloaded = await view();
  await page.screenshot({ path: path.join(outdir, 'url-reloaded.png') });
  // Another view, then Back: the flame graph again, zoomed as it was.
  await page.click('#profile .seg button[data-pv="top"]');
  await page.waitForSelector('#pf-top tbody tr', { timeout: 30000 });
  await hashHas('pv=top');
  out.top = await view();
  await page.goBack();
  await page.waitForFunction(() => window.tickscope.S.pv === 'flame', null, { timeout: 30000 });
  await flameDrawn();
  out.back = await view();
  // An edited hash: the top table.
  await page.evaluate(() => { location.hash = '#t=profile&p=0&pv=top'; });
  await page.waitForFunction(() => window.tickscope.S.pv === 'top' && !document.getElementById('pf-top').hidden, null, { timeout: 30000 });
  out.edited = await view();
} catch (e) {
  out.errors.push(String(e));
}
await browser.close();
process.stdout.write(JSON.stringify(out) + '\n');
