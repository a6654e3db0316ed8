// app.js - the /stacks page of stackwatchd, rendered in the browser.
//
// The daemon serves the same index.html for /stacks and /stacks?pid=N; this
// script reads the view from the location and builds the page:
// - /stacks: the process table (/api/v1/processes), sortable and
//   filterable; stacks only once a process is opened;
// - /stacks?pid=N: the process from /api/v1/stacks (schema: INTERFACE.md):
//   its header, the groups of identical stacks (largest first) or a flame
//   graph (flame.js), and the Profile view of its history;
// - /stacks?pid=N&view=diff&since=S: what changed since S seconds ago
//   (/api/v1/diff), group by group.
// Threads the watchdog flags (/api/v1/stuck) are marked when that endpoint
// answers; any error there is ignored. An error the daemon answered the
// page itself with comes in the page's layout (web.c); this script adds
// what to do next. Everything comes from the daemon itself: no CDN, works
// offline.
//
// Kept fast for processes with a thousand threads: a group's threads and
// frames are built only once it is opened, the search text only once
// someone searches, and off-screen groups are not laid out (style.css).

import { FlameGraph, frameLabel } from './flame.js';

const REFRESH_MS = 5000;
// The Profile view's windows: seconds, and how they are offered.
const PROFILE_WINDOWS = [['30', 'last 30 s'], ['60', 'last minute'], ['300', 'last 5 minutes'],
  ['900', 'last 15 minutes'], ['86400', 'the whole history']];
const THREADS_SHOWN = 6; // thread chips per group before "+N more"
const WAIT_NAMES = 8; // threads a wait line names, as the text format
const OPEN_GROUPS = 12; // groups of a process open at first (the largest); the rest closed
const FIRST_GROUPS = 100; // groups built before the first paint; the rest after it
const CHUNK_GROUPS = 200; // groups built per task after that
const SYSTEM_MODULE = /^\/(usr\/)?lib(32|64|x32)?\//;

const $ = (id) => document.getElementById(id);
const main = $('main');
const search = $('search');

// The view: which process, the stack parameters to pass on, and whether
// it is the diff (with its window in seconds).
const view = (() => {
  const p = new URLSearchParams(location.search);
  const pid = /^[1-9][0-9]{0,8}$/.test(p.get('pid') || '') ? p.get('pid') : null;
  const pass = {};
  for (const k of ['symbols', 'timeout_ms']) if (p.has(k)) pass[k] = p.get(k);
  const since = /^[0-9]{1,5}(\.[0-9]+)?$/.test(p.get('since') || '') ? p.get('since') : '60';
  return { pid, pass, diff: Boolean(pid) && p.get('view') === 'diff', since };
})();

const state = {
  views: [], // one ProcessView per process on the page
  stuck: new Map(), // pid -> Map(tid -> stuck thread), from /api/v1/stuck
  open: new Map(), // group key -> open, as the user left it
  zoom: new Map(), // pid -> flame graph zoom path
  profile: new Map(), // pid -> the Profile view's settings: open, mode, window, diff
  timer: 0,
  gen: 0, // renders so far: building the rest of the groups of an older one stops
  loading: false,
  procFilter: '', // the process table's filter, kept across refreshes
  procSort: { key: 'pid', desc: false }, // and its order
  pane: 'groups', // the process view shows its groups or its flame graph
};

// --- small helpers --------------------------------------------------------

// el('td', {class: 'x', title: 'y'}, child...) - children are nodes or text.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else e.setAttribute(k, v === true ? '' : v);
    }
  }
  for (const k of kids) {
    if (k !== undefined && k !== null && k !== false) e.append(k);
  }
  return e;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v != null) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

const baseName = (p) => (p ? p.slice(p.lastIndexOf('/') + 1) : '');
const plural = (n, word, many = `${word}s`) => `${n} ${n === 1 ? word : many}`;
const ms = (us) => (us / 1000).toFixed(1);

// "45 s", "3 min 20 s", "2 h 5 min".
function fmtSpan(sec) {
  const s = Math.floor(sec);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  return `${Math.floor(s / 3600)} h${Math.floor(s / 60) % 60 ? ` ${Math.floor(s / 60) % 60} min` : ''}`;
}

function fmtTime(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleTimeString();
}

function setStatus(text) {
  $('status').textContent = text;
}

class ApiError extends Error {
  constructor(status, message, body = null) {
    super(message);
    this.status = status;
    this.body = body; // the daemon's JSON error, when it sent one
  }
}

// Characters that are invisible or change how the text around them reads
// (controls, bidirectional marks, overrides and isolates, zero-width and
// other format characters, line separators): a target's thread names and
// command line must not disguise what the page shows, so every string the
// API returns has them written out as \uXXXX.
const DISGUISE = new RegExp('[\\u0000-\\u001f\\u007f-\\u009f\\u061c\\u200b-\\u200f'
  + '\\u2028-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff\\ufff9-\\ufffb]', 'g');
const reveal = (s) => s.replace(DISGUISE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
const revealAll = (key, v) => (typeof v === 'string' ? reveal(v) : v);

// GETs url as JSON; an answer other than 2xx throws an ApiError carrying
// the daemon's {"error", "status"} sentence when there is one.
async function getJSON(url) {
  let res;
  try {
    res = await fetch(url, { headers: { Accept: 'application/json' }, cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, `cannot reach the daemon (${e.message})`);
  }
  const text = await res.text();
  let body = null;
  try {
    body = JSON.parse(text, revealAll);
  } catch {
    // not JSON: reported below
  }
  if (!res.ok) {
    const why = body && body.error ? body.error : text.trim() || res.statusText;
    throw new ApiError(res.status, why, body);
  }
  if (!body) throw new ApiError(res.status, 'the daemon answered with something that is not JSON');
  return body;
}

// --- text, as in the daemon's text format (INTERFACE.md) -----------------

function frameText(f, i) {
  const hex = (f.ip || '0x0').replace(/^0x/, '').padStart(16, '0');
  let s = `#${String(i).padEnd(2)} 0x${hex} in ${f.function || '??'}`;
  if (!f.function || (f.function[0] !== '[' && !f.function.includes('('))) s += ' ()';
  if (f.file && f.line > 0) s += ` at ${baseName(f.file)}:${f.line}`;
  else if (f.module) s += ` from ${f.module}`;
  if (f.inlined) s += ' (inlined)';
  return s;
}

function groupText(p, g, byTid) {
  const names = g.tids.map((t) => `${(byTid.get(t) || {}).name || '?'} (${t})`);
  const lines = [`${plural(g.count, 'thread')}: ${names.join(', ')}`, groupStates(g, byTid)];
  g.frames.forEach((f, i) => lines.push(frameText(f, i)));
  if (!g.frames.length) lines.push('(no frames)');
  return lines.join('\n');
}

function processText(p, byTid) {
  const out = [`Process ${p.pid} (${p.comm}): ${plural(p.threads_total, 'thread')}, ` +
    `${plural(p.groups.length, 'group')}, collected in ${ms(p.elapsed_us)} ms`];
  for (const g of p.groups) out.push(groupText(p, g, byTid), '');
  const bad = p.threads.filter((t) => t.status !== 'ok').sort((a, b) => a.tid - b.tid);
  if (bad.length) {
    out.push(`${plural(bad.length, 'thread')} not dumped:`);
    for (const t of bad) out.push(`  ${t.name} (${t.tid}): ${t.status}: ${t.error || ''}`);
  } else {
    out.pop();
  }
  return `${out.join('\n')}\n`;
}

// Copies text; the Clipboard API needs a secure context (localhost is
// one, a plain-http host name is not), so fall back to a selection.
async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // denied: try the old way
    }
  }
  const ta = el('textarea', { class: 'offscreen', readonly: true });
  ta.value = text;
  document.body.append(ta);
  ta.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  ta.remove();
  return ok;
}

function flash(button, ok) {
  const old = button.dataset.label || button.textContent;
  button.dataset.label = old;
  button.textContent = ok ? 'Copied' : 'Copy failed';
  setTimeout(() => { button.textContent = old; }, 1200);
}

// --- one process ----------------------------------------------------------

// The frame a person looks at first: the innermost one outside the system
// libraries (waiter_wait, not pthread_cond_wait); else the innermost.
function telling(frames) {
  return frames.find((f) => f.function && f.module && !SYSTEM_MODULE.test(f.module)) ||
    frames[0];
}

const openByDefault = (gv) => gv.i < OPEN_GROUPS;

// A stack as a table: #, function, file:line (plain text: not a link),
// module; the full path and address on hover.
function framesTable(frames) {
  const body = el('tbody');
  frames.forEach((f, i) => {
    const where = f.file ? `${baseName(f.file)}${f.line ? `:${f.line}` : ''}` : '';
    const mod = f.module ? baseName(f.module) : '';
    body.append(el('tr', { class: f.inlined ? 'frame inlined' : 'frame' },
      el('td', { class: 'n' }, `#${i}`),
      el('td', { class: f.function ? 'fn' : 'fn nosym' }, frameLabel(f),
        f.inlined ? el('span', { class: 'badge inl', title: 'inlined into the next frame' }, 'inlined') : ''),
      el('td', { class: 'loc', title: f.file ? `${f.file}${f.line ? `:${f.line}` : ''}` : undefined }, where),
      el('td', { class: 'mod', title: f.module ? `${f.module} +${f.offset} (ip ${f.ip})` : f.ip }, mod)));
  });
  if (!frames.length) body.append(el('tr', null, el('td', { colspan: 4 }, '(no frames)')));
  return el('table', { class: 'frames' }, body);
}

// The order of states among equal counts, as the text format has it.
const STATE_ORDER = 'RDSTtZXI';
function stateRank(s) {
  const i = STATE_ORDER.indexOf(s);
  return i < 0 ? STATE_ORDER.length : i;
}

// "3 S, 1 R": counts by state letter, most first (then R, D, S, ...).
function stateCounts(counts) {
  return Object.entries(counts).sort((a, b) => b[1] - a[1] || stateRank(a[0]) - stateRank(b[0]))
    .map(([s, n]) => `${n} ${s}`).join(', ');
}

// "12 ms", "3.4 s", "12 min": CPU time, as the text format puts it.
function cpuText(ms) {
  if (ms < 10000) return `${ms} ms`;
  if (ms < 600000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min`;
}

// "state: 3 S, 1 R; cpu 12 ms", as jstack would say it: the states of a
// group's threads and the CPU time they used, user and system together.
function groupStates(g, byTid) {
  const counts = {};
  let cpu = 0;
  for (const tid of g.tids) {
    const t = byTid.get(tid) || {};
    const st = t.state || '?';
    counts[st] = (counts[st] || 0) + 1;
    cpu += (t.utime_ms || 0) + (t.stime_ms || 0);
  }
  return `state: ${stateCounts(counts)}; cpu ${cpuText(cpu)}`;
}

// Keeps a group open or closed across refreshes where the user chose
// other than the default.
function remember(gv, open) {
  if (open === openByDefault(gv)) state.open.delete(gv.key);
  else state.open.set(gv.key, open);
}

function groupKey(pid, g) {
  return `${pid}|${g.frames.map((f) => `${frameLabel(f)}@${f.file || ''}:${f.line || ''}`).join('|')}`;
}

class ProcessView {
  constructor(p) {
    this.p = p;
    this.byTid = new Map(p.threads.map((t) => [t.tid, t]));
    this.groups = p.groups.map((g, i) => this.prepare(g, i));
    this.built = 0; // groups[0..built) have their element
    this.words = []; // the filter
    this.openAll = null; // after expand/collapse all: whether new groups open
    this.el = this.build();
  }

  // What the page keeps per group beyond the JSON. The key and the
  // search text are made on first use: most renders need neither.
  prepare(g, i) {
    const pid = this.p.pid;
    const byTid = this.byTid;
    return {
      g, i, el: null, rendered: false, stuck: [], k: null, h: null,
      get key() {
        if (this.k === null) this.k = groupKey(pid, g);
        return this.k;
      },
      // What the search box looks in: functions, file:line, modules,
      // offsets, thread names and tids.
      get hay() {
        if (this.h === null) {
          const names = new Set();
          for (const t of g.tids) names.add((byTid.get(t) || {}).name || '');
          const hay = [...names, ...g.tids];
          for (const f of g.frames) {
            hay.push(f.function || '', f.file ? `${f.file}:${f.line ?? ''}` : '', f.module || '', f.offset || '');
          }
          this.h = hay.join('\n').toLowerCase();
        }
        return this.h;
      },
    };
  }

  build() {
    const p = this.p;
    const sec = el('section', { class: 'proc', id: `pid-${p.pid}`, dataset: { pid: p.pid } });
    sec.append(this.header(), this.links());
    for (const c of p.deadlocks || []) sec.append(this.deadlockBox(c));
    if (p.lock_owners_unsupported) sec.append(el('p', { class: 'note locks-note' }, p.lock_owners_unsupported));
    if (p.jit_map_refused) sec.append(el('p', { class: 'note jit-note' }, p.jit_map_refused));
    if (p.hidden_threads) {
      const n = p.hidden_threads;
      sec.append(el('p', { class: 'note hidden-note' },
        `${n} thread${n === 1 ? '' : 's'} left out: ${n === 1 ? 'it has' : 'they have'} credentials of ${n === 1 ? 'its' : 'their'} own that you may not read.`));
    }
    this.list = el('div', { class: 'groups' });
    this.buildGroups(FIRST_GROUPS);
    this.none = el('p', { class: 'note nomatch', hidden: true }, 'No group matches the filter.');
    // The groups, or in their place the flame graph of the same threads:
    // a tab each, above both, so that neither sits below the other.
    this.groupsPane = el('div', { class: 'pane groups-pane' }, el('h3', null, 'Groups ',
      el('span', { class: 'muted' }, `(${p.groups.length}, largest first)`)), this.list, this.none);
    if (p.groups.length) {
      this.flameBox = el('div', { class: 'flame' });
      this.flamePane = el('div', { class: 'pane flame-pane', id: `flame-${p.pid}` },
        el('h3', null, 'Flame graph ', el('span', { class: 'muted' },
          '(all threads; outermost frame on top; a row per frame)')), this.flameBox);
      sec.append(this.paneTabs(), this.groupsPane, this.flamePane);
    } else {
      sec.append(this.groupsPane);
    }
    this.showPane(state.pane, false);
    const bad = p.threads.filter((t) => t.status !== 'ok').sort((a, b) => a.tid - b.tid);
    if (bad.length) sec.append(this.notDumped(bad));
    sec.append(this.profileSection());
    return sec;
  }

  paneTabs() {
    const tab = (pane, text) => el('button', { type: 'button', role: 'tab', class: 'pane-tab',
      dataset: { pane } }, text);
    this.tabs = el('div', { class: 'pane-tabs', role: 'tablist', 'aria-label': 'How to show the stacks' },
      tab('groups', `Groups (${this.p.groups.length})`), tab('flame', 'Flame graph'));
    this.tabs.addEventListener('click', (e) => {
      const b = e.target.closest('button.pane-tab');
      if (b) this.showPane(b.dataset.pane, true);
    });
    return this.tabs;
  }

  // Shows the groups or the flame graph (drawn when first shown: it
  // needs its width).
  showPane(pane, chosen) {
    if (!this.flamePane) pane = 'groups';
    if (chosen) state.pane = pane;
    this.groupsPane.hidden = pane !== 'groups';
    if (!this.flamePane) return;
    this.flamePane.hidden = pane !== 'flame';
    for (const b of this.tabs.children) b.setAttribute('aria-selected', String(b.dataset.pane === pane));
    if (pane === 'flame' && this.el.isConnected) this.drawFlame();
  }

  // The Profile view: a flame graph of the daemon's samples of this
  // process over a window of its history (/api/v1/profile), every thread
  // (wall clock) or only the running ones (CPU), or a differential one:
  // the newer half of the window against the older. Loaded when opened.
  profileSection() {
    const pid = this.p.pid;
    const st = state.profile.get(pid) || { open: false, mode: 'wall', window: '60', diff: false };
    state.profile.set(pid, st);
    const option = (value, text) => el('option', { value }, text);
    const mode = el('select', { class: 'profile-mode', 'aria-label': 'what the profile counts' },
      option('wall', 'wall clock: every thread'), option('cpu', 'CPU: running threads only'));
    const win = el('select', { class: 'profile-window', 'aria-label': 'the window' },
      ...PROFILE_WINDOWS.map(([v, text]) => option(v, text)));
    this.profileWindow = win;
    const diff = el('input', { type: 'checkbox', class: 'profile-diff' });
    mode.value = st.mode;
    win.value = st.window;
    diff.checked = st.diff;
    this.profileNote = el('p', { class: 'note profile-note' });
    this.profileBox = el('div', { class: 'flame profile-flame' });
    this.profileState = st;
    const det = el('details', { class: 'profile', id: `profile-${pid}` },
      el('summary', null, 'Profile ', el('span', { class: 'muted' },
        '(the daemon\'s samples of this process over time)')),
      el('div', { class: 'profile-bar' }, mode, win,
        el('label', null, diff, ' differential: the newer half of the window against the older')),
      this.profileNote, this.profileBox);
    const changed = () => {
      st.mode = mode.value;
      st.window = win.value;
      st.diff = diff.checked;
      if (det.open) this.loadProfile();
    };
    for (const c of [mode, win, diff]) c.addEventListener('change', changed);
    det.addEventListener('toggle', () => {
      st.open = det.open;
      if (det.open) this.loadProfile();
    });
    det.open = st.open;
    this.offerWindows();
    return det;
  }

  // Offers only the windows the history covers: "last N" once its oldest
  // sample is at least N old, and the whole history by its real span
  // (history_from, history_samples of /api/v1/targets). A daemon that
  // does not say keeps every window on offer.
  async offerWindows() {
    let doc;
    let now = Date.now() / 1000;
    try {
      const res = await fetch('/api/v1/targets', { headers: { Accept: 'application/json' }, cache: 'no-store' });
      if (!res.ok) return;
      doc = await res.json();
      const date = Date.parse(res.headers.get('Date') || '');
      if (!Number.isNaN(date)) now = date / 1000; // the daemon's clock
    } catch {
      return; // nothing to go by: every window stays
    }
    const t = (doc.targets || []).find((x) => String(x.pid) === String(this.p.pid));
    if (!t || !('history_from' in t)) return;
    const win = this.profileWindow;
    const st = this.profileState;
    const span = t.history_from == null ? 0 : Math.max(0, now - t.history_from);
    const kept = t.history_samples ?? 0;
    const offered = PROFILE_WINDOWS.filter(([v]) => v !== '86400' && span >= Number(v))
      .map(([v, text]) => el('option', { value: v }, text));
    offered.push(el('option', { value: '86400' }, span > 0
      ? `the whole history (${fmtSpan(span)}, ${plural(kept, 'sample')})`
      : 'the whole history (no samples yet)'));
    win.replaceChildren(...offered);
    win.dataset.span = String(Math.floor(span));
    if ([...win.options].some((o) => o.value === st.window)) {
      win.value = st.window;
    } else {
      win.value = '86400';
      st.window = '86400';
      if (this.profileBox.dataset.loaded) this.loadProfile();
    }
  }

  async loadProfile() {
    const pid = this.p.pid;
    const st = this.profileState;
    let w = Number(st.window);
    // Milliseconds at most: the API takes 16 characters of a number, and
    // halves of a span (8.153500000000001) would pass them.
    const ms3 = (x) => Number(x.toFixed(3));
    const url = (since, until) => `/api/v1/profile${query({ pid, mode: st.mode, since: ms3(since), until: ms3(until) })}`;
    const box = this.profileBox;
    const token = (this.profileToken = (this.profileToken || 0) + 1);
    let now;
    let base = null;
    try {
      if (st.diff && w >= 86400) {
        // The whole history: halves of the time it spans.
        const all = await getJSON(url(w, 0));
        if (all.from) w = Math.min(w, Math.max(2, (Date.now() - Date.parse(all.from)) / 1000 + 1));
      }
      if (st.diff) [now, base] = await Promise.all([getJSON(url(w / 2, 0)), getJSON(url(w, w / 2))]);
      else now = await getJSON(url(w, 0));
    } catch (e) {
      this.profileNote.textContent = `No profile: ${e.message}`;
      box.replaceChildren();
      return;
    }
    if (token !== this.profileToken) return; // a newer load took over
    const cpu = st.mode === 'cpu';
    if (!now.total) {
      this.profileNote.textContent = `No ${cpu ? 'CPU time' : 'threads'} in the samples of this window `
        + `(${plural(now.samples, 'sample')}): the daemon samples every --sample-interval and keeps `
        + '--history samples.';
      box.replaceChildren();
      box.dataset.loaded = `${st.mode}${st.diff ? '-diff' : ''}`;
      return;
    }
    let older = '';
    if (base && !base.total) { // nothing to compare with: the newer half alone
      older = ' (none in the older half to compare with)';
      base = null;
    }
    this.profileNote.textContent = `${plural(now.samples, 'sample')}${older} from ${fmtTime(now.from)} to `
      + `${fmtTime(now.to)}; each box counts `
      + (cpu ? 'the CPU time its threads used between samples' : 'its threads in every sample')
      + (base ? `, against the ${plural(base.samples, 'sample')} of the half before` : '') + '.';
    this.profileFlame = new FlameGraph(now.groups, `${this.p.comm} (${pid})`,
      cpu ? { unit: 'ms of CPU', units: 'ms of CPU', base: base ? base.groups : null }
        : { unit: 'thread-sample', base: base ? base.groups : null });
    box.replaceChildren();
    this.profileFlame.mount(box);
    this.profileFlame.draw();
    box.dataset.loaded = `${st.mode}${st.diff ? '-diff' : ''}`;
  }

  header() {
    const p = this.p;
    const threads = p.threads_ok === p.threads_total
      ? `${p.threads_total}` : `${p.threads_total} (${p.threads_ok} dumped)`;
    const fact = (k, v) => el('div', null, el('dt', null, k), el('dd', null, v));
    return el('header', { class: 'proc-head' },
      el('h2', null, el('a', { href: `/stacks${query({ pid: p.pid, ...view.pass })}` },
        `${p.comm || '?'}`), el('span', { class: 'pid' }, ` pid ${p.pid}`)),
      el('p', { class: 'cmdline' }, el('code', null, p.cmdline || '')),
      el('dl', { class: 'facts' },
        fact('threads', threads),
        fact('groups', String(p.groups.length)),
        fact('collected in', `${ms(p.elapsed_us)} ms`),
        fact('skew', `${ms(p.skew_us)} ms`),
        el('div', { title: p.collected_at }, el('dt', null, 'at'), el('dd', null, fmtTime(p.collected_at))),
        this.stuckFact = el('div', { class: 'stuck-fact', hidden: true })),
      methodNote(p));
  }

  links() {
    const pid = this.p.pid;
    const a = (href, text, title) => el('a', { href, title }, text);
    return el('p', { class: 'links' },
      a(`/api/v1/stacks${query({ pid, format: 'json', ...view.pass })}`, 'JSON'),
      a(`/stacks${query({ pid, format: 'text', ...view.pass })}`, 'text'),
      a(`/stacks${query({ pid, format: 'folded', ...view.pass })}`, 'folded',
        'one line per group, for flame graph tools'),
      a(`/stacks${query({ pid, view: 'diff', since: 60 })}`, 'diff (60 s)',
        'what changed since the sample of a minute ago, group by group'),
      el('button', { type: 'button', class: 'copy-all', dataset: { pid } }, 'Copy all as text'));
  }

  // Builds the elements of up to n more groups, filtered, opened and
  // marked as the groups before them; returns whether any are left. A
  // thousand different stacks are on the screen before they are all built.
  buildGroups(n) {
    const end = Math.min(this.built + n, this.groups.length);
    const frag = document.createDocumentFragment();
    for (; this.built < end; this.built++) {
      const gv = this.groups[this.built];
      frag.append(this.group(gv));
      if (this.words.length) gv.el.hidden = !this.matches(gv);
      if (gv.stuck.length) this.showStuck(gv);
    }
    this.list.append(frag);
    return this.built < this.groups.length;
  }

  group(gv) {
    const { g } = gv;
    const top = g.frames.length ? telling(g.frames) : null;
    let open = this.openAll ?? openByDefault(gv);
    if (state.open.size && state.open.has(gv.key)) open = state.open.get(gv.key);
    const d = el('details', { class: 'group', open, dataset: { group: gv.i } });
    d.append(el('summary', null,
      el('span', { class: 'count' }, plural(g.count, 'thread')),
      top ? el('span', { class: 'top' }, el('span', { class: 'fn' }, frameLabel(top)),
        top.file ? ` ${baseName(top.file)}${top.line ? `:${top.line}` : ''}` : '') : '',
      el('span', { class: 'gstate' }, groupStates(g, this.byTid)),
      this.lockBadge(g),
      cutBadge(g, this.byTid),
      el('button', { type: 'button', class: 'copy', dataset: { group: gv.i } }, 'Copy')));
    gv.el = d;
    if (open) this.renderBody(gv);
    return d;
  }

  // "waiter ×64 · waiter (8852), waiter (8853), … +58 more"
  threadLine(gv, all) {
    const { g } = gv;
    const line = el('div', { class: 'threads' });
    if (g.count > THREADS_SHOWN) {
      const counts = new Map();
      for (const t of g.tids) {
        const n = (this.byTid.get(t) || {}).name || '?';
        counts.set(n, (counts.get(n) || 0) + 1);
      }
      const top = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 4)
        .map(([n, c]) => `${n} ×${c}`).join(', ');
      line.append(el('span', { class: 'names' }, counts.size > 4 ? `${top}, …` : top), ' · ');
    }
    const stuck = new Set(gv.stuck.map((s) => s.tid));
    const shown = all ? g.tids : g.tids.slice(0, THREADS_SHOWN);
    shown.forEach((tid, k) => {
      const t = this.byTid.get(tid) || {};
      let title = `state ${t.state || '?'}, user ${t.utime_ms ?? '?'} ms, system ${t.stime_ms ?? '?'} ms`;
      if (t.method) title += `, read by ${METHOD_WORDS[t.method] || t.method}`;
      if (t.unchanged_s !== undefined) title += `, unchanged for ${t.unchanged_s} s`;
      if (t.truncated) title += `, ${CUT_WORDS[t.truncated] || 'cut short'}`;
      const s = gv.stuck.find((x) => x.tid === tid);
      if (s) title += `, stuck (${s.reason || 'flagged'})`;
      if (k) line.append(', ');
      line.append(el('span', { class: stuck.has(tid) ? 'thread stuck' : 'thread', title,
        dataset: { tid } }, `${t.name || '?'} (${tid})`));
    });
    if (!all && g.tids.length > THREADS_SHOWN) {
      line.append(' ', el('button', { type: 'button', class: 'more linkish', dataset: { group: gv.i } },
        `+${g.tids.length - THREADS_SHOWN} more`));
    }
    return line;
  }

  // A group's threads and frames are built when it is first opened:
  // closed groups cost one line each, whatever their size and depth.
  renderBody(gv) {
    if (gv.rendered) return;
    gv.rendered = true;
    gv.el.append(this.threadLine(gv, false));
    const waits = this.waitLines(gv);
    if (waits) gv.el.append(waits);
    gv.el.append(framesTable(gv.g.frames));
  }

  // "deadlock" (red) or "waits for a lock" on a group's summary line.
  lockBadge(g) {
    let waits = false;
    for (const tid of g.tids) {
      const w = (this.byTid.get(tid) || {}).waiting_for;
      if (w && w.deadlock) return el('span', { class: 'badge deadlock-badge' }, 'deadlock');
      waits = waits || Boolean(w);
    }
    return waits ? el('span', { class: 'badge lock-badge' }, 'waits for a lock') : '';
  }

  // A link to a thread's stack: opens its group and points at the thread.
  threadLink(tid) {
    const t = this.byTid.get(tid) || {};
    return el('a', { href: `#pid-${this.p.pid}`, class: 'thread-link', dataset: { pid: this.p.pid, tid } },
      `${t.name || '?'} (tid ${tid})`);
  }

  // "mutex 0x… held by worker-7 (tid 4312), which waits for …": what the
  // thread tid waits for, and onward while each owner waits in turn.
  lockChain(tid) {
    const out = [];
    const seen = new Set([tid]);
    let t = this.byTid.get(tid);
    for (let hop = 0; t && t.waiting_for && hop < 8; hop++) {
      const w = t.waiting_for;
      if (hop) out.push(', which waits for ');
      out.push(w.kind === 'rwlock' ? `rwlock (to ${w.mode || 'lock'}) ` : `${w.kind} `,
        el('code', null, w.address));
      if (w.symbol) out.push(' (', el('code', { class: 'lock-name' }, w.symbol), ')');
      if (w.owner_tid == null) {
        if (w.kind === 'rwlock') out.push(' held by readers');
        break;
      }
      if (w.owner_exited) {
        out.push(` held by tid ${w.owner_tid}, which exited`);
        break;
      }
      out.push(' held by ', this.threadLink(w.owner_tid));
      if (w.held > 1) out.push(` ${w.held} times`);
      if (w.owner_died) out.push(' (a previous owner died holding it)');
      if (seen.has(w.owner_tid)) {
        out.push(': ', el('strong', null, 'deadlock'));
        break;
      }
      seen.add(w.owner_tid);
      t = this.byTid.get(w.owner_tid);
    }
    return out;
  }

  // "worker-3 (4247), worker-4 (4248)": the threads a line is about, at
  // most WAIT_NAMES of them, then how many more.
  namesOf(tids) {
    const out = [];
    tids.slice(0, WAIT_NAMES).forEach((tid, k) => {
      if (k) out.push(', ');
      out.push(el('span', { class: 'waiter', dataset: { tid } }, `${(this.byTid.get(tid) || {}).name || '?'} (${tid})`));
    });
    if (tids.length > WAIT_NAMES) out.push(` and ${tids.length - WAIT_NAMES} more`);
    return out;
  }

  // The lines under a group: one per lock its threads wait for, naming
  // those threads, then one per lock a thread of it holds that others
  // wait for (jstack's "- locked <0x…>").
  waitLines(gv) {
    const byKey = new Map();
    const box = el('div', { class: 'waits' });
    for (const tid of gv.g.tids) {
      const w = (this.byTid.get(tid) || {}).waiting_for;
      if (!w) continue;
      const key = `${w.address}/${w.owner_tid}`;
      if (!byKey.has(key)) byKey.set(key, []);
      byKey.get(key).push(tid);
    }
    for (const tids of byKey.values()) {
      const w = this.byTid.get(tids[0]).waiting_for;
      box.append(el('p', { class: w.deadlock ? 'wait deadlocked' : 'wait' },
        ...this.namesOf(tids), ': waiting for ', ...this.lockChain(tids[0])));
    }
    let holds = 0;
    for (const tid of gv.g.tids) {
      for (const h of (this.byTid.get(tid) || {}).holds || []) {
        holds++;
        box.append(el('p', { class: 'holds' }, ...this.namesOf([tid]), `: holds ${h.kind} `,
          el('code', null, h.address), ...(h.symbol ? [' (', el('code', { class: 'lock-name' }, h.symbol), ')'] : []),
          `, ${plural(h.waiters, 'thread')} waiting`));
      }
    }
    return byKey.size || holds ? box : null;
  }

  // A deadlock, in red at the top of the process: its cycle, linked.
  deadlockBox(c) {
    const first = c.threads[0];
    return el('div', { class: 'deadlock', role: 'alert' },
      el('strong', null, 'Deadlock: '), this.threadLink(first), ' waits for ', ...this.lockChain(first));
  }

  // Opens the group of thread tid, scrolls to it and marks the thread.
  showThread(tid) {
    const t = this.byTid.get(tid);
    if (!t || t.group == null) return false;
    this.showPane('groups', true);
    while (this.built <= t.group && this.buildGroups(CHUNK_GROUPS));
    const gv = this.groups.find((x) => x.i === t.group);
    if (!gv || !gv.el) return false;
    gv.el.hidden = false;
    gv.el.open = true;
    this.renderBody(gv);
    remember(gv, true);
    const line = gv.el.querySelector('.threads');
    if (line && !line.querySelector(`[data-tid="${tid}"]`)) line.replaceWith(this.threadLine(gv, true));
    for (const x of main.querySelectorAll('.thread.pointed')) x.classList.remove('pointed');
    const chip = gv.el.querySelector(`.thread[data-tid="${tid}"]`);
    if (chip) chip.classList.add('pointed');
    // Its top below the sticky bar (scroll-margin-top, style.css).
    gv.el.scrollIntoView({ block: 'start' });
    return true;
  }

  notDumped(bad) {
    const ul = el('ul', null);
    for (const t of bad) {
      ul.append(el('li', null, el('span', { class: 'thread' }, `${t.name} (${t.tid})`),
        ': ', el('span', { class: 'badge warn' }, t.status), ` ${t.error || ''}`));
    }
    return el('div', { class: 'notdumped' },
      el('h3', null, `${plural(bad.length, 'thread')} not dumped`), ul);
  }

  // Draws the flame graph once its pane shows; needs the section in the
  // document (its width).
  drawFlame() {
    if (!this.flameBox || this.flamePane.hidden) return;
    if (this.flame) {
      if (this.flame.box.clientWidth !== this.flame.width) this.flame.draw();
      return;
    }
    this.flame = new FlameGraph(this.p.groups, `${this.p.comm} (${this.p.pid})`);
    this.flame.mount(this.flameBox);
    this.flame.restoreZoom(state.zoom.get(this.p.pid));
    this.flame.draw();
    this.flame.highlight(this.words.join(' '));
  }

  matches(gv) {
    return this.words.every((w) => gv.hay.includes(w));
  }

  // Shows the groups matching every word of words; returns how many match
  // (built or not).
  filter(words) {
    this.words = words;
    let shown = 0;
    for (const gv of this.groups) {
      const hit = this.matches(gv);
      if (gv.el) gv.el.hidden = !hit;
      shown += hit;
    }
    this.none.hidden = shown > 0 || !this.groups.length;
    if (this.flame) this.flame.highlight(words.join(' '));
    if (this.profileFlame) this.profileFlame.highlight(words.join(' '));
    return shown;
  }

  expandAll(open) {
    this.openAll = open;
    for (const gv of this.groups) {
      if (gv.el) {
        if (open) this.renderBody(gv);
        gv.el.open = open;
      }
      remember(gv, open);
    }
  }

  // stuck: Map(tid -> stuck thread) of this process.
  markStuck(stuck) {
    let total = 0;
    for (const gv of this.groups) {
      const was = gv.stuck.length;
      gv.stuck = gv.g.tids.filter((t) => stuck.has(t)).map((t) => stuck.get(t));
      total += gv.stuck.length;
      if ((was || gv.stuck.length) && gv.el) this.showStuck(gv);
    }
    this.stuckFact.hidden = total === 0;
    this.stuckFact.replaceChildren(el('dt', null, 'stuck'), el('dd', null, String(total)));
  }

  // Marks a built group by its stuck threads (gv.stuck), or unmarks it.
  showStuck(gv) {
    gv.el.classList.toggle('stuck', gv.stuck.length > 0);
    const summary = gv.el.firstChild;
    let badge = summary.querySelector('.stuck-badge');
    if (!badge) {
      badge = el('span', { class: 'badge stuck-badge' });
      summary.insertBefore(badge, summary.querySelector('.copy'));
    }
    const reasons = [...new Set(gv.stuck.map((s) => s.reason).filter(Boolean))].join(', ');
    badge.hidden = !gv.stuck.length;
    badge.textContent = `${gv.stuck.length} stuck${reasons ? `: ${reasons}` : ''}`;
    const line = gv.el.querySelector('.threads');
    if (line) line.replaceWith(this.threadLine(gv, !line.querySelector('.more')));
  }
}

// How each way of reading a thread is said on the page.
const METHOD_WORDS = {
  kernel: 'the kernel (blocked: no signal, no stop)',
  signal: "the agent's signal",
  perf: 'a perf sample (running: no stop)',
  ptrace: 'a ptrace stop',
  core: 'the core file',
};

// Why a thread's stack is cut short ("truncated" in the JSON).
const CUT_WORDS = {
  frames: 'more frames than the dump keeps (max_frames=0 shows them all)',
  stack: 'its stack copy ended before the unwind did: the frames beyond it are not known',
};

// A group some of whose threads' stacks were cut short says so.
function cutBadge(g, byTid) {
  const kinds = new Set(g.tids.map((t) => (byTid.get(t) || {}).truncated).filter(Boolean));
  if (!kinds.size) return '';
  return el('span', { class: 'badge warn cut-badge',
    title: [...kinds].map((k) => CUT_WORDS[k] || k).join('; ') }, 'cut short');
}

// How the threads were read, and what it cost when any had to stop.
function methodNote(p) {
  if (p.method === 'core') return el('p', { class: 'note method' }, 'From a core file.');
  const parts = Object.entries(p.methods || {}).filter(([, n]) => n > 0)
    .map(([m, n]) => `${n} by ${METHOD_WORDS[m] || m}`);
  const note = el('p', { class: 'note method' },
    p.method === 'ptrace' ? 'No agent in this process. ' : '',
    parts.length ? `Threads read: ${parts.join(', ')}.` : '');
  if (p.method === 'ptrace' && p.paused_us_total > 0) {
    note.append(` Each thread stopped was paused for at most ${p.paused_us_max} µs `,
      `(${p.paused_us_total} µs together), one at a time.`);
  }
  return parts.length || p.method === 'ptrace' ? note : '';
}

// --- the process table (/stacks) -----------------------------------------

// The table's columns: heading, what the heading's title explains, the
// value it sorts by, and whether it sorts largest first at the first click.
const busyStates = (p) => Object.entries(p.thread_states || {})
  .reduce((n, [s, k]) => n + (s === 'R' || s === 'D' ? k : 0), 0);
const PROC_COLUMNS = [
  { key: 'pid', head: 'pid', num: true, sort: (p) => p.pid },
  { key: 'user', head: 'user', sort: (p) => p.user || String(p.uid) },
  { key: 'name', head: 'name', sort: (p) => (p.comm || '').toLowerCase() },
  { key: 'threads', head: 'threads', num: true, down: true, sort: (p) => p.threads },
  { key: 'cpu', head: 'CPU %', num: true, down: true, sort: (p) => p.cpu_pct ?? -1,
    title: 'percent of one core since the daemon last looked (at least 0.5 s before), else since the process started' },
  { key: 'states', head: 'states', down: true, sort: busyStates,
    title: 'threads by state: R running, S sleeping, D uninterruptible (disk, NFS), T stopped, Z zombie; sorts by R and D' },
  { key: 'stuck', head: 'stuck', num: true, down: true, sort: (p) => p.stuck ?? 0,
    title: 'threads the watchdog flags now' },
  { key: 'deadlock', head: 'deadlock', down: true, sort: (p) => (p.deadlock ? 1 : 0),
    title: 'a cycle of lock waits in the newest sample' },
  { key: 'method', head: 'method', sort: (p) => p.method || (p.agent ? 'agent' : 'ptrace'),
    title: 'agent: read by the agent loaded in the process; ptrace: without it, each thread paused for microseconds' },
  { key: 'command', head: 'command', sort: (p) => p.cmdline || '' },
];

function procCells(p) {
  const href = `/stacks${query({ pid: p.pid, ...view.pass })}`;
  const method = p.method || (p.agent ? 'agent' : 'ptrace');
  const states = p.thread_states ? stateCounts(p.thread_states) + (p.thread_states_partial ? ', …' : '') : '';
  return [
    el('td', { class: 'num' }, el('a', { href }, String(p.pid))),
    el('td', { title: p.user || String(p.uid) }, p.user || String(p.uid)),
    el('td', { title: p.comm || '' }, el('a', { href }, p.comm || '?')),
    el('td', { class: 'num' }, String(p.threads)),
    el('td', { class: 'num cpu' }, p.cpu_pct == null ? '' : p.cpu_pct.toFixed(1)),
    el('td', { class: 'states', title: states }, states),
    el('td', { class: p.stuck > 0 ? 'num bad' : 'num' }, p.stuck == null ? '' : String(p.stuck)),
    el('td', { class: p.deadlock ? 'bad' : '' }, p.deadlock ? 'deadlock' : ''),
    el('td', null, method === 'agent'
      ? el('span', { class: 'badge agent', title: 'loads the agent: dumped without stopping anything' }, 'agent')
      : el('span', { class: 'badge ptrace', title: 'no agent: dumped by a ptrace snapshot, each thread paused for microseconds' }, 'ptrace')),
    el('td', { class: 'cmd', title: p.cmdline || '' }, el('code', { class: 'muted' }, p.cmdline || '')),
  ];
}

// Every process the requester may see (/api/v1/processes), a row each:
// sorted by a click on a heading (again: the other way), filtered by the
// box (pid, name, user or command line). A long command line is cut to
// the width, whole on hover: the table never scrolls sideways.
function processTable(list) {
  const body = el('tbody');
  const filter = el('input', { type: 'search', class: 'proc-filter', placeholder: 'Find a process: pid, name, user, command line',
    autocomplete: 'off', spellcheck: 'false', 'aria-label': 'Find a process' });
  const count = el('span', { class: 'muted count' });
  const rows = list.map((p) => {
    const row = el('tr', { dataset: { pid: String(p.pid) } }, ...procCells(p));
    row.p = p;
    row.searchText = `${p.pid} ${p.comm} ${p.user} ${p.cmdline}`.toLowerCase();
    return row;
  });
  const heads = PROC_COLUMNS.map((c) => el('th', { class: c.num ? `c-${c.key} num` : `c-${c.key}`,
    title: c.title, dataset: { key: c.key } }, el('button', { type: 'button', class: 'sort' }, c.head)));
  const sortRows = () => {
    const { key, desc } = state.procSort;
    const col = PROC_COLUMNS.find((c) => c.key === key) || PROC_COLUMNS[0];
    const dir = desc ? -1 : 1;
    rows.sort((a, b) => {
      const x = col.sort(a.p);
      const y = col.sort(b.p);
      return (x < y ? -dir : x > y ? dir : 0) || a.p.pid - b.p.pid;
    });
    for (const th of heads) {
      const on = th.dataset.key === col.key;
      if (on) th.setAttribute('aria-sort', desc ? 'descending' : 'ascending');
      else th.removeAttribute('aria-sort');
    }
    body.replaceChildren(...rows);
  };
  const apply = () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const r of rows) {
      r.hidden = !words.every((w) => r.searchText.includes(w));
      shown += !r.hidden;
    }
    count.textContent = words.length ? ` ${shown} shown` : '';
  };
  const head = el('tr', null, ...heads);
  head.addEventListener('click', (e) => {
    const th = e.target.closest('th');
    if (!th) return;
    const col = PROC_COLUMNS.find((c) => c.key === th.dataset.key);
    const s = state.procSort;
    state.procSort = s.key === col.key ? { key: col.key, desc: !s.desc } : { key: col.key, desc: Boolean(col.down) };
    sortRows();
  });
  filter.value = state.procFilter;
  filter.addEventListener('input', () => {
    state.procFilter = filter.value;
    apply();
  });
  const cols = el('colgroup', null, ...PROC_COLUMNS.map((c) => el('col', { class: `c-${c.key}` })));
  const sec = el('section', { class: 'processes' },
    el('h2', null, plural(list.length, 'process', 'processes'), ' ',
      el('span', { class: 'muted' }, 'you may see on this host'), count),
    el('div', { class: 'proc-tools' }, filter, el('span', { class: 'links' },
      el('a', { href: `/stacks${query({ format: 'text', ...view.pass })}` }, 'every agent target as text'),
      el('a', { href: '/api/v1/processes' }, 'JSON'),
      el('a', { href: '/api/v1/targets' }, 'targets'))),
    el('table', { class: 'list procs' }, cols, el('thead', null, head), body));
  sortRows();
  apply();
  if (!list.length) sec.append(el('p', { class: 'note' }, 'No process you may see. Run one as your own user, or ask as root.'));
  return sec;
}

// When this daemon cannot read blocked threads from the kernel, say so
// and why, above everything: their reads then disturb them.
let readStatus;
async function showReadMethods() {
  if (readStatus === undefined) {
    try {
      readStatus = await getJSON('/api/v1/status');
    } catch {
      readStatus = null; // an older daemon: nothing to say
    }
  }
  const k = readStatus && readStatus.methods && readStatus.methods.kernel;
  if (!k || k.active || main.querySelector('.methods-off')) return;
  main.prepend(el('p', { class: 'note methods-off' },
    `Kernel reads are off here (${k.why || 'no reason given'}): blocked threads are read `,
    "by the agent's signal, which cuts some sleeping calls short, or by a ptrace stop."));
}

// --- the diff (/stacks?pid=N&view=diff&since=S) --------------------------

const DIFF_WINDOWS = [['10', '10 s'], ['60', '1 min'], ['300', '5 min'], ['900', '15 min']];

// One group of the diff: how its count went, its threads and its stack.
function diffGroup(g) {
  const d = g.after - g.before;
  const top = g.frames.length ? telling(g.frames) : null;
  const names = (g.threads || []).map((t) => `${t.name || '?'} (${t.tid})`);
  const shown = names.slice(0, 20).join(', ') + (names.length > 20 ? `, … +${names.length - 20} more` : '');
  return el('details', { class: 'group diff-group', open: true, dataset: { before: g.before, after: g.after } },
    el('summary', null,
      el('span', { class: d > 0 ? 'badge grew' : 'badge shrank' }, d > 0 ? `+${d}` : `−${-d}`),
      el('span', { class: 'count' }, `${g.before} → ${plural(g.after, 'thread')}`),
      top ? el('span', { class: 'top' }, el('span', { class: 'fn' }, frameLabel(top)),
        top.file ? ` ${baseName(top.file)}${top.line ? `:${top.line}` : ''}` : '') : ''),
    el('div', { class: 'threads' }, g.after ? 'now: ' : 'then: ', el('span', { class: 'names' }, shown)),
    framesTable(g.frames));
}

function diffPart(title, groups, cls) {
  if (!groups.length) return '';
  return el('div', { class: `diff-part ${cls}` }, el('h3', null, `${title} `,
    el('span', { class: 'muted' }, `(${groups.length})`)), ...groups.map(diffGroup));
}

// Without "groups" (a daemon that does not send them): the threads.
function diffThreads(doc) {
  const line = (t) => el('li', null, el('span', { class: 'thread' }, `${t.name || '?'} (${t.tid})`));
  const part = (title, list) => (list && list.length ? el('div', { class: 'diff-part' },
    el('h3', null, `${title} (${list.length})`), el('ul', null, ...list.map(line))) : '');
  return [part('Threads whose stack changed', doc.changed), part('Threads that appeared', doc.appeared),
    part('Threads that are gone', doc.gone)];
}

function diffLinks(pid) {
  const a = (href, text, title) => el('a', { href, title }, text);
  const wins = DIFF_WINDOWS.map(([v, text]) => (v === view.since ? el('strong', null, text)
    : a(`/stacks${query({ pid, view: 'diff', since: v })}`, text)));
  return el('p', { class: 'links' },
    a(`/stacks${query({ pid, ...view.pass })}`, 'the stacks now'),
    el('span', null, 'since: ', ...wins.flatMap((w, i) => (i ? [' · ', w] : [w]))),
    a(`/api/v1/diff${query({ pid, since: view.since })}`, 'JSON', 'the diff as the API answers it'));
}

function renderDiff(doc) {
  const t0 = performance.now();
  const groups = doc.groups || null;
  const sec = el('section', { class: 'proc diff', id: `pid-${doc.pid}`, dataset: { pid: doc.pid } },
    el('header', { class: 'proc-head' },
      el('h2', null, `What changed in pid ${doc.pid} `, el('span', { class: 'pid' }, `in the last ${fmtSpan(Number(view.since))}`)),
      el('p', { class: 'note' }, `The sample of ${fmtTime(doc.from)} against a dump taken now (${fmtTime(doc.to)}).`),
      el('dl', { class: 'facts' }, ...[['unchanged', doc.unchanged], ['changed', (doc.changed || []).length],
        ['appeared', (doc.appeared || []).length], ['gone', (doc.gone || []).length]]
        .map(([k, v]) => el('div', null, el('dt', null, `${k} (threads)`), el('dd', null, String(v)))))),
    diffLinks(doc.pid));
  if (groups) {
    sec.append(diffPart('Groups that appeared', groups.filter((g) => !g.before), 'appeared'),
      diffPart('Groups that vanished', groups.filter((g) => !g.after), 'vanished'),
      diffPart('Groups whose count changed', groups.filter((g) => g.before && g.after), 'changed'));
  } else {
    sec.append(...diffThreads(doc));
  }
  const moved = groups ? groups.length : (doc.changed || []).length + (doc.appeared || []).length + (doc.gone || []).length;
  if (!moved) sec.append(el('p', { class: 'note nochange' }, `Nothing changed: every thread has the stack it had then.`));
  main.replaceChildren(sec);
  return performance.now() - t0;
}

// No sample that old yet: what the daemon says, and a new try once one
// will be there (when that is soon enough to wait for).
function diffWait(err) {
  const retry = err.body && err.body.retry_after_s;
  const box = el('div', { class: 'note diff-wait', role: 'status' },
    el('p', null, `${err.message}.`),
    retry != null && retry <= 600 ? el('p', null, `This view asks again in ${fmtSpan(retry)}.`) : '',
    diffLinks(view.pid));
  if (retry != null && retry <= 600) {
    clearTimeout(state.timer);
    state.timer = setTimeout(load, retry * 1000 + 200);
  }
  return box;
}

// --- the page -------------------------------------------------------------

// What to do next, by the status of an error.
function hintFor(status) {
  switch (status) {
    case 0: return 'Is the daemon running? Check it (systemctl status stackwatchd), then reload this page.';
    case 400: return 'The address has a parameter the daemon cannot use: open the process from the process table instead.';
    case 401: return 'This daemon wants its token (Authorization: Bearer): use the CLI or curl with it.';
    case 403: return 'Open the page at the daemon\'s own address, not from another site (a name other than an IP address or localhost must be allowed with --allow-host).';
    case 404: return 'The process may have exited, or you may not see it: you see the processes you could trace yourself '
      + '(your own user, dumpable), and all of them as root, in the admin group or with the token. Pick one from the process table.';
    case 409: return 'Detach the debugger, or wait until it is done, then reload.';
    case 422: return 'A zombie or a kernel thread has no stacks of its own: pick another process from the process table.';
    case 429:
    case 503: return 'The daemon is busy with other requests: wait a little, then reload.';
    case 504: return 'The process did not answer in time: reload to try again, or add &timeout_ms=5000 to the address to wait longer.';
    default: return status >= 500 ? 'The daemon\'s log says why (journalctl -u stackwatchd); reload to try again.'
      : 'Go back to the process table and try again.';
  }
}

function errorBox(err, what) {
  const api = err instanceof ApiError;
  const status = api ? err.status : 0;
  return el('div', { class: 'error', role: 'alert', dataset: { status } },
    el('strong', null, api ? `Could not get ${what}` : `The page failed to show ${what}`),
    el('p', { class: 'why' }, `${status ? `${status}: ` : ''}${err.message}`),
    api ? el('p', { class: 'hint' }, hintFor(status)) : '',
    el('p', { class: 'back' }, el('a', { href: '/stacks' }, 'Back to the process table')));
}

// An error the daemon answered the page itself with, in the page's
// layout (web.c): the same hint as for the API's errors.
function servedError(box) {
  const status = Number(box.dataset.status) || 0;
  box.querySelector('.back').before(el('p', { class: 'hint' }, hintFor(status)));
  $('crumbs').replaceChildren(el('a', { href: '/stacks' }, 'all processes'), ' / error');
  document.title = `stackwatch: error ${status}`;
  for (const id of ['search', 'expand', 'collapse', 'reload']) $(id).hidden = true;
  $('autorefresh').parentElement.hidden = true;
  document.body.dataset.error = status;
}

function crumbs(procs) {
  const nav = $('crumbs');
  if (view.diff) {
    nav.replaceChildren(el('a', { href: '/stacks' }, 'all processes'), ' / ',
      el('a', { href: `/stacks${query({ pid: view.pid, ...view.pass })}` }, `pid ${view.pid}`), ' / diff');
    document.title = `stackwatch: diff of pid ${view.pid}`;
    return;
  }
  if (!view.pid) {
    nav.replaceChildren('all processes');
    document.title = 'stackwatch';
    return;
  }
  const p = procs && procs[0];
  const name = p && p.comm ? `${p.comm} (${view.pid})` : `pid ${view.pid}`;
  nav.replaceChildren(el('a', { href: `/stacks${query(view.pass)}` }, 'all processes'), ' / ', name);
  document.title = `stackwatch: ${name}`;
}

function applySearch() {
  const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  let total = 0;
  for (const v of state.views) {
    shown += v.filter(words);
    total += v.groups.length;
  }
  document.body.dataset.shown = shown;
  search.classList.toggle('nomatch', words.length > 0 && shown === 0);
  search.title = words.length ? `${shown} of ${total} groups match` : '';
}

function applyStuck() {
  for (const v of state.views) v.markStuck(state.stuck.get(v.p.pid) || new Map());
}

// Builds the whole page from one answer of /api/v1/stacks. Synchronous;
// the time it takes (DOM, style and layout) is in body[data-render-ms].
function render(doc) {
  const t0 = performance.now();
  for (const v of state.views) if (v.flame) state.zoom.set(v.p.pid, v.flame.zoomPath());
  const procs = doc.processes || [doc];
  const frag = document.createDocumentFragment();
  state.views = [];
  for (const p of procs) {
    if (p.error) continue;
    const v = new ProcessView(p);
    state.views.push(v);
    frag.append(v.el);
  }
  main.replaceChildren(frag);
  crumbs(procs);
  for (const v of state.views) v.showPane(state.pane, false);
  applySearch();
  applyStuck();
  void main.offsetHeight; // style and layout count too
  const took = performance.now() - t0;
  document.body.dataset.renderMs = took.toFixed(1);
  // And until the next frame has been painted: the page is on the screen.
  delete document.body.dataset.paintMs;
  requestAnimationFrame(() => setTimeout(() => {
    document.body.dataset.paintMs = (performance.now() - t0).toFixed(1);
  }, 0));
  delete document.body.dataset.completeMs;
  const gen = ++state.gen;
  requestAnimationFrame(() => setTimeout(() => buildRest(gen, t0), 0));
  return took;
}

// Builds the groups left after the first paint, a chunk per task so that
// the page stays responsive; body[data-complete-ms] says when all are in.
function buildRest(gen, t0) {
  if (gen !== state.gen) return; // a newer render took over
  let left = false;
  for (const v of state.views) left = v.buildGroups(CHUNK_GROUPS) || left;
  if (left) {
    setTimeout(() => buildRest(gen, t0), 0);
  } else {
    document.body.dataset.completeMs = (performance.now() - t0).toFixed(1);
  }
}

async function fetchStuck() {
  try {
    const doc = await getJSON('/api/v1/stuck');
    const m = new Map();
    for (const t of doc.threads || []) {
      if (!m.has(t.pid)) m.set(t.pid, new Map());
      m.get(t.pid).set(t.tid, t);
    }
    return m;
  } catch {
    return null; // no watchdog (yet), or it failed: nothing to mark
  }
}

// Says when a view without groups to build is on the screen (the
// group view's render() says it itself).
function rendered(t0) {
  const took = performance.now() - t0;
  document.body.dataset.renderMs = took.toFixed(1);
  delete document.body.dataset.paintMs;
  requestAnimationFrame(() => setTimeout(() => {
    document.body.dataset.paintMs = (performance.now() - t0).toFixed(1);
    document.body.dataset.completeMs = document.body.dataset.paintMs;
  }, 0));
  return took;
}

function renderTable(doc) {
  const t0 = performance.now();
  state.views = [];
  main.replaceChildren(processTable(doc.processes || []));
  crumbs(null);
  return rendered(t0);
}

// Fetches the view's data and renders it; returns the render's time.
async function fetchView() {
  if (view.diff) {
    const doc = await getJSON(`/api/v1/diff${query({ pid: view.pid, since: view.since })}`);
    const t0 = performance.now();
    renderDiff(doc);
    crumbs(null);
    return rendered(t0);
  }
  if (!view.pid) return renderTable(await getJSON('/api/v1/processes'));
  return render(await getJSON(`/api/v1/stacks${query({ pid: view.pid, ...view.pass })}`));
}

async function load() {
  if (state.loading) return;
  state.loading = true;
  clearTimeout(state.timer);
  document.body.classList.add('loading');
  const t0 = performance.now();
  const stuck = view.pid && !view.diff ? fetchStuck() : null;
  let waiting = false;
  try {
    const took = await fetchView();
    const fetched = performance.now() - t0 - took;
    setStatus(`Fetched in ${fetched.toFixed(0)} ms, rendered in ${took.toFixed(0)} ms, ` +
      `at ${new Date().toLocaleTimeString()}.`);
    delete document.body.dataset.error;
  } catch (err) {
    if (!(err instanceof ApiError)) console.error(err); // a bug of ours
    state.views = [];
    crumbs(null);
    setStatus('');
    if (view.diff && err.status === 404 && err.body && /^no sample/.test(err.message)) {
      main.replaceChildren(diffWait(err));
      waiting = true;
      rendered(performance.now());
    } else {
      const what = view.diff ? 'the diff' : view.pid ? 'the stacks' : 'the process list';
      main.replaceChildren(errorBox(err, what));
      document.body.dataset.error = err.status || 0;
    }
  } finally {
    state.loading = false;
    document.body.classList.remove('loading');
    document.body.dataset.loads = (+document.body.dataset.loads || 0) + 1;
    if (!waiting) schedule();
  }
  await showReadMethods();
  const m = await stuck;
  if (m) {
    state.stuck = m;
    applyStuck();
  }
}

function schedule() {
  clearTimeout(state.timer);
  if ($('autorefresh').checked) {
    state.timer = setTimeout(() => (document.hidden ? schedule() : load()), REFRESH_MS);
  }
}

function viewOf(node) {
  const sec = node.closest('section.proc');
  return sec && state.views.find((v) => String(v.p.pid) === sec.dataset.pid);
}

// One listener for every button of every group.
main.addEventListener('click', (e) => {
  const a = e.target.closest('a.thread-link');
  if (!a) return;
  const v = state.views.find((x) => String(x.p.pid) === a.dataset.pid);
  if (v && v.showThread(Number(a.dataset.tid))) e.preventDefault();
});

main.addEventListener('click', async (e) => {
  const b = e.target.closest('button');
  if (!b) return;
  const v = viewOf(b);
  if (!v) return;
  if (b.classList.contains('copy')) {
    e.preventDefault(); // a button in <summary> would toggle the group
    const gv = v.groups[+b.dataset.group];
    flash(b, await copyText(`${groupText(v.p, gv.g, v.byTid)}\n`));
  } else if (b.classList.contains('copy-all')) {
    flash(b, await copyText(processText(v.p, v.byTid)));
  } else if (b.classList.contains('more')) {
    const gv = v.groups[+b.dataset.group];
    b.closest('.threads').replaceWith(v.threadLine(gv, true));
  }
});

// Frames of a closed group are built when it opens; remember the choice
// across refreshes.
main.addEventListener('toggle', (e) => {
  const d = e.target;
  if (!d.classList || !d.classList.contains('group')) return;
  const v = viewOf(d);
  const gv = v && v.groups[+d.dataset.group];
  if (!gv) return;
  if (d.open) v.renderBody(gv);
  remember(gv, d.open);
}, true);

search.addEventListener('input', applySearch);
search.addEventListener('keydown', (e) => {
  if (e.key === 'Escape') {
    search.value = '';
    applySearch();
  }
});
document.addEventListener('keydown', (e) => {
  if (e.key === '/' && document.activeElement !== search && !e.ctrlKey && !e.metaKey) {
    e.preventDefault();
    search.focus();
  }
});
$('expand').addEventListener('click', () => state.views.forEach((v) => v.expandAll(true)));
$('collapse').addEventListener('click', () => state.views.forEach((v) => v.expandAll(false)));
$('reload').addEventListener('click', load);
$('autorefresh').addEventListener('change', schedule);

let resizing = 0;
window.addEventListener('resize', () => {
  cancelAnimationFrame(resizing);
  resizing = requestAnimationFrame(() => {
    for (const v of state.views) {
      if (v.flame && v.flame.box.clientWidth !== v.flame.width) v.flame.draw();
      const pf = v.profileFlame;
      if (pf && pf.box.clientWidth !== pf.width) pf.draw();
    }
  });
});

// Tells the bar's height to the style: what is scrolled to stops below it.
function barHeight() {
  document.documentElement.style.setProperty('--bar-h', `${document.querySelector('.bar').offsetHeight}px`);
}
barHeight();
window.addEventListener('resize', barHeight);

// The filter and expand/collapse are for a process's groups.
for (const id of ['search', 'expand', 'collapse']) $(id).hidden = !view.pid || view.diff;
const served = main.querySelector('.error[data-status]');
if (served) servedError(served);
else load();
