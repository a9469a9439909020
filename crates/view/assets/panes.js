// The panes under the timeline: a scope's (or a life's) details, the summary of the capture
// or of the selected range (with a profile's top functions beside it), and the CPU samples
// of the range. The methods are the timeline's (TL's, timeline.js): `this` is TL.
import { Flame, flameBox } from './flame.js';
import { PF } from './profile.js';
import { S } from './state.js';
import { renderSummary, table, topTable } from './tables.js';
import { banner, show } from './tabs.js';
import { HOW } from './tracks.js';
import { $, count, dur, el, fmtAt, short } from './util.js';
import { api } from './wire.js';

export const panes = {
  async details(h) {
    const box = $('details');
    const c = this.capture();
    let d;
    try {
      d = await api('scope', { c: S.c, thread: h.tr.t.index, depth: h.depth, at: Math.max(0, Math.round(h.ns)) });
    } catch (e) { box.replaceChildren(el('h2', { text: 'Scope' }), el('p', { class: 'note', text: e.message })); return; }
    if (!d) { box.replaceChildren(el('h2', { text: 'Scope' }), el('p', { class: 'note', text: 'No scope there.' })); return; }
    S.highlight = d.scope.id;
    this.draw();
    const kv = el('dl', { class: 'kv' },
      el('dt', { text: 'scope' }), el('dd', { class: 'mono', text: d.scope.name }),
      el('dt', { text: 'location' }), el('dd', { class: 'mono', text: d.scope.file ? `${d.scope.file}:${d.scope.line}` : '-' }),
      el('dt', { text: 'thread' }), el('dd', { text: `${d.thread_name} (depth ${d.depth})` }),
      el('dt', { text: 'begins' }), el('dd', { class: 'mono', text: fmtAt(d.begin_ns, 1) }),
      el('dt', { text: 'duration' }), el('dd', { class: 'mono', text: dur(d.duration_ns), 'data-value': d.duration_ns }),
      el('dt', { text: 'self' }), el('dd', { class: 'mono', text: `${dur(d.self_ns)}${d.exact ? '' : ' (to a bin)'}`, 'data-value': d.self_ns }),
      el('dt', { text: 'ended' }), el('dd', { text: d.ended }));
    const kids = d.children.length ? table([
      { key: 'name', label: 'child', value: (r) => r.name },
      { key: 'calls', label: 'calls', num: true, value: (r) => r.calls, text: (r) => count(r.calls) },
      { key: 'total', label: 'total', num: true, value: (r) => r.total_ns, text: (r) => dur(r.total_ns) },
    ], d.children) : el('p', { class: 'note', text: d.exact ? 'No child scopes.' : '' });
    box.replaceChildren(el('h2', { text: 'Scope' }), kv, kids,
      el('button', { text: 'Zoom to it', onclick: () => this.setView(d.begin_ns - (d.end_ns - d.begin_ns) * 0.05, d.end_ns + (d.end_ns - d.begin_ns) * 0.05) }));
  },

  lifeDetails(site, life) {
    const c = this.capture();
    const s = c.scopes[site] || [`<scope #${site}>`, '', 0];
    const [b, e, how] = life;
    S.highlight = site;
    const kv = el('dl', { class: 'kv' },
      el('dt', { text: 'call site' }), el('dd', { class: 'mono', text: s[0] }),
      el('dt', { text: 'location' }), el('dd', { class: 'mono', text: s[1] ? `${s[1]}:${s[2]}` : '-' }),
      el('dt', { text: 'begins' }), el('dd', { class: 'mono', text: fmtAt(b, 1) }),
      el('dt', { text: 'wall time' }), el('dd', { class: 'mono', text: dur(e - b), 'data-value': e - b }),
      el('dt', { text: 'ended' }), el('dd', { text: HOW[how] }));
    $('details').replaceChildren(el('h2', { text: 'Life of a future or span' }), kv,
      el('p', { class: 'note', text: 'From its first poll to ready or drop (a future), or its creation to its close (a span). Its polls or entries are the slices of the same name on the threads that ran them.' }),
      el('button', { text: 'Zoom to it', onclick: () => this.setView(b - (e - b) * 0.05, e + (e - b) * 0.05) }));
    this.draw();
  },

  // The summary's `max` clicked: the view goes to that call (a third of the window) and
  // shows its details. Within the range the summary is of, if it is a range's.
  async goSlowest(id, range) {
    const q = range ? { c: S.c, id, from: range[0], until: range[1] } : { c: S.c, id };
    let k;
    try { k = await api('slowest', q); } catch (e) { $('status').textContent = `slowest call: ${e.message}`; return; }
    if (!k) return;
    const d = Math.max(k.end_ns - k.begin_ns, 1);
    this.setView(k.begin_ns - d, k.end_ns + d);
    await this.details({ tr: { t: { index: k.thread } }, depth: k.depth, ns: (k.begin_ns + k.end_ns) / 2 });
  },

  async loadSummary() {
    const key = `${S.c}:${S.sel ? S.sel.join(',') : ''}`;
    if (this.summaryFor === key) return;
    this.summaryFor = key;
    const box = $('summary');
    loading(box, 'summary-loading', `Computing the summary of ${S.sel ? `${fmtAt(S.sel[0], 1)} – ${fmtAt(S.sel[1], 1)}` : 'the whole capture'}…`);
    try {
      const s = await api('summary', S.sel ? { c: S.c, from: Math.round(S.sel[0]), until: Math.round(S.sel[1]) } : { c: S.c });
      if (this.summaryFor !== key) return;
      delete box.dataset.loading;
      this.summaryAt = Date.now();
      if (!S.sel) this.summary = s;
      const range = S.sel ? [Math.round(S.sel[0]), Math.round(S.sel[1])] : null;
      renderSummary(box, s, (r) => { S.highlight = r.id; this.draw(); }, (r) => this.goSlowest(r.id, range));
      banner();
      this.profileTop(box);
    } catch (e) {
      if (e.status === 202) { this.summaryFor = null; box.replaceChildren(el('p', { class: 'note', text: 'Computing the summary…' })); setTimeout(() => { if (S.tab === 'timeline') this.loadSummary(); }, 300); return; }
      if (this.summaryFor === key) delete box.dataset.loading;
      box.replaceChildren(el('p', { class: 'note', text: `summary: ${e.message}` }));
    }
    this.loadSamples();
  },

  // With a profile beside the capture, its top functions under the summary: the first page
  // holds both tables as text.
  async profileTop(box) {
    const i = S.info.profiles.findIndex((p, k) => !S.info.diff || (k !== S.info.diff.base && k !== S.info.diff.new));
    if (i < 0) return;
    try {
      const t = await api('top', { p: i });
      box.append(el('h2', { text: `Top functions of ${short(S.info.profiles[i].name)} (as tickscope top prints them)` }),
        topTable(t.rows.slice(0, 25), t, (r) => { show('profile', i); PF.pick(r.name); }));
      box.lastChild.id = 'first-top-table';
    } catch (e) {
      box.append(el('p', { class: 'note', text: `top: ${e.message}` }));
    }
  },

  async loadSamples() {
    const c = this.capture();
    const sampled = c.threads && c.threads.some((t) => t.sampled);
    $('smp-tab').hidden = !sampled;
    if (!sampled) return;
    const box = $('samples');
    const r = S.sel || [0, c.duration_ns + 1];
    // Only the latest question's answer is drawn (an older one may come after it).
    const ask = (this.samplesAsked = (this.samplesAsked || 0) + 1);
    box.dataset.loading = '1';
    box.querySelector('.note').textContent = `Computing the CPU samples of ${S.sel ? `${fmtAt(r[0], 1)} – ${fmtAt(r[1], 1)}` : 'the whole capture'}…`;
    try {
      const f = await api('samples', { c: S.c, from: Math.round(r[0]), until: Math.round(r[1]) });
      if (ask !== this.samplesAsked) return;
      delete box.dataset.loading;
      box.querySelector('.note').textContent = `${count(f.cum[0])} CPU samples ${S.sel ? `in ${fmtAt(r[0], 1)} – ${fmtAt(r[1], 1)}` : 'in the whole capture (select a range for its own)'}`;
      if (!this.smpFlame) this.smpFlame = new Flame($('smp-canvas'), { icicle: () => false, tip: flameBox($('smp-canvas')) });
      this.smpFlame.set(f);
      const rows = f.top.rows;
      $('smp-top').replaceChildren(topTable(rows, f.top));
    } catch (e) {
      if (ask !== this.samplesAsked) return;
      delete box.dataset.loading;
      box.querySelector('.note').textContent = `samples: ${e.message}`;
    }
  },
};

// Until `box`'s answer comes, what it shows is marked stale (dimmed) under a line naming what
// is being computed (a new range showed the old range's figures for up to 2 s, as if they
// were its own).
function loading(box, id, text) {
  box.dataset.loading = '1';
  let line = document.getElementById(id);
  if (!line) {
    line = el('p', { class: 'note loading' });
    line.id = id;
    box.prepend(line);
  }
  line.textContent = text;
}
