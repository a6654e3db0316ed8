// app.js - the /stacks page of stackwatchd, rendered in the browser.
//
// The daemon serves the same index.html for /stacks and /stacks?pid=N; this
// script reads the view from the location, fetches the same view as JSON
// from /api/v1/stacks (schema: INTERFACE.md) and builds the page: the list
// of targets, then per process its header, the groups of identical stacks
// (largest first) and a flame graph (flame.js). Threads the watchdog flags
// (/api/v1/stuck) are marked when that endpoint answers; any error there is
// ignored. Everything comes from the daemon itself: no CDN, works offline.
//
// Kept fast for processes with a thousand threads: a group's threads and
// frames are built only once it is opened, the search text only once
// someone searches, and off-screen groups are not laid out (style.css).

import { FlameGraph, frameLabel } from './flame.js';

const REFRESH_MS = 5000;
const THREADS_SHOWN = 6; // thread chips per group before "+N more"
const OPEN_GROUPS = 12; // groups of a process open at first (the largest); the rest closed
const FIRST_GROUPS = 100; // groups built before the first paint; the rest after it
const CHUNK_GROUPS = 200; // groups built per task after that
const SYSTEM_MODULE = /^\/(usr\/)?lib(32|64|x32)?\//;

const $ = (id) => document.getElementById(id);
const main = $('main');
const search = $('search');

// The view: which process, and the stack parameters to pass on.
const view = (() => {
  const p = new URLSearchParams(location.search);
  const pid = /^[1-9][0-9]{0,8}$/.test(p.get('pid') || '') ? p.get('pid') : null;
  const pass = {};
  for (const k of ['symbols', 'timeout_ms']) if (p.has(k)) pass[k] = p.get(k);
  return { pid, pass };
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
  procFilter: '', // the process list's filter, kept across refreshes
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

function fmtTime(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleTimeString();
}

function setStatus(text) {
  $('status').textContent = text;
}

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
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
    throw new ApiError(res.status, why);
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
  const lines = [`${plural(g.count, 'thread')}: ${names.join(', ')}`];
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
    this.list = el('div', { class: 'groups' });
    this.buildGroups(FIRST_GROUPS);
    this.none = el('p', { class: 'note nomatch', hidden: true }, 'No group matches the filter.');
    sec.append(el('h3', null, 'Groups ', el('span', { class: 'muted' },
      `(${p.groups.length}, largest first)`)), this.list, this.none);
    const bad = p.threads.filter((t) => t.status !== 'ok').sort((a, b) => a.tid - b.tid);
    if (bad.length) sec.append(this.notDumped(bad));
    if (p.groups.length) {
      this.flameBox = el('div', { class: 'flame' });
      sec.append(el('h3', { id: `flame-${p.pid}` }, 'Flame graph ',
        el('span', { class: 'muted' }, '(all threads; outermost frame on top)')), this.flameBox);
    }
    sec.append(this.profileSection());
    return sec;
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
      option('30', 'last 30 s'), option('60', 'last minute'), option('300', 'last 5 minutes'),
      option('900', 'last 15 minutes'), option('86400', 'the whole history'));
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
    return det;
  }

  async loadProfile() {
    const pid = this.p.pid;
    const st = this.profileState;
    let w = Number(st.window);
    const url = (since, until) => `/api/v1/profile${query({ pid, mode: st.mode, since, until })}`;
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
      a(`/api/v1/diff${query({ pid, since: 60 })}`, 'diff (60 s)',
        'what changed since the sample of a minute ago'),
      this.p.groups.length ? a(`#flame-${pid}`, 'flame graph') : '',
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
      this.lockBadge(g),
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
    const body = el('tbody');
    gv.g.frames.forEach((f, i) => {
      const where = f.file ? `${baseName(f.file)}${f.line ? `:${f.line}` : ''}` : '';
      const mod = f.module ? baseName(f.module) : '';
      body.append(el('tr', { class: f.inlined ? 'frame inlined' : 'frame' },
        el('td', { class: 'n' }, `#${i}`),
        el('td', { class: f.function ? 'fn' : 'fn nosym' }, frameLabel(f),
          f.inlined ? el('span', { class: 'badge inl', title: 'inlined into the next frame' }, 'inlined') : ''),
        el('td', { class: 'loc', title: f.file ? `${f.file}${f.line ? `:${f.line}` : ''}` : undefined }, where),
        el('td', { class: 'mod', title: f.module ? `${f.module} +${f.offset} (ip ${f.ip})` : f.ip }, mod)));
    });
    if (!gv.g.frames.length) body.append(el('tr', null, el('td', { colspan: 4 }, '(no frames)')));
    gv.el.append(el('table', { class: 'frames' }, body));
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

  // The lines under a group: one per lock its threads wait for.
  waitLines(gv) {
    const seen = new Set();
    const box = el('div', { class: 'waits' });
    for (const tid of gv.g.tids) {
      const w = (this.byTid.get(tid) || {}).waiting_for;
      if (!w) continue;
      const key = `${w.address}/${w.owner_tid}`;
      if (seen.has(key)) continue;
      seen.add(key);
      box.append(el('p', { class: w.deadlock ? 'wait deadlocked' : 'wait' },
        'waiting for ', ...this.lockChain(tid)));
    }
    return seen.size ? box : null;
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

  // Draws the flame graph; needs the section in the document (its width).
  drawFlame() {
    if (!this.flameBox) return;
    this.flame = new FlameGraph(this.p.groups, `${this.p.comm} (${this.p.pid})`);
    this.flame.mount(this.flameBox);
    this.flame.restoreZoom(state.zoom.get(this.p.pid));
    this.flame.draw();
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

// Every process the requester may see (/api/v1/processes), agent or not,
// with a filter of its own: pid, name, user or command line.
function processList(list) {
  const body = el('tbody');
  const filter = el('input', { type: 'search', class: 'proc-filter', placeholder: 'Find a process: pid, name, user, command line',
    autocomplete: 'off', spellcheck: 'false', 'aria-label': 'Find a process' });
  const count = el('span', { class: 'muted' });
  const rows = list.map((p) => {
    const row = el('tr', { dataset: { pid: String(p.pid) } },
      el('td', null, el('a', { href: `/stacks${query({ pid: p.pid, ...view.pass })}` }, String(p.pid))),
      el('td', null, p.comm || '?', ' ', p.agent ? el('span', { class: 'badge agent', title: 'loads the agent: dumped without stopping anything' }, 'agent')
        : el('span', { class: 'badge ptrace', title: 'no agent: dumped by a ptrace snapshot, each thread paused for microseconds' }, 'ptrace')),
      el('td', null, p.user || String(p.uid)),
      el('td', { class: 'num' }, String(p.threads)),
      el('td', null, el('code', { class: 'muted' }, p.cmdline || '')));
    row.searchText = `${p.pid} ${p.comm} ${p.user} ${p.cmdline}`.toLowerCase();
    body.append(row);
    return row;
  });
  const apply = () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const r of rows) {
      r.hidden = !words.every((w) => r.searchText.includes(w));
      shown += !r.hidden;
    }
    count.textContent = words.length ? ` ${shown} shown` : '';
  };
  filter.value = state.procFilter;
  filter.addEventListener('input', () => {
    state.procFilter = filter.value;
    apply();
  });
  const sec = el('section', { class: 'processes' },
    el('h2', null, plural(list.length, 'process', 'processes'), ' ',
      el('span', { class: 'muted' }, 'you may see on this host'), count),
    filter,
    el('table', { class: 'list' },
      el('thead', null, el('tr', null, ...['pid', 'name', 'user', 'threads', 'command']
        .map((h) => el('th', null, h)))), body));
  apply();
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

async function showProcesses() {
  if (view.pid) return;
  let doc;
  try {
    doc = await getJSON('/api/v1/processes');
  } catch {
    return; // an older daemon, or it failed: the targets are shown anyway
  }
  const old = main.querySelector('section.processes');
  const sec = processList(doc.processes || []);
  const targets = main.querySelector('section.targets');
  if (old) old.replaceWith(sec);
  else if (targets) targets.after(sec);
  else main.prepend(sec);
}

// --- the page -------------------------------------------------------------

function targetTable(procs) {
  const body = el('tbody');
  for (const p of procs) {
    const link = el('a', { href: `/stacks${query({ pid: p.pid, ...view.pass })}` }, String(p.pid));
    if (p.error) {
      body.append(el('tr', { class: 'failed' }, el('td', null, link),
        el('td', { colspan: 4 }, el('span', { class: 'badge warn' }, String(p.status || 'error')),
          ` ${p.error}`)));
      continue;
    }
    const big = p.groups[0];
    const top = big && big.frames.length ? telling(big.frames) : null;
    body.append(el('tr', null, el('td', null, link),
      el('td', null, el('a', { href: `#pid-${p.pid}` }, p.comm), ' ',
        el('code', { class: 'muted' }, p.cmdline || '')),
      el('td', { class: 'num' }, String(p.threads_total)),
      el('td', { class: 'num' }, String(p.groups.length)),
      el('td', null, big ? `${big.count} × ${top ? frameLabel(top) : '(no frames)'}` : '')));
  }
  return el('section', { class: 'targets' },
    el('h2', null, plural(procs.length, 'process', 'processes'), ' ',
      el('span', { class: 'muted' }, 'registered with this daemon')),
    el('table', { class: 'list' },
      el('thead', null, el('tr', null, ...['pid', 'command', 'threads', 'groups', 'largest group']
        .map((h) => el('th', null, h)))), body),
    el('p', { class: 'links' },
      el('a', { href: `/api/v1/stacks${query({ format: 'json', ...view.pass })}` }, 'JSON'),
      el('a', { href: `/stacks${query({ format: 'text', ...view.pass })}` }, 'text'),
      el('a', { href: `/stacks${query({ format: 'folded', ...view.pass })}` }, 'folded'),
      el('a', { href: '/api/v1/targets' }, 'targets')));
}

function errorBox(err) {
  const api = err instanceof ApiError;
  const status = api && err.status ? `${err.status}: ` : '';
  return el('div', { class: 'error', role: 'alert' },
    el('strong', null, api ? 'Could not get the stacks' : 'The page failed to show the stacks'),
    el('p', null, `${status}${err.message}`),
    view.pid ? el('p', null, el('a', { href: '/stacks' }, 'All processes')) : '');
}

function crumbs(procs) {
  const nav = $('crumbs');
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
  if (!view.pid) frag.append(targetTable(procs));
  state.views = [];
  for (const p of procs) {
    if (p.error) continue;
    const v = new ProcessView(p);
    state.views.push(v);
    frag.append(v.el);
  }
  if (!procs.length) {
    frag.append(el('p', { class: 'note' }, 'No process is registered. Start one with ',
      el('code', null, 'stackwatch run -- COMMAND'), ' or with ',
      el('code', null, 'LD_PRELOAD=libstackwatch-agent.so'), '.'));
  }
  main.replaceChildren(frag);
  crumbs(procs);
  for (const v of state.views) v.drawFlame();
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

async function load() {
  if (state.loading) return;
  state.loading = true;
  clearTimeout(state.timer);
  document.body.classList.add('loading');
  const t0 = performance.now();
  const stuck = fetchStuck();
  try {
    const doc = await getJSON(`/api/v1/stacks${query({ pid: view.pid, ...view.pass })}`);
    const fetched = performance.now() - t0;
    const took = render(doc);
    setStatus(`Fetched in ${fetched.toFixed(0)} ms, rendered in ${took.toFixed(0)} ms, ` +
      `at ${new Date().toLocaleTimeString()}.`);
    delete document.body.dataset.error;
  } catch (err) {
    if (!(err instanceof ApiError)) console.error(err); // a bug of ours
    main.replaceChildren(errorBox(err));
    state.views = [];
    crumbs(null);
    document.body.dataset.error = err.status || 0;
    setStatus('');
  } finally {
    state.loading = false;
    document.body.classList.remove('loading');
    document.body.dataset.loads = (+document.body.dataset.loads || 0) + 1;
    schedule();
  }
  await showProcesses();
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

load();
