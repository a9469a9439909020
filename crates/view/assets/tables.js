// Tables: sortable tables of rows, top's and diff's table, a profile's header lines, and a
// capture's (or range's) summary as tickscope report prints it.
import { count, dur, el, fixed1, fmtAt, scopeColour, short } from './util.js';

// A table of `rows`; columns: {key, label, num, text(row), value(row), title}; sortable:
// a header's click sorts by it (numbers largest first, names A to Z), a second click the
// other way.
export function table(cols, rows, opts) {
  opts = opts || {};
  const t = el('table', { class: opts.class });
  const head = el('tr');
  let sortKey = opts.sort || null;
  let reversed = false;
  const tbody = el('tbody');
  const fill = () => {
    tbody.textContent = '';
    let rs = rows;
    if (sortKey) {
      const c = cols.find((c) => c.key === sortKey);
      rs = [...rows].sort((a, b) => (c.num ? (c.value(b) - c.value(a)) : String(c.value(a)).localeCompare(String(c.value(b)))));
      if (reversed) rs.reverse();
    }
    for (const r of rs) {
      const tr = el('tr', { class: opts.onPick ? 'pick' : null, onclick: opts.onPick ? () => opts.onPick(r) : null });
      for (const c of cols) {
        const td = el('td', { class: c.num ? 'num' : c.key === 'name' ? 'name' : null, title: c.title ? c.title(r) : null });
        if (c.html) td.append(c.html(r)); else td.textContent = c.text ? c.text(r) : String(c.value(r));
        if (c.value) td.dataset.value = c.value(r);
        td.dataset.col = c.key;
        tr.append(td);
      }
      tbody.append(tr);
    }
    for (const th of head.children) {
      th.classList.toggle('sorted', th.dataset.key === sortKey && !reversed);
      th.classList.toggle('sorted-up', th.dataset.key === sortKey && reversed);
    }
  };
  for (const c of cols) {
    const th = el('th', { class: `${c.num ? 'num ' : ''}${opts.sortable ? 'sortable' : ''}`, text: c.label, title: c.help });
    th.dataset.key = c.key;
    if (opts.sortable) {
      th.addEventListener('click', () => {
        reversed = sortKey === c.key && !reversed;
        sortKey = c.key;
        fill();
      });
    }
    head.append(th);
  }
  t.append(el('thead', {}, head), tbody);
  fill();
  return t;
}

// A profile's functions as tickscope top (or diff) prints them; `onPick(row)` on a click.
export function topTable(rows, top, onPick) {
  return table([
    { key: 'flat', label: 'flat', num: true, value: (r) => r.flat, text: (r) => r.flat_text },
    { key: 'flat_pct', label: 'flat%', num: true, value: (r) => r.flat_pct, text: (r) => `${r.flat_pct.toFixed(2)}%` },
    { key: 'sum_pct', label: 'sum%', num: true, value: (r) => r.sum_pct, text: (r) => `${r.sum_pct.toFixed(2)}%` },
    { key: 'cum', label: 'cum', num: true, value: (r) => r.cum, text: (r) => r.cum_text },
    { key: 'cum_pct', label: 'cum%', num: true, value: (r) => r.cum_pct, text: (r) => `${r.cum_pct.toFixed(2)}%` },
    { key: 'name', label: 'name', value: (r) => r.name, text: (r) => r.name + (r.inline ? ' (inline)' : '') },
  ], rows, { sortable: true, onPick, class: 'top' });
}

// The profile's header lines (pprof's labels), folded away.
export function labels(lines) {
  const last = lines.length ? lines[lines.length - 1] : '';
  return el('details', { class: 'labels' }, el('summary', { text: last || 'profile' }), ...lines.slice(0, -1).map((l) => el('p', { class: 'note', text: l })));
}

// Summary `s` (of a capture or a range) into `box`; `onPick(row)` when a scope's row is clicked.
// `onSlowest(row)`: a row's `max` is a button that goes to that call.
export function renderSummary(box, s, onPick, onSlowest) {
  const head = s.range
    ? `Range ${fmtAt(s.range.from_ns, 1)} – ${fmtAt(s.range.until_ns, 1)}: the calls that began and ended in it (${count(s.range.crossing)} crossing its edges not counted), as tickscope report --from --until.`
    : `The whole capture: ${dur(s.wall_ns)} of wall time, ${count(s.events)} events, as tickscope report prints it.`;
  const cols = [
    { key: 'name', label: 'name', value: (r) => r.name, html: (r) => el('span', {}, el('span', { class: 'swatch', style: `background:${scopeColour(r.id, 72)}` }), r.name + (r.kind === 'group' ? ' [group]' : '')) },
    { key: 'location', label: 'location', value: (r) => `${r.file}:${r.line}`, text: (r) => `${short(r.file)}:${r.line}` },
    { key: 'calls', label: 'calls', num: true, value: (r) => r.calls, text: (r) => count(r.calls) },
    { key: 'total_ns', label: 'total', num: true, value: (r) => r.total_ns, text: (r) => dur(r.total_ns) },
    { key: 'self_ns', label: 'self', num: true, value: (r) => r.self_ns, text: (r) => dur(r.self_ns) },
    { key: 'mean_ns', label: 'mean', num: true, value: (r) => r.mean_ns ?? -1, text: (r) => dur(r.mean_ns ?? NaN) },
    { key: 'min_ns', label: 'min', num: true, value: (r) => r.min_ns ?? -1, text: (r) => dur(r.min_ns ?? NaN) },
    { key: 'p50_ns', label: 'p50', num: true, value: (r) => r.p50_ns ?? -1, text: (r) => dur(r.p50_ns ?? NaN) },
    { key: 'p99_ns', label: 'p99', num: true, value: (r) => r.p99_ns ?? -1, text: (r) => dur(r.p99_ns ?? NaN) },
    {
      key: 'max_ns', label: 'max', num: true, value: (r) => r.max_ns ?? -1,
      html: (r) => (onSlowest && r.max_ns != null
        ? el('button', { class: 'link', text: dur(r.max_ns), title: 'go to this call', onclick: (e) => { e.stopPropagation(); onSlowest(r); } })
        : document.createTextNode(dur(r.max_ns ?? NaN))),
    },
    // As report computes it (total × 100 ÷ wall) and prints it: the JSON's value is rounded
    // to two decimals, and a second rounding of that moved the last digit.
    { key: 'wall_percent', label: '%wall', num: true, value: (r) => r.wall_percent, text: (r) => fixed1(s.wall_ns > 0 ? r.total_ns * 100 / s.wall_ns : 0) },
    { key: 'dropped', label: 'dropped', num: true, value: (r) => r.dropped, text: (r) => count(r.dropped), help: 'calls dropped whole past the memory budget' },
  ];
  const t = table(cols, s.scopes, { sortable: true, onPick, class: 'summary' });
  t.id = 'summary-table';
  // Futures and spans: busy (their polls or entries, the rows above) beside wall (their lives).
  const timed = s.scopes.filter((r) => r.wall);
  const lives = [];
  if (timed.length) {
    const w = (k) => (r) => r.wall[k];
    const wcols = [
      cols[0],
      { key: 'lives', label: 'lives', num: true, value: w('calls'), text: (r) => count(r.wall.calls) },
      { key: 'cancelled', label: 'cancelled', num: true, value: w('cancelled'), text: (r) => count(r.wall.cancelled) },
      { key: 'calls', label: 'entries', num: true, value: (r) => r.calls, text: (r) => count(r.calls) },
      { key: 'total_ns', label: 'busy', num: true, value: (r) => r.total_ns, text: (r) => dur(r.total_ns) },
      { key: 'wall_ns', label: 'wall', num: true, value: w('total_ns'), text: (r) => dur(r.wall.total_ns) },
      { key: 'wall_p50', label: 'wall p50', num: true, value: w('p50_ns'), text: (r) => dur(r.wall.p50_ns) },
      { key: 'wall_p99', label: 'wall p99', num: true, value: w('p99_ns'), text: (r) => dur(r.wall.p99_ns) },
      { key: 'wall_max', label: 'wall max', num: true, value: w('max_ns'), text: (r) => dur(r.wall.max_ns) },
    ];
    const lt = table(wcols, timed, { sortable: true, onPick, class: 'summary' });
    lt.id = 'lives-table';
    lives.push(el('p', { class: 'note', text: 'Futures and spans: busy = time polled or entered, wall = first poll → ready or dropped (future), created → closed (span).' }), lt);
  }
  const l = s.lost;
  const extra = [];
  if (s.frames.length) extra.push(`frames: ${s.frames.map((f) => `${f.name} ${count(f.frames)} (mean ${dur(f.mean_ns ?? NaN)}, p99 ${dur(f.p99_ns ?? NaN)}, max ${dur(f.max_ns ?? NaN)})`).join('; ')}`);
  if (s.counters.length) extra.push(`counters: ${s.counters.map((x) => `${x.name} ${count(x.count)} values, ${x.min} to ${x.max}`).join('; ')}`);
  if (s.messages.count) extra.push(`messages: ${count(s.messages.count)}${s.messages.first.length ? ` — first: ${s.messages.first.map((m) => m.text).join(' | ')}` : ''}`);
  extra.push(`lost: ${count(l.dropped)} events dropped (memory budget spent) · ${count(l.undelivered)} undelivered · ${count(l.evicted)} evicted (flight-recorder window) · scopes: ${count(l.abandoned)} abandoned, ${count(l.unmatched_ends)} ends unmatched, ${count(l.open_at_end)} open at the end, ${count(l.dropped_scopes)} dropped whole, ${count(l.in_flight_at_start)} in flight at the start`);
  if (l.async_unpaired) extra.push(`futures and spans: ${count(l.async_unpaired)} with one end of their life in the capture (no wall time)`);
  box.replaceChildren(el('p', { class: 'note', text: head }), t, ...lives, ...extra.map((x) => el('p', { class: 'note', text: x })));
}
