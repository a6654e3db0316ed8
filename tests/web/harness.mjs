// harness.mjs - what the node tests of tests/web share: starting the real
// daemon and fixture programs under the agent, and stopping them.
//
//   const h = new Harness();
//   const base = await h.daemon(['--sample-interval', '0']);
//   const pid = await h.workload(['--waiters', '1000']);
//   ...
//   await h.stop();

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BUILD = path.resolve(root, process.env.BUILD || 'build');

export class Harness {
  constructor(prefix = 'sw-web-') {
    this.tmp = mkdtempSync(path.join(tmpdir(), prefix));
    this.socket = path.join(this.tmp, 'agent.sock');
    this.httpSocket = path.join(this.tmp, 'http.sock');
    this.children = [];
    this.stopping = false; // stop(): children exit as told
    this.base = null; // http://127.0.0.1:PORT once daemon() ran
  }

  // Runs cmd; resolves with { child, m, seen } once a line of its stream
  // matches re, rejects on exit or after ms.
  startUntil(cmd, args, env, stream, re, ms) {
    return new Promise((resolve, reject) => {
      const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      this.children.push(child);
      let seen = '';
      const timer = setTimeout(() => reject(new Error(`${cmd}: no ${re} within ${ms} ms:\n${seen}`)), ms);
      child[stream].setEncoding('utf8');
      child[stream].on('data', (chunk) => {
        seen = (seen + chunk).slice(-65536);
        const m = seen.match(re);
        if (m) {
          clearTimeout(timer);
          resolve({ child, m, seen });
        }
      });
      child.on('exit', (code, sig) => {
        clearTimeout(timer);
        if (!this.stopping) {
          const tail = seen.split('\n').slice(-20).map((l) => `#   ${l}`).join('\n');
          console.log(`# ${path.basename(cmd)} exited (${code ?? sig}):\n${tail}`);
        }
        reject(new Error(`${cmd} exited (${code ?? sig}) before ${re}:\n${seen}`));
      });
    });
  }

  // The real daemon on 127.0.0.1:0 (and a unix socket of its own), with
  // extra options; resolves with its base URL.
  async daemon(args = []) {
    const d = await this.startUntil(path.join(BUILD, 'stackwatchd'), ['--listen', '127.0.0.1:0',
      '--agent-socket', this.socket, '--http-socket', this.httpSocket, '--config', '/dev/null', ...args],
    {}, 'stderr', /listening on (http:\/\/127\.0\.0\.1:\d+)/, 10000);
    this.base = d.m[1];
    return this.base;
  }

  // The workload fixture under the agent (`workload serve ARGS`); its pid.
  async workload(args = []) {
    const { seen } = await this.startUntil(path.join(BUILD, 'fixtures/workload'), ['serve', ...args], {
      LD_PRELOAD: path.join(BUILD, 'libstackwatch-agent.so'),
      STACKWATCH_SOCKET: this.socket,
    }, 'stdout', /^ready$/m, 60000);
    return Number(seen.match(/^pid (\d+)$/m)[1]);
  }

  // Resolves once every pid is a registered target.
  async registered(pids) {
    for (let i = 0; i < 200; i++) {
      const res = await fetch(`${this.base}/api/v1/targets`, { headers: { Accept: 'application/json' } });
      const { targets } = await res.json();
      if (pids.every((pid) => targets.some((t) => t.pid === pid))) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`pids ${pids} did not register`);
  }

  // SIGTERM to every child (SIGKILL after 5 s), newest first.
  async stop() {
    this.stopping = true;
    for (const c of this.children.reverse()) {
      if (c.exitCode === null && c.signalCode === null) {
        const gone = new Promise((r) => c.once('exit', r));
        c.kill('SIGTERM');
        await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
        if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      }
    }
    rmSync(this.tmp, { recursive: true, force: true });
  }
}
