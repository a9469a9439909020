// tickscope view: the page's entry point. It wires the views (timeline.js, profile.js), asks
// the server what it holds, opens the tab the URL names, and keeps up with live captures.
import { DF, PF, setupProfile } from './profile.js';
import { S, readHash, refreshInfo, written } from './state.js';
import { banner, buildTabs, markTabs, show, tabsStale } from './tabs.js';
import { TL, setupTimeline } from './timeline.js';
import { $, el, typing } from './util.js';

async function poll() {
  // A capture still arriving, or a viewer waiting for programs to connect (a page opened
  // before its program started must see the capture appear).
  const live = S.info.captures.some((c) => !c.status.done) || S.info.listening;
  if (live) {
    try {
      const before = S.info.captures[S.c];
      const was = before && before.duration_ns;
      await refreshInfo();
      const c = S.info.captures[S.c];
      if (S.tab === 'timeline' && c && c.threads) {
        if (S.follow && was !== undefined && S.until !== null) {
          if (S.from <= 0 && S.until >= was) {
            // The whole capture in view (as when it first appeared): keep it whole.
            S.from = 0;
            S.until = Math.max(c.duration_ns, 1000) * 1.02;
          } else {
            // A window of the user's: the same span, at the end.
            const span = S.until - S.from;
            S.until = c.duration_ns * 1.02;
            S.from = S.until - span;
          }
        }
        // A live capture's summary is recomputed every few seconds, and once at its end.
        if (c.live && (Date.now() - (TL.summaryAt || 0) > 3000 || c.status.done)) TL.summaryFor = null;
        if (!TL.ready || c.live) { TL.open(); }
      }
      if (tabsStale()) { buildTabs(); markTabs(); banner(); }
    } catch (_) { /* the server went away */ }
  }
  setTimeout(poll, live ? 500 : 2000);
}

// The help panel: the `?` button or key opens and closes it, Esc closes it.
function setupHelp() {
  const toggle = (open) => { $('help').hidden = !(open ?? $('help').hidden); };
  $('help-button').addEventListener('click', () => toggle());
  document.addEventListener('keydown', (e) => {
    if (typing(e.target)) return;
    if (e.key === '?') { toggle(); e.preventDefault(); }
    else if (e.key === 'Escape' && !$('help').hidden) { toggle(false); e.preventDefault(); }
  });
}

// Back, Forward and an edited hash: the view the hash names (they did nothing).
function restore() {
  if (location.hash === written.hash) return;
  const before = { tab: S.tab, c: S.c };
  readHash();
  written.hash = location.hash;
  written.place = null;
  if (S.tab === 'timeline' && S.c !== before.c) { TL.answer = null; TL.summaryFor = null; }
  if (S.tab === 'profile' && !S.info.profiles[S.p]) S.tab = 'timeline';
  show(S.tab, S.tab === 'timeline' ? S.c : S.tab === 'profile' ? S.p : undefined);
  if (S.sel) TL.loadSummary();
}

async function main() {
  setupTimeline();
  setupProfile();
  setupHelp();
  try {
    await refreshInfo();
  } catch (e) {
    document.body.prepend(el('p', { class: 'note', text: `Cannot reach the viewer: ${e.message}. Open the URL tickscope view printed (it holds the token).` }));
    return;
  }
  readHash();
  buildTabs();
  if (!S.info.captures.length && S.tab === 'timeline') S.tab = S.info.profiles.length ? (S.info.diff && S.info.profiles.length === 2 ? 'diff' : 'profile') : 'timeline';
  if (S.tab === 'profile' && !S.info.profiles[S.p]) S.tab = 'timeline';
  show(S.tab, S.tab === 'timeline' ? S.c : S.tab === 'profile' ? S.p : undefined);
  if (S.sel) TL.loadSummary();
  window.addEventListener('hashchange', restore);
  window.addEventListener('popstate', restore);
  poll();
}

// For tests and the curious: the state and the components.
window.tickscope = { S, TL, PF, DF };
main();
