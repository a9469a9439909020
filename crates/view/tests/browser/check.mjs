#!/usr/bin/env node
// Drives `tickscope view`'s page in headless Debian Chromium (playwright-core from
// tests/readers) as a person would, and prints what the page showed as one JSON document on
// stdout; screenshots of each view go to OUTDIR. The Rust tests (crates/cli/tests/viewer.rs)
// compare the figures with `tickscope report --json` / `top --json` and look at the rest.
//
// usage: node check.mjs URL OUTDIR [--diff] [--first-page-only] [--lives]
//   URL: what `tickscope view` printed (with its token)
//   --diff: the viewer was started with --diff (check the diff tab)
//   --first-page-only: the first page's tables and banner, nothing more
//   --lives: the futures' and spans' lives of the first page: each call site's lives as
//     drawn, and the details of the widest one, clicked; nothing more
//   --tip-edge: in the profile's tab, hover the flame graph at its right edge, two rows up;
//     the tooltip's box is in `tip`
//   --si=N: in the profile's and the diff's tabs, pick sample type N in the sample-type
//     switch first (a heap profile's four: allocated and in use, objects and bytes); the
//     flame graphs' sample types are in `profile_sample_type` and `diff_sample_type`
//   --counter-line: the first counter track's columns drawn in its colour, between its
//     first and last (`counter_line`); combine with --first-page-only
//   --timeline-pending: the first two timeline requests are answered 202 ("being indexed"),
//     as the server answers while it builds a capture's index (combine with
//     --first-page-only); `pending_answered` says how many were
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../../../tests/readers/package.json'));
const { chromium } = require('playwright-core');

const [url, outdir, ...flags] = process.argv.slice(2);
if (!url || !outdir) {
  process.stderr.write('usage: node check.mjs URL OUTDIR [--diff] [--live]\n');
  process.exit(2);
}
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const out = { errors: [], shots: [] };
const si = (flags.find((f) => f.startsWith('--si=')) || '').slice(5) || null;
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
page.on('pageerror', (e) => out.errors.push(`page error: ${e}`));
page.on('console', (m) => { if (m.type() === 'error') out.errors.push(`console: ${m.text()}`); });

const shot = async (name) => {
  const file = path.join(outdir, `${name}.png`);
  await page.screenshot({ path: file });
  out.shots.push(file);
};
const state = () => page.evaluate(() => {
  const s = window.tickscope.S;
  return { tab: s.tab, from: s.from, until: s.until, sel: s.sel, fn: s.fn, pv: s.pv };
});
// Waits until the timeline has drawn the answer for the current window.
const painted = async () => {
  await page.waitForFunction(() => {
    const tl = window.tickscope.TL;
    return document.body.dataset.painted === '1' && !tl.inflight && tl.answer
      && Math.abs(tl.answer.from - Math.max(0, Math.floor(window.tickscope.S.from))) < 2;
  }, null, { timeout: 60000 });
};
// The table `sel` as rows of {column: data-value}, and its cells' text.
const rows = (sel) => page.evaluate((sel) => [...document.querySelectorAll(`${sel} tbody tr`)].map((tr) => {
  const r = {};
  for (const td of tr.children) r[td.dataset.col] = { value: td.dataset.value, text: td.textContent };
  return r;
}), sel);

try {
  if (flags.includes('--timeline-pending')) {
    out.pending_answered = 0;
    await page.route('**/api/timeline?*', (route) => {
      if (out.pending_answered < 2) {
        out.pending_answered += 1;
        return route.fulfill({ status: 202, contentType: 'application/json', body: JSON.stringify({ pending: 'the capture is being indexed' }) });
      }
      return route.continue();
    });
  }
  const t0 = Date.now();
  await page.goto(url);
  // The page asks the server what it shows; wait for that answer.
  await page.waitForFunction(() => window.tickscope && window.tickscope.S.info, null, { timeout: 60000 });
  const info = await page.evaluate(() => window.tickscope.S.info);
  out.info = { captures: info.captures.map((c) => ({ name: c.name, threads: (c.threads || []).length })), profiles: info.profiles.map((p) => p.name) };

  if (info.captures.length) {
    await painted();
    out.first_paint_ms = Date.now() - t0;
    out.capture_status = await page.evaluate(() => document.getElementById('status').textContent);
    await page.waitForSelector('#summary-table tbody tr', { timeout: 60000 });
    out.summary = await rows('#summary-table');
    out.banner = await page.evaluate(() => (document.getElementById('banner').hidden ? '' : document.getElementById('banner').innerText));
    if (info.profiles.length) {
      await page.waitForSelector('#first-top-table tbody tr', { timeout: 60000 });
      out.first_page_top = (await rows('#first-top-table')).map((r) => r.name.value);
    }
    await shot('timeline');
    if (flags.includes('--counter-line')) {
      // The first counter track's drawn columns: for each canvas column between the
      // track's first and last drawn one, whether any pixel of the counter's colour is in it.
      out.counter_line = await page.evaluate(() => {
        const { TL } = window.tickscope;
        const tr = TL.layout.find((t) => t.kind === 'counter');
        if (!tr) return null;
        const canvas = document.getElementById('tl-canvas');
        const dpr = window.devicePixelRatio || 1;
        const ctx = canvas.getContext('2d');
        const img = ctx.getImageData(0, Math.round(tr.y * dpr), canvas.width, Math.round(tr.h * dpr));
        const cols = [];
        for (let x = 0; x < img.width; x++) {
          let hit = false;
          for (let y = 0; y < img.height && !hit; y++) {
            const i = (y * img.width + x) * 4;
            hit = Math.abs(img.data[i] - 0x00) < 24 && Math.abs(img.data[i + 1] - 0x89) < 24 && Math.abs(img.data[i + 2] - 0x7b) < 24;
          }
          cols.push(hit);
        }
        const first = cols.indexOf(true), last = cols.lastIndexOf(true);
        const drawn = first < 0 ? 0 : cols.slice(first, last + 1).filter(Boolean).length;
        return { first, last, drawn };
      });
      await shot('counter');
    }
    if (flags.includes('--first-page-only')) throw 'done';
    {
      // The keys work with the focus elsewhere on the page (they needed the canvas's), and
      // `?` shows them.
      const span = () => page.evaluate(() => window.tickscope.S.until - window.tickscope.S.from);
      const before = await span();
      await page.click('#bar .brand');
      await page.keyboard.press('w');
      await page.waitForFunction((b) => window.tickscope.S.until - window.tickscope.S.from < b, before, { timeout: 10000 });
      out.key_zoom = (await span()) / before;
      await page.keyboard.press('s');
      await page.keyboard.press('?');
      out.help = await page.evaluate(() => { const h = document.getElementById('help'); return h.hidden ? null : h.innerText; });
      await shot('help');
      await page.keyboard.press('Escape');
      out.help_closed = await page.evaluate(() => document.getElementById('help').hidden);
      await painted();
    }
    {
      // The summary's max of parse_record clicked: the view goes to that call and its
      // details show it; then back to the whole capture.
      const clicked = await page.evaluate(() => {
        for (const tr of document.querySelectorAll('#summary-table tbody tr')) {
          if (tr.querySelector('td[data-col="name"]').dataset.value === 'parse_record') {
            tr.querySelector('td[data-col="max_ns"] button').click();
            return true;
          }
        }
        return false;
      });
      if (clicked) {
        await page.waitForFunction(() => {
          const dd = document.querySelector('#details dd.mono');
          return dd && dd.textContent === 'parse_record';
        }, null, { timeout: 60000 });
        out.slowest = await page.evaluate(() => {
          const kv = {};
          for (const dt of document.querySelectorAll('#details dt')) kv[dt.textContent] = dt.nextElementSibling.dataset.value ?? dt.nextElementSibling.textContent;
          const { S } = window.tickscope;
          return { duration_ns: Number(kv.duration), from: S.from, until: S.until, highlight: S.highlight };
        });
        await painted();
        await shot('timeline-slowest');
        // Back as before: the whole capture, no details, nothing outlined (the steps after
        // wait for details of their own).
        await page.evaluate(() => { document.getElementById('details').replaceChildren(); window.tickscope.S.highlight = null; });
        await page.click('#tl-all');
        await painted();
      }
    }
    if (flags.includes('--lives')) {
      out.lives = await page.evaluate(() => {
        const { TL } = window.tickscope;
        const o = {};
        for (const tr of TL.layout) {
          if (tr.kind !== 'lives') continue;
          const l = TL.lives.get(tr.site);
          o[tr.site] = {
            tracks_lanes: tr.lanes,
            drawn: l.lanes.flat().map(([b, e, how]) => ({ b, e, how })),
            narrow: l.narrow.reduce((a, [, n]) => a + n, 0),
            hidden: l.hidden,
          };
        }
        return o;
      });
      // The widest life that fits in the window, clicked where it is drawn.
      const target = await page.evaluate(() => {
        const { TL, S } = window.tickscope;
        const box = document.getElementById('tl-canvas').getBoundingClientRect();
        let best = null;
        for (const tr of TL.layout) {
          if (tr.kind !== 'lives') continue;
          TL.lives.get(tr.site).lanes.forEach((lane, i) => {
            for (const [b, e] of lane) {
              const x0 = Math.max(TL.x(b), 181), x1 = Math.min(TL.x(e), 1390);
              const y = tr.y - S.scrollY + 18 + i * 12 + 6;
              if (x1 - x0 > 8 && (!best || x1 - x0 > best.w) && y > 30 && y < box.height - 10) best = { x: box.left + (x0 + x1) / 2, y: box.top + y, w: x1 - x0, site: tr.site, b, e };
            }
          });
        }
        return best;
      });
      out.clicked_life = target;
      if (target) {
        await page.mouse.click(target.x, target.y);
        await page.waitForFunction(() => document.querySelector('#details dl'), null, { timeout: 30000 });
        out.life_details = await page.evaluate(() => {
          const d = {};
          for (const dt of document.querySelectorAll('#details dt')) d[dt.textContent] = { text: dt.nextElementSibling.textContent, value: dt.nextElementSibling.dataset.value };
          return d;
        });
        await shot('timeline-life');
      }
      throw 'done';
    }
    out.dom_text = await page.evaluate(() => document.body.innerText);
    out.whole = await state();

    // Zoom in with W, then pan with D, as in Perfetto and Tracy: around the middle of the
    // widest slice of the whole view (a busy machine can stretch a capture well past the
    // demo's work, and the canvas's middle may then hold nothing to click).
    const anchor = await page.evaluate(() => {
      const { TL } = window.tickscope;
      let best = null;
      for (const tr of TL.layout) {
        if (tr.kind !== 'thread') continue;
        const ta = TL.answer.byIndex.get(tr.t.index);
        if (!ta) continue;
        for (const row of ta.rows) {
          for (const s of row.slices) {
            const x0 = Math.max(TL.x(s.b), 181), x1 = Math.min(TL.x(s.e), 1390);
            if (x1 > x0 && (!best || x1 - x0 > best.w)) best = { w: x1 - x0, x: (x0 + x1) / 2 };
          }
        }
      }
      return best ? Math.round(best.x) : 700;
    });
    await page.click('#tl-canvas', { position: { x: anchor, y: 10 } });
    // Deep enough that the server decodes the window's chunks again (narrower than a bin per
    // pixel): how many presses that takes depends on the capture's length and bin width.
    for (let i = 0; i < 20; i++) await page.keyboard.press('w');
    await painted();
    for (let n = 0; n < 16 && !(await page.evaluate(() => window.tickscope.TL.answer.decoded)); n++) {
      for (let i = 0; i < 4; i++) await page.keyboard.press('w');
      await painted();
    }
    out.zoomed = await state();
    out.zoomed_decoded = await page.evaluate(() => window.tickscope.TL.answer.decoded);
    out.zoomed_answer = await page.evaluate(() => { const a = window.tickscope.TL.answer; return { from: a.from, until: a.until, px: a.px, bin_ns: a.binNs }; });
    await page.keyboard.press('d');
    await painted();
    out.panned = await state();
    await shot('timeline-zoomed');

    // A scope: click the middle of the widest slice drawn (narrower than the window when
    // one is: a slice that fills it says less of where the click landed).
    const findTarget = () => page.evaluate(() => {
      const { TL, S } = window.tickscope;
      const box = document.getElementById('tl-canvas').getBoundingClientRect();
      let best = null;
      for (const tr of TL.layout) {
        if (tr.kind !== 'thread') continue;
        const ta = TL.answer.byIndex.get(tr.t.index);
        if (!ta) continue;
        ta.rows.forEach((row, d) => {
          for (const s of row.slices) {
            const x0 = Math.max(TL.x(s.b), 181), x1 = Math.min(TL.x(s.e), 1390);
            const y = tr.y - S.scrollY + 18 + d * 16 + 8;
            const w = x1 - x0;
            const rank = w < 1000 ? w + 10000 : w; // narrower than the window first
            if (w > 20 && (!best || rank > best.rank) && y > 30 && y < box.height - 10) best = { x: box.left + (x0 + x1) / 2, y: box.top + y, w, rank, id: s.id, b: s.b, e: s.e };
          }
        });
      }
      return best;
    });
    let target = await findTarget();
    // The zoomed, panned window may fall where no slice is wide enough to click (between a
    // worker's scopes, say, or in a loaded run's long tail after the workers ended, which
    // once took more than the 24 presses this loop allowed): zoom out with S until one is,
    // as far as the whole capture.
    for (let n = 0; !target && n < 120; n++) {
      await page.keyboard.press('s');
      await painted();
      target = await findTarget();
    }
    out.clicked = target;
    if (target) {
      await page.mouse.click(target.x, target.y);
      await page.waitForFunction(() => document.querySelector('#details dl'), null, { timeout: 30000 });
      out.details = await page.evaluate(() => {
        const d = {};
        const dts = [...document.querySelectorAll('#details dt')];
        for (const dt of dts) d[dt.textContent] = { text: dt.nextElementSibling.textContent, value: dt.nextElementSibling.dataset.value };
        return d;
      });
      await shot('timeline-scope');
    }

    // A range: shift+drag across the middle of the window.
    await page.click('#tl-all');
    await painted();
    await page.keyboard.down('Shift');
    const box = await page.evaluate(() => { const r = document.getElementById('tl-canvas').getBoundingClientRect(); return { x: r.left, y: r.top }; });
    await page.mouse.move(box.x + 500, box.y + 200);
    await page.mouse.down();
    await page.mouse.move(box.x + 700, box.y + 200, { steps: 5 });
    await page.mouse.up();
    await page.keyboard.up('Shift');
    await page.waitForFunction(() => document.querySelector('#summary .note') && document.querySelector('#summary .note').textContent.startsWith('Range'), null, { timeout: 60000 });
    out.range = (await state()).sel;
    out.range_summary = await rows('#summary-table');
    await shot('timeline-range');
    const sampled = await page.evaluate(() => !document.getElementById('smp-tab').hidden);
    if (sampled) {
      await page.click('#smp-tab');
      await page.waitForFunction(() => window.tickscope.TL.smpFlame && window.tickscope.TL.smpFlame.tree, null, { timeout: 30000 });
      out.range_samples = await page.evaluate(() => window.tickscope.TL.smpFlame.tree.cum[0]);
      // Its root row is on screen, in its box (it was drawn ~800 px below the pane).
      out.range_root_visible = await page.evaluate(() => {
        const c = document.getElementById('smp-canvas').getBoundingClientRect();
        const b = document.getElementById('smp-flamebox').getBoundingClientRect();
        const root = c.bottom - window.tickscope.TL.smpFlame.rowH / 2;
        return root >= b.top && root <= b.bottom && root <= window.innerHeight;
      });
      await shot('timeline-samples');
    }
    // A second range, its summary's answer held back: meanwhile the first range's figures
    // are marked stale under a line naming the range asked for (they showed for 0.7-2 s as
    // the new range's), and the answer replaces both.
    {
      await page.click('#sum-tab');
      let release;
      const held = new Promise((r) => { release = r; });
      const summaryOfRange = (url) => url.pathname.endsWith('/api/summary') && url.searchParams.has('from');
      await page.route(summaryOfRange, async (route) => { await held; await route.continue(); });
      await page.keyboard.down('Shift');
      await page.mouse.move(box.x + 300, box.y + 200);
      await page.mouse.down();
      await page.mouse.move(box.x + 420, box.y + 200, { steps: 5 });
      await page.mouse.up();
      await page.keyboard.up('Shift');
      await page.waitForFunction(() => document.getElementById('summary').dataset.loading === '1', null, { timeout: 10000 });
      out.range_loading = await page.evaluate(() => {
        const l = document.getElementById('summary-loading');
        const t = document.getElementById('summary-table');
        return { line: l && l.textContent, stale_opacity: t ? getComputedStyle(t).opacity : null };
      });
      await shot('timeline-range-loading');
      release();
      await page.waitForFunction(() => !document.getElementById('summary').dataset.loading && !document.getElementById('summary-loading'), null, { timeout: 60000 });
      await page.unroute(summaryOfRange);
      out.range_loaded = await page.evaluate(() => document.querySelector('#summary .note').textContent);
    }
    // The URL restores the view: once the page has written it (debounced), reload and
    // compare.
    await page.waitForFunction(() => {
      const S = window.tickscope.S;
      const h = new URLSearchParams(location.hash.slice(1));
      if (h.get('t') !== S.tab) return false;
      if (S.tab !== 'timeline') return true;
      const at = (k, v) => h.get(k) === String(Math.round(v));
      if (S.from !== null && !(at('from', S.from) && at('until', S.until))) return false;
      return !S.sel || h.get('sel') === `${Math.round(S.sel[0])},${Math.round(S.sel[1])}`;
    }, null, { timeout: 60000, polling: 50 });
    const before = await state();
    await page.reload();
    await painted();
    out.restored = { before, after: await state() };
  }

  if (info.profiles.length) {
    const i = info.profiles.findIndex((p, k) => !info.diff || (k !== info.diff.base && k !== info.diff.new));
    if (i >= 0) {
      await page.click(`#tabs button[data-tab="profile"][data-extra="${i}"]`);
      await page.waitForFunction(() => document.body.dataset.flamePainted === '1', null, { timeout: 60000 });
      if (si !== null) {
        out.profile_default_type = await page.evaluate(() => window.tickscope.PF.flame.tree.sample_type);
        await page.selectOption('#pf-si', si);
        await page.waitForFunction((n) => window.tickscope.PF.loadedSi === n, Number(si), { timeout: 60000 });
        await shot('profile-flame-si');
      }
      if (flags.includes('--tip-edge')) {
        // The pointer near the window's right edge over the widest frame two rows up: the
        // tooltip stays in the window, at most 520 px wide (plus padding), however long
        // the name.
        const at = await page.evaluate(() => {
          const f = window.tickscope.PF.flame;
          const r = f.canvas.getBoundingClientRect();
          return { x: r.right - 6, y: r.bottom - 2.5 * f.rowH };
        });
        await page.mouse.move(at.x, at.y);
        await page.waitForSelector('#pf-flamebox .tip:not([hidden])', { timeout: 30000 });
        out.tip = await page.evaluate(() => {
          const t = document.querySelector('#pf-flamebox .tip');
          const r = t.getBoundingClientRect();
          return { left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, window: [window.innerWidth, window.innerHeight], chars: t.textContent.length };
        });
        await shot('profile-tip-edge');
        throw 'done';
      }
      out.profile_sample_type = await page.evaluate(() => window.tickscope.PF.flame.tree.sample_type);
      out.flame_ms = await page.evaluate(() => Number(document.body.dataset.flameMs));
      out.flame_total = await page.evaluate(() => window.tickscope.PF.flame.tree.cum[0]);
      out.profile_status = await page.evaluate(() => document.getElementById('status').textContent);
      out.profile_empty = await page.evaluate(() => { const e = document.getElementById('pf-empty'); return e.hidden ? null : e.textContent; });
      await shot('profile-flame');
      if (out.profile_empty === null) {
        // Double-click the widest frame three rows above the root: its callers and callees
        // open for that frame (the first click's zoom moved it from under the pointer).
        const target = await page.evaluate(() => {
          const f = window.tickscope.PF.flame;
          const r = f.canvas.getBoundingClientRect();
          let best = -1;
          for (const i of f.drawn) if (f.depth[i] === 3 && (best < 0 || f.width(i) > f.width(best))) best = i;
          if (best < 0) return null;
          const scale = r.width / (f.width(f.root) || 1);
          return {
            x: r.left + (f.x[best] - f.x[f.root] + f.width(best) / 2) * scale,
            y: r.bottom - 3.5 * f.rowH,
            name: f.name(best),
          };
        });
        if (target) {
          await page.mouse.dblclick(target.x, target.y);
          await page.waitForSelector('#pf-sandwich h2', { timeout: 30000 });
          out.flame_dblclick = { want: target.name, got: await page.evaluate(() => document.querySelector('#pf-sandwich h2').textContent) };
        }
      }
      await page.click('#profile .seg button[data-pv="icicle"]');
      // The callers' icicle: the root's children are where the time was spent (leaf
      // functions), the widest first.
      await page.waitForFunction(() => window.tickscope.PF.loadedReverse === true, null, { timeout: 30000 });
      out.icicle_widest = await page.evaluate(() => {
        const f = window.tickscope.PF.flame, t = f.tree;
        let best = -1;
        for (let i = 1; i < t.parent.length; i++) if (t.parent[i] === 0 && (best < 0 || t.cum[i] > t.cum[best])) best = i;
        return best < 0 ? null : { name: f.name(best), cum: t.cum[best] };
      });
      await shot('profile-icicle');
      await page.click('#profile .seg button[data-pv="top"]');
      if (out.profile_empty !== null) {
        // Nothing to list either: the table says so, and there is no function to pick.
        await page.waitForSelector('#pf-top p.empty', { timeout: 30000 });
        out.top_empty = await page.evaluate(() => document.querySelector('#pf-top p.empty').textContent);
        await shot('profile-top');
        throw 'done';
      }
      await page.waitForSelector('#pf-top tbody tr', { timeout: 30000 });
      out.top = await rows('#pf-top');
      await shot('profile-top');
      // Sort by cum, then pick the heaviest function of the program's own (or the heaviest):
      // its callers and callees.
      await page.click('#pf-top th[data-key="cum"]');
      await page.click('#pf-top th[data-key="cum"]');
      out.top_sorted_by_cum_up = (await rows('#pf-top')).map((r) => Number(r.cum.value));
      await page.click('#pf-top th[data-key="cum"]');
      const sorted = await rows('#pf-top');
      out.top_sorted_by_cum = sorted.map((r) => Number(r.cum.value));
      const pick = Math.max(0, sorted.findIndex((r) => /::demo::/.test(r.name.value)));
      await page.click(`#pf-top tbody tr:nth-child(${pick + 1})`);
      // (A sandwich of the double-click's frame is there already: wait for this one's.)
      await page.waitForFunction((n) => { const h = document.querySelector('#pf-sandwich h2'); return h && h.textContent === n; }, sorted[pick].name.value, { timeout: 30000 });
      out.sandwich = await page.evaluate(() => ({
        name: document.querySelector('#pf-sandwich h2').textContent,
        callers: [...document.querySelectorAll('#pf-sandwich div:nth-of-type(1) tbody tr')].length,
        callees: [...document.querySelectorAll('#pf-sandwich div:nth-of-type(2) tbody tr')].length,
      }));
      await shot('profile-sandwich');
      // A short window, so that a function's hottest line is below it unless the view
      // opens there.
      await page.setViewportSize({ width: 1400, height: 300 });
      await page.click('#pf-sandwich button');
      await page.waitForSelector('#pf-source h3', { timeout: 30000 });
      out.source = await page.evaluate(() => document.getElementById('pf-source').innerText);
      // The hottest line is in view (the view opened at the file's first line).
      out.source_hottest = await page.evaluate(() => {
        const l = document.querySelector('#pf-source .src-line.hottest');
        if (!l) return null;
        const r = l.getBoundingClientRect();
        return { text: l.querySelector('.code').textContent, visible: r.top >= 0 && r.bottom <= window.innerHeight };
      });
      await page.setViewportSize({ width: 1400, height: 900 });
      await shot('profile-source');
    }
  }

  if (flags.includes('--diff')) {
    await page.click('#tabs button[data-tab="diff"]');
    // The table drawn (a heap diff of what two runs still held at exit may have no row).
    await page.waitForSelector('#df-table p.note', { timeout: 60000 });
    if (si !== null) {
      out.diff_default_type = await page.evaluate(() => window.tickscope.DF.flame.tree.sample_type);
      const want = await page.evaluate((n) => window.tickscope.S.info.profiles[window.tickscope.S.info.diff.base].sample_types[n].split('/')[0], Number(si));
      await page.selectOption('#df-si', si);
      await page.waitForFunction((t) => window.tickscope.DF.flame.tree.sample_type === t, want, { timeout: 60000 });
    }
    await page.waitForSelector('#df-table tbody tr', { timeout: 60000 });
    out.diff_sample_type = await page.evaluate(() => window.tickscope.DF.flame.tree.sample_type);
    out.diff_rows = await rows('#df-table');
    out.diff_total = await page.evaluate(() => ({ new: window.tickscope.DF.flame.tree.cum[0], base: window.tickscope.DF.flame.tree.base_cum[0] }));
    // Frames found only in the base, as drawn with each choice of widths: their width in
    // all, and how many were drawn (by default both profiles' widths: they were dropped).
    const baseOnly = () => page.evaluate(() => {
      const f = window.tickscope.DF.flame, t = f.tree;
      let width = 0, n = 0;
      const drawn = new Set(f.drawn);
      let drawnN = 0;
      for (let i = 1; i < t.cum.length; i++) {
        if (t.cum[i] === 0 && t.base_cum[i] > 0) { n++; width += f.width(i); if (drawn.has(i)) drawnN++; }
      }
      return { n, width, drawn: drawnN, root: f.width(0) };
    });
    out.diff_base_only = { both: await baseOnly() };
    await page.selectOption('#df-width', 'new');
    out.diff_base_only.new = await baseOnly();
    await page.check('#df-norm');
    out.diff_normalised = await page.evaluate(() => { const f = window.tickscope.DF.flame; return { base_root: f.base(0), new_root: f.tree.cum[0] }; });
    await page.waitForFunction(() => location.hash.includes('dw=new') && location.hash.includes('norm=1'), null, { timeout: 30000 });
    await page.uncheck('#df-norm');
    await page.selectOption('#df-width', 'both');
    out.diff_status = await page.evaluate(() => document.getElementById('status').textContent);
    out.tabs = await page.evaluate(() => [...document.querySelectorAll('#tabs button')].map((b) => b.textContent));
    await shot('diff');
  }
} catch (e) {
  if (e !== 'done') {
    out.errors.push(`driver: ${e && e.stack ? e.stack : e}`);
    try { await shot('failure'); } catch (_) { /* nothing more to show */ }
  }
}
await browser.close();
// Exit once stdout is flushed: a pipe takes a large document in several writes.
process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(out.errors.length ? 1 : 0));
