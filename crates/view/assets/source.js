// A function's views in a profile's tab: its callers and callees (as tickscope peek prints
// them), and its source lines with their values (as tickscope list prints them). The methods
// are the profile tab's (PF's, profile.js): `this` is PF.
import { S } from './state.js';
import { table } from './tables.js';
import { $, el, fmtUnit } from './util.js';
import { api } from './wire.js';

export const functionViews = {
  async sandwich() {
    const box = $('pf-sandwich');
    if (!S.fn) { box.replaceChildren(el('p', { class: 'note', text: 'Pick a function: click a row of the top table, or double-click a frame of the flame graph.' })); return; }
    const r = await api('peek', { p: S.p, name: S.fn, si: S.si });
    const n = r.nodes[0];
    if (!n) { box.replaceChildren(el('p', { class: 'note', text: `${S.fn}: not in the profile` })); return; }
    const total = r.total || 1;
    const side = (label, list) => {
      const max = Math.max(1, ...list.map((x) => Math.abs(x.weight)));
      return el('div', {}, el('h3', { text: label }), list.length ? table([
        { key: 'weight', label: 'value', num: true, value: (x) => x.weight, text: (x) => fmtUnit(x.weight, r.unit) },
        { key: 'pct', label: '%', num: true, value: (x) => 100 * x.weight / total, text: (x) => `${(100 * x.weight / total).toFixed(2)}%` },
        { key: 'name', label: 'function', value: (x) => x.name, html: (x) => el('span', {}, el('span', { class: 'bar', style: `width:${Math.round(120 * Math.abs(x.weight) / max)}px` }), x.name) },
      ], list, { onPick: (x) => this.pick(x.name) }) : el('p', { class: 'note', text: 'none' }));
    };
    box.replaceChildren(
      el('h2', { class: 'mono', text: n.name }),
      el('p', { text: `flat ${fmtUnit(n.flat, r.unit)} (${n.flat_pct.toFixed(2)}%) · cum ${fmtUnit(n.cum, r.unit)} (${n.cum_pct.toFixed(2)}%) — as tickscope peek prints it` }),
      el('button', { text: 'Source', onclick: () => { S.pv = 'source'; this.open(); } }),
      side('Callers', n.callers), side('Callees', n.callees));
  },

  async source() {
    const box = $('pf-source');
    if (!S.fn) { box.replaceChildren(el('p', { class: 'note', text: 'Pick a function first (top table or flame graph).' })); return; }
    const r = await api('list', { p: S.p, name: S.fn, si: S.si });
    const parts = [];
    let hottest = null;
    for (const f of r.functions) {
      parts.push(el('h3', { class: 'mono', text: `${f.name} — ${f.file || '?'}` }), el('p', { class: 'note', text: `flat ${fmtUnit(f.flat, r.unit)} · cum ${fmtUnit(f.cum, r.unit)}${f.source_found ? '' : ` · source not found${f.error ? `: ${f.error}` : ''} (tickscope view --source-path DIRS)`}` }));
      const max = Math.max(1, ...f.lines.map((l) => l.cum));
      const pre = el('div', { class: 'mono' }, el('div', { class: 'src-line head' },
        el('span', { class: 'num', text: 'flat' }), el('span', { class: 'num', text: 'cum' }),
        el('span', { class: 'num', text: 'line' }), el('span', { text: 'source' })));
      let hot = null;
      for (const l of f.lines) {
        const line = el('div', { class: `src-line${l.cum > 0.2 * max ? ' hot' : ''}` },
          el('span', { class: 'num', text: l.flat ? fmtUnit(l.flat, r.unit) : '.' }),
          el('span', { class: 'num', text: l.cum ? fmtUnit(l.cum, r.unit) : '.' }),
          el('span', { class: 'num', text: String(l.line) }),
          el('span', { class: 'code', text: l.text ?? '' }));
        if (l.cum > 0 && (!hot || l.cum > hot.cum)) hot = { cum: l.cum, line };
        pre.append(line);
      }
      if (!hottest && hot) hottest = hot.line;
      parts.push(pre);
    }
    box.replaceChildren(...(parts.length ? parts : [el('p', { class: 'note', text: 'no source lines' })]));
    // Opened at the first function's hottest line, not at the file's first.
    if (hottest) {
      hottest.classList.add('hottest');
      hottest.scrollIntoView({ block: 'center' });
    }
  },
};
