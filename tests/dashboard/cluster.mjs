// Starts real Tessera processes for the dashboard tests and measurements:
// `tessera server` on a temporary store (tokens on) and `tessera agent`s with
// fake GPUs. Everything listens on loopback; stop() ends what start*() began.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Fails loudly (never skips) when something the browser tests need is missing.
export function requireTools() {
  const problems = [];
  const bin = process.env.TESSERA_BIN;
  if (!bin || !fs.existsSync(bin)) problems.push(`TESSERA_BIN (${bin}) is not the tessera binary`);
  const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
  if (!fs.existsSync(chromium)) {
    problems.push(`${chromium} is missing: install Debian's chromium (scripts/setup.sh)`);
  }
  const here = path.dirname(new URL(import.meta.url).pathname);
  if (!fs.existsSync(path.join(here, 'node_modules', 'playwright-core'))) {
    problems.push(`${here}/node_modules/playwright-core is missing: run \`npm ci\` there ` +
      '(scripts/setup.sh does)');
  }
  if (problems.length) {
    console.error('FAIL: the browser tests cannot run:\n  ' + problems.join('\n  '));
    process.exit(1);
  }
  return { bin, chromium };
}

export class Cluster {
  constructor(bin) {
    this.bin = bin;
    this.dir = fs.mkdtempSync(path.join(process.env.TMPDIR || os.tmpdir(), 'tessera-dash-'));
    this.children = [];
    this.adminToken = 'dash-admin-' + Math.random().toString(36).slice(2);
    this.nodeTokens = {};
  }

  // `nodeNames`: names that get a node:NAME token (agents).
  async startServer(nodeNames = [], extraArgs = []) {
    const lines = [`${this.adminToken} * admin`];
    for (const n of nodeNames) {
      this.nodeTokens[n] = `node-${n}-` + Math.random().toString(36).slice(2);
      lines.push(`${this.nodeTokens[n]} - node:${n}`);
    }
    fs.writeFileSync(path.join(this.dir, 'tokens'), lines.join('\n') + '\n', { mode: 0o600 });
    const child = this.spawn('server', ['server', '--data-dir', path.join(this.dir, 'store'),
      '--listen', '127.0.0.1:0', '--tokens-file', path.join(this.dir, 'tokens'), ...extraArgs]);
    const addr = await new Promise((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error('server did not start: ' + out)), 30000);
      child.stdout.on('data', (d) => {
        out += d;
        const m = /listening on (\S+)/.exec(out);
        if (m) { clearTimeout(timer); resolve(m[1]); }
      });
      child.on('exit', (code) => reject(new Error(`server exited with ${code}; see ${this.dir}/server.log`)));
    });
    this.url = 'http://' + addr;
    return this.url;
  }

  startAgent(name, fakeConfig, rack, block = 'block-0') {
    this.spawn('agent-' + name, ['agent', '--server', this.url, '--token', this.nodeTokens[name],
      '--node-name', name, '--backend', 'fake', '--fake-config', fakeConfig,
      '--state-dir', path.join(this.dir, 'agents', name), '--rack', rack, '--block', block,
      '--heartbeat', '1s', '--sync', '1s', '--cgroup-parent', '']);
  }

  spawn(name, args) {
    const log = fs.openSync(path.join(this.dir, name + '.log'), 'a');
    const child = spawn(this.bin, args, { stdio: ['ignore', name === 'server' ? 'pipe' : log, log] });
    this.children.push({ name, child });
    return child;
  }

  async api(method, p, body) {
    const res = await fetch(this.url + p, {
      method,
      headers: { Authorization: 'Bearer ' + this.adminToken, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch (_) { /* not JSON */ }
    if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
    return json;
  }

  async waitFor(what, fn, timeoutMs = 60000) {
    const end = Date.now() + timeoutMs;
    let last;
    while (Date.now() < end) {
      try {
        const v = await fn();
        if (v) return v;
      } catch (e) { last = e; }
      await sleep(200);
    }
    throw new Error(`timed out waiting for ${what}` + (last ? ': ' + last.message : ''));
  }

  // Agents first (their members are ended by deleting the jobs before), then the server.
  async stop() {
    const order = [...this.children].reverse();
    for (const { child } of order) {
      if (child.exitCode !== null) continue;
      child.kill('SIGTERM');
      const done = new Promise((r) => child.once('exit', r));
      const t = setTimeout(() => child.kill('SIGKILL'), 8000);
      await done;
      clearTimeout(t);
    }
  }
}
