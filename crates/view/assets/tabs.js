// The tabs (a timeline per capture, a profile per profile, the diff) and the banner above
// them.
//
// show() opens a tab's view, and the timeline's panes show() the profile tab: the two modules
// import each other, for calls made once the page has loaded (an ES module cycle is fine so
// long as no module uses the other's exports while it is first evaluated).
import { DF, PF } from './profile.js';
import { S, writeHash } from './state.js';
import { TL } from './timeline.js';
import { $, count, el, short } from './util.js';

export function buildTabs() {
  const nav = $('tabs');
  nav.textContent = '';
  const add = (label, tab, extra) => {
    const b = el('button', { role: 'tab', text: label, onclick: () => show(tab, extra) });
    b.dataset.tab = tab;
    if (extra !== undefined) b.dataset.extra = extra;
    nav.append(b);
  };
  S.info.captures.forEach((c, i) => add(captureLabel(c), 'timeline', i));
  // A diff's two profiles have their own tabs too (they were hidden).
  S.info.profiles.forEach((p, i) => add(`Profile: ${short(p.name)}`, 'profile', i));
  if (S.info.diff) add('Diff', 'diff');
}

// A capture's tab: its file, or a live one's program once its header said it (the peer's
// address until then).
function captureLabel(c) {
  return c.live && c.program ? `Live: ${short(c.program)} (pid ${c.pid})` : `Timeline: ${short(c.name)}`;
}

// Whether the tabs no longer match the captures (one arrived, or a live one's program is
// now known).
export function tabsStale() {
  const tabs = [...$('tabs').children].filter((b) => b.dataset.tab === 'timeline');
  return tabs.length !== S.info.captures.length
    || S.info.captures.some((c, i) => tabs[i].textContent !== captureLabel(c));
}

export function markTabs() {
  for (const b of $('tabs').children) {
    const on = b.dataset.tab === S.tab && (b.dataset.extra === undefined || Number(b.dataset.extra) === (S.tab === 'timeline' ? S.c : S.p));
    b.classList.toggle('on', on);
    b.setAttribute('aria-selected', on);
  }
}

export function show(tab, extra) {
  // A sample type is chosen per tab: the diff's is not the profile tab's.
  if (tab !== S.tab && (tab === 'diff' || S.tab === 'diff')) S.si = null;
  S.tab = tab;
  if (tab === 'timeline' && extra !== undefined && extra !== S.c) { S.c = extra; S.from = S.until = null; S.sel = null; TL.answer = null; TL.summaryFor = null; }
  if (tab === 'profile' && extra !== undefined && extra !== S.p) { S.p = extra; S.fn = null; S.si = null; S.zoom = 0; PF.loaded = null; }
  for (const s of document.querySelectorAll('.tab')) s.hidden = s.id !== tab;
  markTabs();
  banner();
  writeHash();
  if (tab === 'timeline') TL.open();
  else if (tab === 'profile') PF.open();
  else if (tab === 'diff') DF.open();
}

export function banner() {
  const b = $('banner');
  b.textContent = '';
  const lines = [];
  if (S.tab === 'timeline') {
    const c = S.info.captures[S.c];
    if (!c && S.info.listening) {
      const on = (S.info.listen_on || []).join(' or ');
      lines.push(on
        ? `Waiting for a program to connect on ${on}: run it with TICKSCOPE_CAPTURE=${S.info.listen_on[0]}.`
        : 'Waiting for a capture to arrive.');
    }
    if (c) {
      if (c.status.error) lines.push(`${c.name}: ${c.status.error}`);
      for (const w of c.status.warnings) lines.push(`This capture is incomplete: ${w}. It is shown up to its last good chunk.`);
      const lost = TL.summary && TL.summary.lost;
      if (lost && (lost.dropped || lost.undelivered)) {
        lines.push(`The program lost ${count(lost.dropped)} events past its memory budget and ${count(lost.undelivered)} in chunks its sink could not take: the red marks on the timeline show where; scopes were dropped whole (${count(lost.dropped_scopes)}), so every figure is of whole calls.`);
      }
    }
  } else if (S.tab === 'profile') {
    const p = S.info.profiles[S.p];
    if (p) for (const n of p.notes) lines.push(n);
  }
  // Live connections refused or cut (the viewer's limits), the latest few.
  const n = S.info.notices;
  if (S.tab === 'timeline' && n && n.count) {
    for (const l of n.latest.slice(-3)) lines.push(`Live captures: ${l}.`);
    if (n.count > 3) lines.push(`(${count(n.count)} such notices in all: see the viewer's stderr.)`);
  }
  for (const l of lines) b.append(el('p', { text: l }));
  b.hidden = lines.length === 0;
}
