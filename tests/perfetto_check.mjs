// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
//
// Runs Chrome DevTools' trace engine (npm @paulirish/trace_engine, a parser
// cuprobe does not own) on a `cuprobe trace --perfetto` file and prints what
// it found as one JSON object, for tests/root_perfetto.c to hold against the
// workload's own counts.
//
//   node perfetto_check.mjs NPM_DIR TRACE.json
//
// NPM_DIR is where tests/install-deps.sh ran `npm ci` (NPM_DIR/node_modules).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

// Debian bookworm's Node.js is 18: the engine calls URL.parse (Node 22, 20.18).
if (typeof URL.parse !== 'function') {
  URL.parse = (url, base) => {
    try {
      return new URL(url, base);
    } catch {
      return null;
    }
  };
}

const [npmDir, tracePath] = process.argv.slice(2);
if (!npmDir || !tracePath) {
  console.error('usage: node perfetto_check.mjs NPM_DIR TRACE.json');
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(npmDir), 'package.json'));
const Trace = await import(pathToFileURL(require.resolve('@paulirish/trace_engine')).href);

const events = JSON.parse(fs.readFileSync(tracePath, 'utf8'));
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(events);
const parsed = model.parsedTrace();
const data = parsed.data;

const count = (map, key, n = 1) => { map[key] = (map[key] ?? 0) + n; };

// Processes and threads, as the engine's Meta handler named them.
const processes = {};
for (const [pid, event] of data.Meta.processNames)
  processes[pid] = event.args.name;
const threads = {};
for (const [pid, byTid] of data.Meta.threadsInProcess) {
  threads[pid] = {};
  for (const [tid, event] of byTid)
    threads[pid][tid] = event.args.name;
}

// API slices: the complete events the Renderer handler put on each thread.
const slices = {};
for (const [pid, proc] of data.Renderer.processes) {
  for (const [tid, thread] of proc.threads) {
    for (const entry of thread.entries) {
      if (entry.ph !== 'X')
        continue;
      slices[pid] ??= {};
      slices[pid][tid] ??= { count: 0, apis: {} };
      slices[pid][tid].count++;
      count(slices[pid][tid].apis, entry.name);
    }
  }
}

// Kernels: async begin/end pairs, matched the engine's way (cat, id, name).
const asyncEvents = parsed.traceEvents.filter(e => e.ph === 'b' || e.ph === 'e');
const pairs = Trace.Helpers.Trace.createMatchedSortedSyntheticEvents(asyncEvents);
const kernels = { begins: asyncEvents.filter(e => e.ph === 'b').length, pairs: pairs.length,
                  negative: 0, names: {}, byPid: {} };
for (const pair of pairs) {
  count(kernels.names, pair.name);
  count(kernels.byPid, pair.pid);
  if (pair.dur < 0)
    kernels.negative++;
}

// Flows: the Flows handler's, each the events its phases bound to.
const flows = { count: data.Flows.flows.length, shapes: {} };
for (const flow of data.Flows.flows) {
  const shape = flow.map(e => {
    const where = processes[e.pid]?.startsWith('GPU stream') ? 'stream' : 'process';
    return `${e.ph}:${e.name}@${where}`;
  }).join(' -> ');
  count(flows.shapes, shape);
}
// A flow bound at both ends starts on its launch call's thread and ends on a stream.
flows.crossing = data.Flows.flows.filter(flow => flow.length === 2 &&
  flow[0].ph === 'X' && !processes[flow[0].pid]?.startsWith('GPU stream') &&
  flow[1].ph === 'b' && processes[flow[1].pid]?.startsWith('GPU stream') &&
  flow[1].ts > flow[0].ts).length;

// Counters and instants, as the engine holds the trace's events (time order).
const counters = {};
const sorted = [...parsed.traceEvents].sort((a, b) => a.ts - b.ts);
for (const e of sorted) {
  if (e.ph !== 'C')
    continue;
  for (const [series, value] of Object.entries(e.args ?? {})) {
    const key = `${e.name} ${series}`;
    counters[e.pid] ??= {};
    const c = counters[e.pid][key] ??= { samples: 0, max: 0, last: 0 };
    c.samples++;
    c.max = Math.max(c.max, value);
    c.last = value;
  }
}
// Instants by process, then name and scope.
const instants = {};
for (const e of parsed.traceEvents)
  if (e.ph === 'i' || e.ph === 'I')
    count(instants[e.pid] ??= {}, `${e.name}@${e.s ?? 't'}`);

console.log(JSON.stringify({
  events: parsed.traceEvents.length,
  processes,
  threads,
  slices,
  kernels,
  flows,
  counters,
  instants,
}));
