// pprof.test.mjs - the daemon's pprof endpoints, decoded by two readers
// that are not ours: the real `go tool pprof` (Debian's golang-go, -raw
// and -top) and the npm package pprof-format.
//
//   BUILD=build node --test-reporter=tap tests/web/pprof.test.mjs
//
// Starts build/stackwatchd on 127.0.0.1:0 and two workload fixtures under
// the agent, takes the JSON and the profile of the same dump (the daemon
// serves one dump to every request within 1/max-dump-rate s) and checks
// that they say the same: the threads of each group of identical stacks,
// their functions, files and lines, the labels; that the profile is valid
// by the rules `go tool pprof` and Pyroscope enforce; the gzip encoding and
// the content type; errors; and that a user sees only their own processes.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';
import { Harness } from './harness.mjs';

const h = new Harness('sw-pprof-');
const hp = new Harness('sw-profile-'); // a daemon at the default dump rate
let base;
let pbase; // hp's daemon
let psmall; // a workload registered with it
let small; // pid of the 64-waiter workload
let big; // pid of a 200-waiter workload
let nfile = 0;

before(async () => {
  // These checks compare names: on a busy machine the first dump's read of
  // libc's debug information may outlast the default 500 ms budget.
  base = await h.daemon(['--sample-interval', '0', '--max-dump-rate', '1', '--symbolize-budget', '10000']);
  small = await h.workload([]);
  big = await h.workload(['--waiters', '200']);
  await h.registered([small, big]);
  chmodSync(h.tmp, 0o711); // the unix socket, for the other user below
  pbase = await hp.daemon(['--sample-interval', '0']);
  psmall = await hp.workload([]);
  await hp.registered([psmall]);
  chmodSync(hp.tmp, 0o711);
});

after(async () => {
  await h.stop();
  await hp.stop();
});

async function get(p) {
  const res = await fetch(base + p);
  const body = Buffer.from(await res.arrayBuffer());
  return { res, body };
}

// The profile of body (gzipped protobuf), checked against the rules of
// the format that readers enforce; throws on the first broken one.
function decode(body) {
  assert.equal(body[0], 0x1f, 'gzip magic');
  assert.equal(body[1], 0x8b, 'gzip magic');
  const prof = Profile.decode(gunzipSync(body));
  const strs = prof.stringTable.strings;
  const str = (i) => {
    assert.ok(Number(i) >= 0 && Number(i) < strs.length, `string index ${i} defined`);
    return strs[Number(i)];
  };
  assert.equal(strs[0], '', 'the string table starts with ""');
  const ids = (items, what) => {
    const m = new Map();
    for (const it of items) {
      const id = Number(it.id);
      assert.ok(id > 0, `${what} id ${id} is not 0`);
      assert.ok(!m.has(id), `${what} id ${id} is unique`);
      m.set(id, it);
    }
    return m;
  };
  const maps = ids(prof.mapping, 'mapping');
  const funcs = ids(prof.function, 'function');
  const locs = ids(prof.location, 'location');
  for (const m of prof.mapping) {
    assert.ok(str(m.filename).length > 0, 'a mapping names its module');
    assert.ok(BigInt(m.memoryLimit) > BigInt(m.memoryStart), 'a mapping has a range');
    if (str(m.filename).startsWith('/')) assert.match(str(m.buildId), /^([0-9a-f]{2})*$/, 'a hex build-id');
  }
  for (const f of prof.function) {
    assert.ok(str(f.name).length > 0, 'a function has a name');
    str(f.systemName);
    str(f.filename);
  }
  for (const l of prof.location) {
    assert.ok(maps.has(Number(l.mappingId)), `location ${l.id}: its mapping ${l.mappingId} is defined`);
    for (const ln of l.line) assert.ok(funcs.has(Number(ln.functionId)), `function ${ln.functionId} is defined`);
  }
  for (const s of prof.sample) {
    assert.equal(s.value.length, prof.sampleType.length, 'a value per sample type');
    assert.ok(s.locationId.length > 0, 'a sample has a stack');
    for (const id of s.locationId) assert.ok(locs.has(Number(id)), `location ${id} is defined`);
    for (const lb of s.label) str(lb.key), str(lb.str);
  }
  // The same, with names instead of indexes, for the checks below.
  prof.view = {
    types: prof.sampleType.map((t) => [str(t.type), str(t.unit)]),
    period: [str(prof.periodType.type), str(prof.periodType.unit), Number(prof.period)],
    samples: prof.sample.map((s) => ({
      value: Number(s.value[0]),
      labels: s.label.map((lb) => [str(lb.key), str(lb.str)]),
      stack: s.locationId.map((id) => {
        const l = locs.get(Number(id));
        return `0x${BigInt(l.address).toString(16)}:${l.line.map((ln) => {
          const f = funcs.get(Number(ln.functionId));
          return `${str(f.name)}@${str(f.filename)}:${Number(ln.line)}`;
        }).join('|')}`;
      }),
      mappings: s.locationId.map((id) => str(maps.get(Number(locs.get(Number(id)).mappingId)).filename)),
    })),
    timeMs: Math.floor(Number(BigInt(prof.timeNanos) / 1000000n)),
  };
  return prof;
}

// A group's stack as the profile writes it: a location per frame that is
// not inlined, holding the frames inlined into it (innermost first).
function jsonStack(frames) {
  const out = [];
  let lines = [];
  frames.forEach((f, i) => {
    if (f.function) lines.push(`${f.function}@${f.file ?? ''}:${f.line ?? 0}`);
    if (f.inlined && i + 1 < frames.length) return;
    out.push(`${f.ip}:${lines.join('|')}`);
    lines = [];
  });
  return out;
}

// The JSON and the profile of one dump of pid: asked within the same
// cache interval, until the profile's time is the JSON's collected_at.
async function sameDump(pid, endpoint = '/debug/pprof/goroutine') {
  for (let i = 0; i < 10; i++) {
    const json = await (await fetch(`${base}/api/v1/stacks?pid=${pid}`)).json();
    const { res, body } = await get(`${endpoint}?pid=${pid}`);
    assert.equal(res.status, 200, `${endpoint}?pid=${pid}: ${res.status} ${body}`);
    const prof = decode(body);
    if (prof.view.timeMs === Date.parse(json.collected_at)) return { json, res, body, prof };
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('no two answers of the same dump in 10 tries');
}

function saveProfile(body) {
  const f = path.join(h.tmp, `p${nfile++}.pb.gz`);
  writeFileSync(f, body);
  return f;
}

function goPprof(args) {
  const r = spawnSync('go', ['tool', 'pprof', ...args], {
    encoding: 'utf8',
    env: { ...process.env, HOME: h.tmp, PPROF_TMPDIR: h.tmp, GOCACHE: path.join(h.tmp, 'gocache') },
  });
  assert.equal(r.status, 0, `go tool pprof ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

test('goroutine profile of one process: the JSON of the same dump, group for group', async () => {
  const { json, res, prof } = await sameDump(small);
  assert.equal(res.headers.get('content-type'), 'application/octet-stream');
  assert.match(res.headers.get('content-disposition'), /attachment; filename="goroutine\.pb\.gz"/);
  assert.deepEqual(prof.view.types, [['goroutine', 'count']]);
  assert.deepEqual(prof.view.period, ['goroutine', 'count', 1]);

  const byTid = new Map(json.threads.map((t) => [t.tid, t]));
  const want = new Map(); // stack -> thread count
  for (const g of json.groups) {
    const k = jsonStack(g.frames).join(' ');
    want.set(k, (want.get(k) ?? 0) + g.count);
  }
  const got = new Map();
  for (const s of prof.view.samples) {
    const k = s.stack.join(' ');
    got.set(k, (got.get(k) ?? 0) + s.value);
    const labels = Object.fromEntries(s.labels);
    assert.deepEqual(s.labels.map(([k2]) => k2).sort(), ['comm', 'pid', 'state', 'thread'], 'each label once');
    assert.equal(labels.pid, String(small));
    assert.equal(labels.comm, json.comm);
    // Some thread of the group has that name and state.
    const g = json.groups.find((gr) => jsonStack(gr.frames).join(' ') === k);
    assert.ok(g, `the sample's stack is a group's: ${k}`);
    assert.ok(g.tids.some((tid) => byTid.get(tid).name === labels.thread && byTid.get(tid).state === labels.state),
      `a thread of the group is ${labels.thread} in ${labels.state}`);
  }
  assert.deepEqual(got, want, 'thread counts per stack equal the JSON groups');
  const total = prof.view.samples.reduce((a, s) => a + s.value, 0);
  assert.equal(total, json.threads.filter((t) => t.group !== null).length);
  // The waiters: one sample of 64 at the marked line, modules named.
  const waiters = prof.view.samples.filter((s) => s.stack.some((l) => l.includes('waiter_wait()@')));
  assert.equal(waiters.reduce((a, s) => a + s.value, 0), 64);
  assert.ok(waiters[0].stack.some((l) => /waiter_wait\(\)@.*workload\.cc:\d+/.test(l)), waiters[0].stack.join('\n'));
  assert.ok(waiters[0].mappings.some((m) => m.endsWith('/libc.so.6')), 'libc is a mapping by its path');
  assert.ok(waiters[0].mappings.some((m) => m.endsWith('/fixtures/workload')), 'the program is a mapping');
});

test('go tool pprof reads it: -raw has every sample and label, -top the same totals', async () => {
  const { json, body, prof } = await sameDump(small);
  const f = saveProfile(body);
  const raw = goPprof(['-raw', f]);
  assert.match(raw, /PeriodType: goroutine count/);
  const counts = [...raw.matchAll(/^\s+(\d+): [\d ]+$/gm)].map((m) => Number(m[1]));
  assert.equal(counts.length, prof.view.samples.length, raw);
  const total = json.threads.filter((t) => t.group !== null).length;
  assert.equal(counts.reduce((a, b) => a + b, 0), total);
  assert.match(raw, new RegExp(`comm:\\[workload\\] pid:\\[${small}\\] state:\\[S\\] thread:\\[waiter\\]`));
  assert.match(raw, /waiter_wait\(\) \S*workload\.cc:\d+/);
  const top = goPprof(['-top', '-cum', f]);
  assert.match(top, /^File: workload$/m, 'the program is the profile\'s file, not a library');
  assert.match(top, new RegExp(`of ${total} total`), top);
  assert.match(top, /^\s+0\s+0%\s+\S+\s+64\s+\S+%\s+waiter_wait(\(\))?$/m, top);
});

test('the /debug/pprof/threads alias, and every visible process without ?pid', async () => {
  const { prof } = await sameDump(big, '/debug/pprof/threads');
  assert.deepEqual(prof.view.types, [['threads', 'count']]);
  assert.ok(prof.view.samples.some((s) => s.value === 200), 'the 200 waiters are one sample');

  let last;
  for (let i = 0; i < 10; i++) {
    const json = await (await fetch(`${base}/api/v1/stacks`)).json();
    const { res, body } = await get('/debug/pprof/goroutine');
    assert.equal(res.status, 200);
    const all = decode(body);
    const sums = {};
    for (const s of all.view.samples) {
      const pid = Object.fromEntries(s.labels).pid;
      sums[pid] = (sums[pid] ?? 0) + s.value;
    }
    const want = {};
    for (const p of json.processes) {
      if (p.threads) want[p.pid] = p.threads.filter((t) => t.group !== null).length;
    }
    last = [sums, want];
    if (JSON.stringify(Object.entries(sums).sort()) === JSON.stringify(Object.entries(want).sort())) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(last[0], last[1], 'each process as many threads as in the JSON');
  assert.ok(last[0][small] > 64 && last[0][big] > 200, JSON.stringify(last[0]));
  assert.equal(goPprof(['-raw', saveProfile((await get('/debug/pprof/goroutine')).body)]).includes(`pid:[${big}]`), true);
});

test('/debug/pprof/ is an index of the profiles, as Go serves one', async () => {
  const r = await get('/debug/pprof/');
  assert.equal(r.res.status, 200);
  assert.match(r.res.headers.get('content-type'), /^text\/html/);
  const html = r.body.toString();
  const links = [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1]);
  for (const want of ['goroutine', 'threads', 'profile?seconds=30', '../fgprof?seconds=30']) {
    assert.ok(links.includes(want), `links ${want}: ${links}`);
  }
  // Each link, followed from the index, answers a profile.
  for (const l of ['goroutine', 'threads']) {
    const p = await get(new URL(l, `${base}/debug/pprof/`).pathname);
    assert.equal(p.res.status, 200, l);
    decode(p.body);
  }
  const bare = await fetch(`${base}/debug/pprof`, { redirect: 'manual' });
  assert.equal(bare.status, 302);
  assert.equal(bare.headers.get('location'), '/debug/pprof/');
});

test('errors are plain text with their status; debug=1 is the text format', async () => {
  let r = await get('/debug/pprof/goroutine?pid=4194304');
  assert.equal(r.res.status, 404);
  assert.match(r.res.headers.get('content-type'), /^text\/plain/);
  assert.match(r.body.toString(), process.getuid() === 0
    ? /no process 4194304/ : /not a process you may see/);
  r = await get('/debug/pprof/goroutine?pid=x1');
  assert.equal(r.res.status, 400);
  assert.match(r.body.toString(), /pid must be a positive integer/);
  r = await get('/debug/pprof/goroutine?debug=7');
  assert.equal(r.res.status, 400);
  r = await get(`/debug/pprof/goroutine?pid=${small}&debug=1`);
  assert.equal(r.res.status, 200);
  assert.match(r.res.headers.get('content-type'), /^text\/plain/);
  assert.match(r.body.toString(), /waiter_wait/);
  r = await fetch(`${base}/debug/pprof/goroutine`, { headers: { 'Sec-Fetch-Site': 'cross-site' } });
  assert.equal(r.status, 403, 'another site\'s page cannot make us signal targets');
});

test('another user sees none of root\'s processes in the profile', async () => {
  const curl = (p, out) => execFileSync('runuser', ['-u', 'nobody', '--', 'curl', '-s', '-o', out, '-w', '%{http_code}',
    '--unix-socket', h.httpSocket, `http://localhost${p}`], { encoding: 'utf8' });
  const out = path.join(h.tmp, 'nobody.pb.gz');
  writeFileSync(out, '');
  chmodSync(out, 0o666);
  assert.equal(curl('/debug/pprof/goroutine', out), '200');
  const prof = decode(readFileSync(out));
  const pids = new Set(prof.view.samples.map((s) => Object.fromEntries(s.labels).pid));
  assert.ok(!pids.has(String(small)) && !pids.has(String(big)), [...pids].join(' '));
  assert.equal(curl(`/debug/pprof/goroutine?pid=${small}`, out), '404');
});

// The samples of prof (decode()d) by thread name: summed values.
function byThread(prof) {
  const out = {};
  prof.sample.forEach((s, i) => {
    const name = Object.fromEntries(prof.view.samples[i].labels).thread;
    const v = (out[name] ??= { samples: 0, wall: 0, cpu: 0, stacks: [] });
    v.samples += Number(s.value[0]);
    v.wall += Number(s.value[1]);
    v.cpu += Number(s.value[2]);
    v.stacks.push(prof.view.samples[i].stack.join(' '));
  });
  return out;
}

async function profile(endpoint) {
  const res = await fetch(pbase + endpoint);
  const body = Buffer.from(await res.arrayBuffer());
  assert.equal(res.status, 200, `${endpoint}: ${res.status} ${body}`);
  assert.equal(res.headers.get('content-type'), 'application/octet-stream');
  return { body, prof: decode(body) };
}

const dumpsTotal = async () => Number((await (await fetch(`${pbase}/metrics`)).text())
  .match(/^stackwatch_dumps_total\{result="ok"\} (\d+)$/m)[1]);

test('profile?seconds=2: wall and CPU time per thread, sampled at --profile-hz', async () => {
  const { body, prof } = await profile(`/debug/pprof/profile?seconds=2&pid=${psmall}`);
  assert.deepEqual(prof.view.types, [['samples', 'count'], ['wall', 'nanoseconds'], ['cpu', 'nanoseconds']]);
  assert.deepEqual(prof.view.period.slice(0, 2), ['wall', 'nanoseconds']);
  assert.equal(prof.view.period[2], Math.floor(1e9 / 19), 'the period of the default 19 Hz');
  assert.equal(prof.stringTable.strings[Number(prof.defaultSampleType)], 'wall');
  const dur = Number(prof.durationNanos);
  assert.ok(dur > 1.5e9 && dur <= 2e9, `the window is the 2 s asked for (${dur} ns)`);
  const t = byThread(prof);
  const main = t.workload;
  assert.ok(main && main.samples >= 2, `several samples of the main thread: ${JSON.stringify(main)}`);
  // All 64 waiters are sampled as often as the main thread, one stack.
  assert.equal(t.waiter.samples, 64 * main.samples, 'each waiter in every sample');
  assert.ok(t.waiter.stacks.every((k) => k.includes('waiter_wait()@')));
  assert.ok(main.wall > 0 && t.waiter.wall === 64 * main.wall, 'wall time: the same for every thread');
  // The spinner burns CPU, the waiters none.
  assert.ok(t.spinner.cpu > 0, `the spinner has CPU time (${t.spinner.cpu})`);
  assert.ok(t.waiter.cpu < t.spinner.cpu, 'waiters less than the spinner');
  const f = saveProfile(body);
  const top = goPprof(['-top', '-sample_index=cpu', f]);
  assert.match(top, /Type: cpu/);
  assert.match(top, /spin_loop/, top);
  const raw = goPprof(['-raw', f]);
  assert.match(raw, /samples\/count wall\/nanoseconds\[dflt\] cpu\/nanoseconds/);
  assert.match(raw, new RegExp(`comm:\\[workload\\] pid:\\[${psmall}\\] thread:\\[waiter\\]`));
});

test('concurrent profile requests share one sampling; /debug/fgprof is the same', async () => {
  const before = await dumpsTotal();
  const [a, b] = await Promise.all([
    profile(`/debug/pprof/profile?seconds=2&pid=${psmall}`),
    profile(`/debug/fgprof?seconds=2&pid=${psmall}`),
  ]);
  const dumps = (await dumpsTotal()) - before;
  const na = byThread(a.prof).workload.samples;
  const nb = byThread(b.prof).workload.samples;
  assert.deepEqual(b.prof.view.types, a.prof.view.types);
  // Shared: the target was dumped about once per sample, not twice.
  assert.ok(dumps < na + nb, `${dumps} dumps for ${na} + ${nb} samples`);
  // Without ?pid: every visible process (here the workload and the daemon).
  const all = await profile('/debug/pprof/profile?seconds=1');
  const pids = new Set(all.prof.view.samples.map((s) => Object.fromEntries(s.labels).pid));
  assert.ok(pids.has(String(psmall)), [...pids].join(' '));
});

test('profile errors: seconds out of range, debug, a pid not seen', async () => {
  for (const q of ['seconds=0', 'seconds=301', 'seconds=x', 'debug=1']) {
    const res = await fetch(`${pbase}/debug/pprof/profile?${q}`);
    assert.equal(res.status, 400, q);
    assert.match(res.headers.get('content-type'), /^text\/plain/);
  }
  const res = await fetch(`${pbase}/debug/pprof/profile?seconds=1&pid=4194304`);
  assert.equal(res.status, 404);
  const out = path.join(hp.tmp, 'nobody-profile.pb.gz');
  writeFileSync(out, '');
  chmodSync(out, 0o666);
  const code = execFileSync('runuser', ['-u', 'nobody', '--', 'curl', '-s', '-o', out, '-w', '%{http_code}',
    '--unix-socket', hp.httpSocket, 'http://localhost/debug/pprof/profile?seconds=1'], { encoding: 'utf8' });
  assert.equal(code, '200');
  const prof = decode(readFileSync(out));
  assert.ok(!prof.view.samples.some((s) => Object.fromEntries(s.labels).pid === String(psmall)),
    'another user\'s profile has none of root\'s threads');
});

test('a daemon told to stop answers the profiles in progress with what they have', async () => {
  const h3 = new Harness('sw-profile-stop-');
  try {
    const b3 = await h3.daemon(['--sample-interval', '0']);
    const pending = fetch(`${b3}/debug/pprof/profile?seconds=60`);
    await new Promise((r) => setTimeout(r, 700));
    const daemon = h3.children[0];
    const exited = new Promise((r) => daemon.once('exit', (code) => r(code)));
    h3.stopping = true;
    daemon.kill('SIGTERM');
    const res = await pending;
    assert.equal(res.status, 200);
    const prof = decode(Buffer.from(await res.arrayBuffer()));
    assert.ok(Number(prof.durationNanos) < 60e9, 'cut short at the stop');
    assert.equal(await exited, 0, 'the daemon exits 0');
  } finally {
    await h3.stop();
  }
});
