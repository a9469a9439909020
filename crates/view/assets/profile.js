// A profile's tab (flame graph, icicle, top, a function's callers and callees, its source
// lines) and the diff's tab (a differential flame graph and diff's table).
import { Flame, flameBox } from './flame.js';
import { functionViews } from './source.js';
import { S, writeHash } from './state.js';
import { labels, topTable } from './tables.js';
import { $, count, el, fmtUnit } from './util.js';
import { api } from './wire.js';

export const PF = {
  loaded: null,
  flame: null,

  async open() {
    const p = S.info.profiles[S.p];
    if (!p) return;
    if (S.si !== null && !(S.si < p.sample_types.length)) S.si = null;
    $('pf-name').textContent = p.name;
    if ($('pf-search').value !== S.q) $('pf-search').value = S.q;
    sampleTypes($('pf-si'), p, S.si);
    $('status').textContent = totalsLine(p, S.si);
    for (const b of document.querySelectorAll('#profile .seg button')) b.classList.toggle('on', b.dataset.pv === S.pv);
    const flame = S.pv === 'flame' || S.pv === 'icicle';
    $('pf-flamebox').hidden = !flame;
    $('pf-top').hidden = S.pv !== 'top';
    $('pf-sandwich').hidden = S.pv !== 'sandwich';
    $('pf-source').hidden = S.pv !== 'source';
    try {
      if (flame) {
        // The icicle is the callers' tree (leaf functions at the top, their callers below),
        // not the flame graph upside down.
        const reverse = S.pv === 'icicle';
        if (this.loaded !== S.p || this.loadedSi !== S.si || this.loadedReverse !== reverse) {
          if (!this.flame) {
            this.flame = new Flame($('pf-canvas'), {
              icicle: () => S.pv === 'icicle',
              widestFirst: () => S.pv === 'icicle',
              tip: flameBox($('pf-canvas')),
              onPick: (n) => this.pick(n),
              onZoom: () => { S.zoom = this.flame.root; writeHash(); },
            });
          }
          const t0 = performance.now();
          const tree = await api('flame', reverse ? { p: S.p, si: S.si, reverse: 1 } : { p: S.p, si: S.si });
          this.flame.set(tree);
          emptyNote($('pf-empty'), $('pf-canvas'), tree, typeName(p, S.si));
          this.loaded = S.p;
          this.loadedSi = S.si;
          this.loadedReverse = reverse;
          document.body.dataset.flameMs = String(Math.round(performance.now() - t0));
        }
        // The zoom and the search the URL holds (a node of this tree: another is the whole).
        this.flame.root = S.zoom > 0 && S.zoom < this.flame.tree.parent.length ? S.zoom : 0;
        this.flame.match = searchOf(S.q);
        this.flame.draw();
        document.body.dataset.flamePainted = '1';
      } else if (S.pv === 'top') {
        const t = await api('top', { p: S.p, si: S.si });
        const table = t.rows.length
          ? topTable(t.rows, t, (r) => this.pick(r.name))
          : el('p', { class: 'note empty', text: `No ${typeName(p, S.si) || 'samples'} in this profile: nothing to list.` });
        $('pf-top').replaceChildren(el('p', { class: 'note', text: 'As tickscope top prints it; click a row for its callers and callees.' }), labels(t.labels), table);
      } else if (S.pv === 'sandwich') await this.sandwich();
      else if (S.pv === 'source') await this.source();
    } catch (e) {
      $('status').textContent = `${S.pv}: ${e.message}`;
      const pane = S.pv === 'source' ? $('pf-source') : S.pv === 'sandwich' ? $('pf-sandwich') : null;
      if (pane) pane.replaceChildren(el('p', { class: 'note', text: `${S.fn}: ${e.message}` }));
    }
    writeHash();
  },

  pick(name) {
    S.fn = name;
    S.pv = 'sandwich';
    this.open();
  },

  // The sandwich and source views (source.js).
  ...functionViews,
};

// The search box's text as a regular expression (none: empty or not one).
function searchOf(q) {
  try { return q ? new RegExp(q) : null; } catch (_) { return null; }
}

// The index of the sample type shown: `si`, or the profile's default (the last without one).
function typeIndex(p, si) {
  return si ?? p.default_index ?? p.sample_types.length - 1;
}

// Sample type `si`'s name (`cpu`, `inuse_space`).
function typeName(p, si) {
  return String(p.sample_types[typeIndex(p, si)] ?? '').split('/')[0];
}

// The status line of profile `p` shown by sample type `si`: that type's total in its unit,
// and the number of samples where the profile counts them (a CPU profile's `samples` type:
// samples, not the records that hold them).
function totalsLine(p, si) {
  const i = typeIndex(p, si);
  const totals = p.totals || [];
  const parts = [];
  const [ty, unit] = String(p.sample_types[i] ?? '').split('/');
  const n = p.sample_types.findIndex((t) => t === 'samples/count');
  if (n >= 0 && n !== i) parts.push(`${count(totals[n] ?? 0)} samples`);
  parts.push(ty === 'samples' ? `${count(totals[i] ?? 0)} samples` : `${fmtUnit(totals[i] ?? 0, unit)} ${ty}`);
  return parts.join(' · ');
}

// Over an empty flame graph (nothing of the type shown), a word saying so, not a blank.
function emptyNote(note, canvas, tree, ty) {
  const empty = !(tree.cum && tree.cum[0]) && !(tree.base_cum && tree.base_cum[0]);
  note.hidden = !empty;
  canvas.hidden = empty;
  if (empty) note.textContent = `No ${ty || 'samples'} in this profile: nothing to draw.`;
}

// Fills `select` with profile `p`'s sample types, `si` (or the default) chosen; hidden when
// there is one type only. A heap profile has four: what was allocated and what is still in
// use, in objects and in bytes.
function sampleTypes(select, p, si) {
  const want = String(si ?? p.default_index ?? p.sample_types.length - 1);
  if (select.dataset.types !== p.sample_types.join()) {
    select.replaceChildren(...p.sample_types.map((t, i) => el('option', { value: String(i), text: t })));
    select.dataset.types = p.sample_types.join();
  }
  select.value = want;
  select.hidden = p.sample_types.length < 2;
}

// The profile tab's controls: its views, the sample type, the search, the flame graph's size.
export function setupProfile() {
  $('pf-si').addEventListener('change', (e) => { S.si = Number(e.target.value); S.zoom = 0; PF.open(); });
  $('df-si').addEventListener('change', (e) => { S.si = Number(e.target.value); DF.open(); });
  // The diff's widths and normalisation: the same tree laid out again.
  const relayout = () => { if (DF.flame && DF.flame.tree) { DF.flame.layout(); DF.flame.draw(); } writeHash(); };
  $('df-width').addEventListener('change', (e) => { S.dw = e.target.value; relayout(); });
  $('df-norm').addEventListener('change', (e) => { S.norm = e.target.checked; relayout(); });
  for (const b of document.querySelectorAll('#profile .seg button')) {
    b.addEventListener('click', () => {
      // The flame graph and the callers' icicle are two trees: a zoom is the one's.
      if ((S.pv === 'icicle') !== (b.dataset.pv === 'icicle')) S.zoom = 0;
      S.pv = b.dataset.pv;
      PF.open();
    });
  }
  $('pf-search').addEventListener('input', (e) => {
    S.q = e.target.value;
    if (PF.flame) PF.flame.search(searchOf(S.q));
    writeHash();
  });
  new ResizeObserver(() => { if (S.tab === 'profile' && PF.flame) PF.flame.draw(); }).observe($('pf-flamebox'));
}

// The diff tab.
export const DF = {
  flame: null,
  async open() {
    try {
      const base = S.info.profiles[S.info.diff.base];
      if (S.si !== null && !(S.si < base.sample_types.length)) S.si = null;
      const d = await api('diff', { si: S.si });
      $('df-name').textContent = `${d.base} → ${d.new}`;
      sampleTypes($('df-si'), base, S.si);
      if (!this.flame) {
        this.flame = new Flame($('df-canvas'), {
          diff: true,
          diffBy: () => ({ width: S.dw, normalised: S.norm }),
          icicle: () => false,
          tip: flameBox($('df-canvas')),
        });
      }
      $('df-width').value = S.dw;
      $('df-norm').checked = S.norm;
      this.flame.set(d);
      const nw = S.info.profiles[S.info.diff.new];
      $('status').textContent = nw ? `${totalsLine(base, S.si)} → ${totalsLine(nw, S.si)}` : totalsLine(base, S.si);
      emptyNote($('df-empty'), $('df-canvas'), d, typeName(base, S.si));
      const t = d.table;
      $('df-table').replaceChildren(el('p', { class: 'note', text: 'As tickscope diff prints it (negative: shrank).' }), labels(t.labels), topTable(t.rows, t));
    } catch (e) {
      $('status').textContent = `diff: ${e.message}`;
    }
  },
};
