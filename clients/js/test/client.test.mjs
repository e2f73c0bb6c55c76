// The JavaScript client against a real opdispatchd.
//
// Starts $OD_SERVER (default: build/opdispatchd of this repository) on a
// free port, waits for GET /v2/health/ready, checks every answer against a
// reference computed here in double precision on fresh random inputs, and
// stops the server with SIGTERM (it must exit 0).
//
//   OD_SERVER=/path/to/opdispatchd node --test clients/js/test/

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

import {
  Client, OpdispatchError, tensor, fromNested, float, toArray,
  halfBitsToFloat, floatToHalfBits, bfloat16BitsToFloat,
} from "../opdispatch.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SERVER = process.env.OD_SERVER
  ? path.resolve(process.env.OD_SERVER)
  : path.resolve(HERE, "../../../build/opdispatchd");

// ---- the server ------------------------------------------------------------

let proc = null;
let url = null;
let stderrTail = "";

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startServer() {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const p = spawn(SERVER, ["--host", "127.0.0.1", "--port", String(port)], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    stderrTail = "";
    p.stderr.on("data", (b) => { stderrTail = (stderrTail + b.toString()).slice(-20000); });
    let exited = null;
    const spawnError = new Promise((resolve) => p.on("error", resolve));
    p.on("exit", (code, signal) => { exited = { code, signal }; });
    const u = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 30000;
    while (Date.now() < deadline && exited === null) {
      const err = await Promise.race([spawnError, sleep(0)]);
      if (err) throw new Error(`cannot start ${SERVER}: ${err.message} (set OD_SERVER)`);
      try {
        const r = await fetch(`${u}/v2/health/ready`);
        await r.arrayBuffer();
        if (r.status === 200) {
          proc = p;
          url = u;
          return;
        }
      } catch { /* not listening yet */ }
      await sleep(50);
    }
    if (exited === null) {
      p.kill("SIGKILL");
      throw new Error(`opdispatchd was not ready within 30 s:\n${stderrTail}`);
    }
    if (!/address|in use|bind/i.test(stderrTail)) {
      throw new Error(`opdispatchd exited (${JSON.stringify(exited)}):\n${stderrTail}`);
    }
    // the port was taken between freePort() and bind(): try another
  }
  throw new Error("no free port for opdispatchd");
}

before(startServer);

after(async () => {
  if (!proc) return;
  const exit = new Promise((resolve) => proc.on("exit", (code, signal) => resolve({ code, signal })));
  proc.kill("SIGTERM");
  const timer = setTimeout(() => proc.kill("SIGKILL"), 30000);
  const { code, signal } = await exit;
  clearTimeout(timer);
  assert.equal(code, 0, `opdispatchd exited with ${code ?? signal} after SIGTERM:\n${stderrTail}`);
});

// A client on its own session, recording what went over the wire.
async function client(opts = {}) {
  const wire = [];
  const spy = async (u, init) => {
    const resp = await fetch(u, init);
    wire.push({
      url: u,
      method: init.method,
      requestType: init.headers["Content-Type"] ?? null,
      headerLength: init.headers["Inference-Header-Content-Length"] ?? null,
      responseType: resp.headers.get("Content-Type"),
    });
    return resp;
  };
  const c = new Client(url, { fetch: spy, ...opts });
  await c.newSession();
  c.wire = wire;
  return c;
}

// ---- random inputs and references -----------------------------------------

const SEED = (globalThis.crypto.getRandomValues(new Uint32Array(1))[0]) >>> 0;

function rng(seed) {
  let a = seed >>> 0;
  const uniform = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const normal = () => {
    const u = 1 - uniform();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * uniform());
  };
  return { uniform, normal, int: (lo, hi) => lo + Math.floor(uniform() * (hi - lo)) };
}

let seedCounter = 0;
function randn(dtype, shape, r) {
  const n = shape.reduce((a, b) => a * b, 1);
  return tensor(dtype, shape, Array.from({ length: n }, r.normal));
}

// Each test gets a generator of its own, from the run's seed.
function gen(t) {
  const seed = (SEED + 0x9e3779b9 * ++seedCounter) >>> 0;
  t.diagnostic(`seed ${seed}`);
  return rng(seed);
}

const f64 = (t) => Float64Array.from(toArray(t, { bigint: false }), Number);

function strides(shape) {
  const s = new Array(shape.length);
  let k = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = k;
    k *= shape[i];
  }
  return s;
}

function broadcastShape(a, b) {
  const n = Math.max(a.length, b.length);
  const out = [];
  for (let i = 0; i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    assert.ok(x === y || x === 1 || y === 1);
    out.push(Math.max(x, y));
  }
  return out;
}

// out[i] = fn(a[bcast i], b[bcast i]) in double precision
function binaryRef(a, b, fn) {
  const shape = broadcastShape(a.shape, b.shape);
  const av = f64(a);
  const bv = f64(b);
  const sa = strides(a.shape);
  const sb = strides(b.shape);
  const n = shape.reduce((x, y) => x * y, 1);
  const out = new Float64Array(n);
  const idx = new Array(shape.length).fill(0);
  for (let i = 0; i < n; i++) {
    let ia = 0;
    let ib = 0;
    for (let d = 0; d < shape.length; d++) {
      const da = d - (shape.length - a.shape.length);
      const db = d - (shape.length - b.shape.length);
      if (da >= 0 && a.shape[da] !== 1) ia += idx[d] * sa[da];
      if (db >= 0 && b.shape[db] !== 1) ib += idx[d] * sb[db];
    }
    out[i] = fn(av[ia], bv[ib]);
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return { shape, data: out };
}

function mmRef(a, b) {
  const [m, k] = a.shape;
  const [k2, n] = b.shape;
  assert.equal(k, k2);
  const av = f64(a);
  const bv = f64(b);
  const out = new Float64Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += av[i * k + p] * bv[p * n + j];
      out[i * n + j] = s;
    }
  }
  return { shape: [m, n], data: out };
}

function softmaxRef(a) { // along the last dim
  const v = f64(a);
  const n = a.shape[a.shape.length - 1];
  const out = new Float64Array(v.length);
  for (let r = 0; r < v.length; r += n) {
    let mx = -Infinity;
    for (let j = 0; j < n; j++) mx = Math.max(mx, v[r + j]);
    let s = 0;
    for (let j = 0; j < n; j++) s += (out[r + j] = Math.exp(v[r + j] - mx));
    for (let j = 0; j < n; j++) out[r + j] /= s;
  }
  return { shape: a.shape, data: out };
}

function assertClose(got, ref, { rtol = 1e-5, atol = 1e-6, what = "" } = {}) {
  assert.deepEqual(got.shape, ref.shape, `${what} shape`);
  const g = f64(got);
  const r = ref.data;
  assert.equal(g.length, r.length, `${what} element count`);
  for (let i = 0; i < r.length; i++) {
    const ok = (Number.isNaN(r[i]) && Number.isNaN(g[i])) || g[i] === r[i] || Math.abs(g[i] - r[i]) <= atol + rtol * Math.abs(r[i]);
    if (!ok) assert.fail(`${what} element ${i}: got ${g[i]}, expected ${r[i]} (rtol ${rtol}, atol ${atol})`);
  }
}

const TRANSPORTS = [["json", false], ["binary", true]];

function lastWire(c) {
  return c.wire[c.wire.length - 1];
}

function assertTransport(c, binary) {
  const w = lastWire(c);
  if (binary) {
    assert.equal(w.requestType, "application/octet-stream");
    assert.match(String(w.headerLength), /^\d+$/);
    assert.match(w.responseType, /application\/octet-stream/);
  } else {
    assert.equal(w.requestType, "application/json");
    assert.equal(w.headerLength, null);
    assert.match(w.responseType, /application\/json/);
  }
}

// ---- operators -------------------------------------------------------------

test("add with broadcasting and alpha, both transports", async (t) => {
  const c = await client();
  const r = gen(t);
  const a = randn("float32", [3, 4, 5], r);
  const b = randn("float32", [4, 1], r);
  const ref = binaryRef(a, b, (x, y) => x + 0.5 * y);
  for (const [name, binary] of TRANSPORTS) {
    const y = await c.call("add", [a, b], { alpha: 0.5 }, { binary });
    assertTransport(c, binary);
    assert.equal(y.dtype, "float32");
    assert.ok(y.data instanceof Float32Array);
    assertClose(y, ref, { rtol: 1e-6, atol: 1e-6, what: `add (${name})` });
    assert.equal(c.lastResponse.op, "aten::add.Tensor");
    assert.ok(c.lastDispatch.key && Array.isArray(c.lastDispatch.steps) && c.lastDispatch.timing_us);
  }
  // a number second argument picks add.Scalar; float(3) is sent as 3.0
  const iv = fromNested([[1, 2], [3, 4]]);
  const yi = await c.call("add", [iv, 3]);
  assert.equal(yi.dtype, "int64");
  assert.deepEqual(Array.from(yi.data), [4n, 5n, 6n, 7n]);
  const yf = await c.call("add", [iv, float(3)]);
  assert.equal(c.lastResponse.op, "aten::add.Scalar");
  assert.equal(yf.dtype, "float32");
  assert.deepEqual(Array.from(yf.data), [4, 5, 6, 7]);
});

test("mm, both transports and the automatic choice", async (t) => {
  const c = await client();
  const r = gen(t);
  const a = randn("float32", [6, 9], r);
  const b = randn("float32", [9, 4], r);
  const ref = mmRef(a, b);
  for (const [name, binary] of TRANSPORTS) {
    const y = await c.call("mm", [a, b], undefined, { binary });
    assertTransport(c, binary);
    assertClose(y, ref, { rtol: 1e-5, atol: 1e-5, what: `mm (${name})` });
  }
  // no choice: small tensors go as JSON, large ones binary
  await c.call("mm", [a, b]);
  assertTransport(c, false);
  const big1 = randn("float64", [40, 50], r);
  const big2 = randn("float64", [50, 30], r);
  const y = await c.call("mm", [big1, big2]);
  assertTransport(c, true);
  assert.equal(y.dtype, "float64");
  assertClose(y, mmRef(big1, big2), { rtol: 1e-12, atol: 1e-12, what: "mm float64 (auto)" });
});

test("softmax, sum and relu", async (t) => {
  const c = await client();
  const r = gen(t);
  const x = randn("float32", [5, 7], r);
  for (const [name, binary] of TRANSPORTS) {
    const s = await c.call("softmax", [x, 1], undefined, { binary });
    assertClose(s, softmaxRef(x), { rtol: 1e-5, atol: 1e-7, what: `softmax (${name})` });

    const total = await c.call("sum", [x], undefined, { binary });
    assert.deepEqual(total.shape, []);
    assertClose(total, { shape: [], data: [f64(x).reduce((p, q) => p + q, 0)] }, { rtol: 1e-5, atol: 1e-5, what: "sum" });

    const rows = await c.call("sum", [x, [1]], { keepdim: true }, { binary });
    const v = f64(x);
    const rowRef = Array.from({ length: 5 }, (_, i) => v.slice(i * 7, i * 7 + 7).reduce((p, q) => p + q, 0));
    assertClose(rows, { shape: [5, 1], data: Float64Array.from(rowRef) }, { rtol: 1e-5, atol: 1e-5, what: "sum dim" });

    const y = await c.call("relu", [x], undefined, { binary });
    assertClose(y, { shape: x.shape, data: f64(x).map((e) => Math.max(e, 0)) }, { rtol: 0, atol: 0, what: `relu (${name})` });
  }
});

test("NaN and infinities survive both transports", async () => {
  const c = await client();
  const x = tensor("float64", [6], [NaN, Infinity, -Infinity, -0, 1.5, -2.5]);
  for (const [, binary] of TRANSPORTS) {
    const y = await c.call("neg", [x], undefined, { binary });
    assertTransport(c, binary);
    assert.ok(Number.isNaN(y.data[0]));
    assert.equal(y.data[1], -Infinity);
    assert.equal(y.data[2], Infinity);
    assert.ok(Object.is(y.data[3], 0));
    assert.deepEqual(Array.from(y.data.slice(4)), [-1.5, 2.5]);
  }
});

test("int64 beyond 2^53 and bool, both transports", async (t) => {
  const c = await client();
  const r = gen(t);
  const big = () => (BigInt(r.int(0, 2 ** 30)) << 32n | BigInt(r.int(0, 2 ** 32))) * (r.uniform() < 0.5 ? -1n : 1n);
  const n = 12;
  const a = tensor("int64", [3, 4], Array.from({ length: n }, big));
  const b = tensor("int64", [4], Array.from({ length: 4 }, big));
  const want = Array.from({ length: n }, (_, i) => a.data[i] + b.data[i % 4]);
  for (const [name, binary] of TRANSPORTS) {
    const y = await c.call("add", [a, b], undefined, { binary });
    assertTransport(c, binary);
    assert.equal(y.dtype, "int64");
    assert.ok(y.data instanceof BigInt64Array);
    assert.deepEqual(Array.from(y.data), want, `int64 add (${name})`);
    const s = await c.call("sum", [a], undefined, { binary });
    assert.equal(s.dtype, "int64");
    assert.equal(s.data[0], BigInt.asIntN(64, a.data.reduce((p, q) => p + q, 0n))); // wraps, as in C
  }
  const x = randn("float32", [4, 5], r);
  const z = randn("float32", [4, 5], r);
  const cond = tensor("bool", [4, 5], Array.from(x.data, (v) => v > 0));
  for (const [name, binary] of TRANSPORTS) {
    const gt = await c.call("gt", [x, 0], undefined, { binary });
    assert.equal(gt.dtype, "bool");
    assert.ok(gt.data instanceof Uint8Array);
    assert.deepEqual(toArray(gt), Array.from(x.data, (v) => v > 0), `gt (${name})`);
    const both = await c.call("logical_and", [gt, cond], undefined, { binary });
    assert.deepEqual(Array.from(both.data), Array.from(cond.data), `logical_and (${name})`);
    const w = await c.call("where", [cond, x, z], undefined, { binary });
    assert.deepEqual(Array.from(w.data), Array.from(x.data, (v, i) => (cond.data[i] ? v : z.data[i])), `where (${name})`);
  }
});

test("float16 and bfloat16 bits round trip, both transports", async (t) => {
  const c = await client();
  const r = gen(t);
  const special = [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x3555];
  for (const dtype of ["float16", "bfloat16"]) {
    const bits = [...special];
    while (bits.length < 300) {
      const b = r.int(0, 65536);
      const isNaN = dtype === "float16" ? (b & 0x7c00) === 0x7c00 && (b & 0x3ff) : (b & 0x7f80) === 0x7f80 && (b & 0x7f);
      if (!isNaN) bits.push(b);
    }
    const x = tensor(dtype, [300], Uint16Array.from(bits));
    for (const [name, binary] of TRANSPORTS) {
      const y = await c.call("clone", [x], undefined, { binary });
      assertTransport(c, binary);
      assert.equal(y.dtype, dtype);
      assert.ok(y.data instanceof Uint16Array);
      assert.deepEqual(Array.from(y.data), bits, `${dtype} clone (${name})`);
    }
  }
  // arithmetic in float16 against a double reference rounded to half
  const a = tensor("float16", [50], Array.from({ length: 50 }, r.normal));
  const b = tensor("float16", [50], Array.from({ length: 50 }, r.normal));
  for (const [, binary] of TRANSPORTS) {
    const y = await c.call("mul", [a, b], undefined, { binary });
    assert.equal(y.dtype, "float16");
    const want = Array.from(a.data, (v, i) => floatToHalfBits(halfBitsToFloat(v) * halfBitsToFloat(b.data[i])));
    assert.deepEqual(Array.from(y.data), want);
  }
  // NaN bits come back as a NaN
  const nan = await c.call("clone", [tensor("bfloat16", [1], Uint16Array.of(0x7fc0))], undefined, { binary: false });
  assert.ok(Number.isNaN(bfloat16BitsToFloat(nan.data[0])));
});

// ---- errors ----------------------------------------------------------------

test("errors carry status, code and message", async () => {
  const c = await client();
  const a = tensor("float32", [2], [1, 2]);
  await assert.rejects(c.call("add.Tensor", [a, "two"]), (e) => {
    assert.ok(e instanceof OpdispatchError);
    assert.equal(e.status, 422);
    assert.equal(e.code, "mismatch");
    assert.match(e.message, /argument 'other' \(position 2\) must be Tensor, not string/);
    return true;
  });
  await assert.rejects(c.call("no_such_op", [a]), { name: "OpdispatchError", status: 404, code: "not_found" });
  await assert.rejects(c.call("add", [a, tensor("float32", [3], [1, 2, 3])], undefined, { binary: true }),
    { status: 422, code: "mismatch" });
  await assert.rejects(c.get("0123456789abcdef0123456789abcdef"), { status: 404, code: "not_found" });
  await assert.rejects(c.call("relu", [a], undefined, { device: "cuda:99" }),
    (e) => e instanceof OpdispatchError && e.status >= 400 && typeof e.code === "string" && e.message.length > 0);
  const bad = new Client("http://127.0.0.1:1");
  await assert.rejects(bad.stats(), { name: "OpdispatchError", status: 0, code: "network_error" });
});

// ---- stored tensors, sessions, autograd ------------------------------------

test("stored tensors: put, refs, keep, get, in place, delete, sessions", async (t) => {
  const c = await client();
  const r = gen(t);
  const x = randn("float32", [4, 3], r);
  const other = randn("float32", [3], r);
  for (const [name, binary] of TRANSPORTS) {
    const h = await c.put(x, { binary });
    assert.match(h.id, /^[0-9a-f]{32}$/);
    assert.equal(h.dtype, "float32");
    assert.deepEqual(h.shape, [4, 3]);
    assert.deepEqual(h.strides, [3, 1]);
    assert.equal(h.bytes, 48);
    assert.equal(h.contiguous, true);
    assert.equal(typeof h.device, "string");
    for (const b of [true, false]) {
      const back = await c.get(h, { binary: b });
      assert.deepEqual(Array.from(back.data), Array.from(x.data), `get (${name}, binary ${b})`);
    }
    // a handle and {ref} as arguments; keep answers handles
    const k = await c.call("relu", [h], undefined, { keep: true });
    assert.match(k.id, /^[0-9a-f]{32}$/);
    assert.deepEqual(k.shape, [4, 3]);
    const relu = await c.get(k.id);
    assertClose(relu, { shape: [4, 3], data: f64(x).map((v) => Math.max(v, 0)) }, { rtol: 0, atol: 0, what: "kept relu" });
    const y = await c.call("add", [{ ref: k.id }, other], undefined, { binary });
    assertClose(y, binaryRef(relu, other, (p, q) => p + q), { rtol: 1e-6, atol: 1e-6, what: "add of a ref" });
    // a view shares storage with its base
    const v = await c.call("transpose", [h, 0, 1], undefined, { keep: true });
    assert.deepEqual(v.shape, [3, 4]);
    assert.deepEqual((await c.meta(v)).shares_storage_with, [h.id]);
    // in place on the stored tensor itself
    await c.call("fill_", [h, 2.5]);
    assert.deepEqual(Array.from((await c.get(h)).data), new Array(12).fill(2.5));
    assert.deepEqual(Array.from((await c.get(v)).data), new Array(12).fill(2.5));
    const ids = (await c.tensors()).map((m) => m.id).sort();
    assert.deepEqual(ids, [h.id, k.id, v.id].sort());
    // other sessions do not see it
    const stranger = c.withSession("js-client-stranger");
    await assert.rejects(stranger.get(h), { status: 404, code: "not_found" });
    for (const id of [v.id, k.id, h.id]) assert.deepEqual(await c.delete(id), { deleted: id });
    await assert.rejects(c.get(h), { status: 404, code: "not_found" });
    assert.equal((await c.sessionInfo()).tensors, 0);
  }
  const sid = c.session;
  assert.deepEqual(await c.deleteSession(), { deleted: sid });
  assert.equal(c.session, null);
});

test("backward of sum(x*x) gives 2x, accumulating with retainGraph", async (t) => {
  const c = await client();
  const r = gen(t);
  const x = randn("float32", [3, 4], r);
  const h = await c.put(x, { requiresGrad: true });
  assert.equal(h.requires_grad, true);
  const y = await c.call("mul", [h, h], undefined, { keep: true });
  assert.equal(y.grad_fn, "MulBackward0");
  assert.ok(c.lastDispatch.keyset.some((k) => k.startsWith("Autograd")));
  const l = await c.call("sum", [y], undefined, { keep: true });
  assert.equal(l.grad_fn, "SumBackward0");
  assert.deepEqual(l.shape, []);

  const b1 = await c.backward(l, { retainGraph: true });
  assert.equal(b1.id, l.id);
  const g = b1.grads.find((e) => e.id === h.id);
  assert.ok(g, "x has a gradient");
  assert.deepEqual(g.grad.shape, [3, 4]);
  const grad = await c.get(g.grad.id);
  assert.deepEqual(Array.from(grad.data), Array.from(x.data, (v) => 2 * v));
  assert.equal((await c.meta(h)).grad, g.grad.id);

  const b2 = await c.backward(l); // accumulates into the same .grad
  assert.equal(b2.grads.find((e) => e.id === h.id).grad.id, g.grad.id);
  assert.deepEqual(Array.from((await c.grad(h)).data), Array.from(x.data, (v) => 4 * v));

  await assert.rejects(c.backward(l), { status: 422 }); // the graph is freed

  // an explicit gradient for a non-scalar root
  const h2 = await c.put(x, { requiresGrad: true });
  const y2 = await c.call("mul", [h2, 3], undefined, { keep: true });
  const ones = tensor("float32", [3, 4], new Array(12).fill(1));
  await c.backward(y2, { gradient: ones });
  assert.deepEqual(Array.from((await c.grad(h2)).data), new Array(12).fill(3));

  // no_grad records nothing
  const n = await c.call("mul", [h, h], undefined, { keep: true, gradMode: "no_grad" });
  assert.equal(n.requires_grad, false);
  assert.equal(c.lastDispatch.grad_mode, "no_grad");
  await c.deleteSession();
});

// ---- programs, modes, vmap, autocast ---------------------------------------

test("a program: mm, relu, sum in one round trip, with keep and a backward step", async (t) => {
  const c = await client();
  const r = gen(t);
  const a = randn("float32", [5, 6], r);
  const b = randn("float32", [6, 3], r);
  const mm = mmRef(a, b);
  const relu = { shape: mm.shape, data: mm.data.map((v) => Math.max(v, 0)) };
  const total = relu.data.reduce((p, q) => p + q, 0);
  for (const [name, binary] of TRANSPORTS) {
    const res = await c.run({
      steps: [
        { op: "mm", args: [a, b] },
        { op: "relu", args: [{ ref: "$0" }] },
        { op: "sum", args: [{ ref: "$1" }] },
      ],
      outputs: ["$1", "$2"],
      keep: ["$2"],
    }, { binary });
    assertTransport(c, binary);
    assert.equal(res.steps, 3);
    assert.equal(res.outputs.length, 2);
    assertClose(res.results.$1, relu, { rtol: 1e-5, atol: 1e-5, what: `program relu (${name})` });
    assertClose(res.results.$2, { shape: [], data: [total] }, { rtol: 1e-5, atol: 1e-5, what: `program sum (${name})` });
    assert.equal(res.dispatch.length, 3);
    assert.equal(res.dispatch[0].op, "aten::mm");
    assert.deepEqual(c.lastDispatch, res.dispatch);
    const kept = await c.get(res.kept.$2);
    assert.equal(kept.data[0], res.results.$2.data[0]);
  }
  // backward inside a program, on a stored leaf
  const x = randn("float32", [4], r);
  const h = await c.put(x, { requiresGrad: true });
  const res = await c.run([{ op: "mul", args: [h, h] }, { op: "sum", args: [{ ref: "$0" }] }, { backward: "$1" }]);
  const g = res.grads.find((e) => e.id === h.id);
  assert.deepEqual(Array.from((await c.get(g.grad)).data), Array.from(x.data, (v) => 2 * v));
  // an error names its step
  await assert.rejects(c.run([{ op: "relu", args: [a] }, { op: "mm", args: [{ ref: "$0" }, a] }]),
    (e) => e instanceof OpdispatchError && e.status === 422 && /step 1/.test(e.message));
  await c.deleteSession();
});

test("modes: trace and profile report what they saw", async (t) => {
  const c = await client();
  const r = gen(t);
  const a = randn("float32", [2, 1, 3], r);
  const b = randn("float32", [3, 4], r);
  const res = await c.call("matmul", [a, b], undefined, { modes: ["trace", "profile"], full: true });
  assert.deepEqual(res.outputs[0].shape, [2, 1, 4]);
  const events = res.modes.trace.events;
  assert.ok(Array.isArray(events) && events.length >= 2);
  assert.equal(events[0].op, "aten::matmul");
  assert.equal(events[0].depth, 0);
  assert.ok(events.some((e) => e.depth >= 1), "inner operators traced");
  assert.deepEqual(events[0].inputs.map((i) => i.shape), [[2, 1, 3], [3, 4]]);
  assert.ok(res.modes.profile.ops.some((o) => o.op === "aten::matmul" && o.count === 1));
  assert.match(res.dispatch.path, /Mode/);
  assert.deepEqual(c.lastModes, res.modes);
  // override: mm served by the naive reference kernel, same numbers
  const x = randn("float32", [4, 5], r);
  const y = randn("float32", [5, 2], r);
  const o = await c.call("mm", [x, y], undefined, { modes: [{ override: { mm: "mm_reference" } }], full: true });
  assertClose(o.outputs[0], mmRef(x, y), { rtol: 1e-5, atol: 1e-5, what: "overridden mm" });
  assert.ok(o.modes.override.replaced_calls >= 1);
});

test("vmap: add with in_dims [0, null]", async (t) => {
  const c = await client();
  const r = gen(t);
  const x = randn("float32", [5, 3, 4], r);
  const y = randn("float32", [4], r);
  for (const [name, binary] of TRANSPORTS) {
    const res = await c.call("add", [x, y], { alpha: 2 }, { vmap: { in_dims: [0, null] }, binary, full: true });
    assertClose(res.outputs[0], binaryRef(x, y, (p, q) => p + 2 * q), { rtol: 1e-6, atol: 1e-6, what: `vmap add (${name})` });
    assert.match(res.dispatch.path, /Batched/);
  }
  // out_dims moves the batch dimension
  const z = await c.call("relu", [x], undefined, { vmap: { in_dims: 0, out_dims: 2 } });
  assert.deepEqual(z.shape, [3, 4, 5]);
  const xv = f64(x);
  for (let b = 0; b < 5; b++) for (let i = 0; i < 3; i++) for (let j = 0; j < 4; j++) {
    assert.equal(z.data[i * 20 + j * 5 + b], Math.max(xv[b * 12 + i * 4 + j], 0));
  }
});

test("autocast bfloat16 runs mm in bfloat16", async (t) => {
  const c = await client();
  const r = gen(t);
  const a = randn("float32", [4, 8], r);
  const b = randn("float32", [8, 3], r);
  const res = await c.call("mm", [a, b], undefined, { autocast: "bfloat16", full: true });
  assert.equal(res.outputs[0].dtype, "bfloat16");
  assert.equal(res.dispatch.autocast, "bfloat16");
  assertClose(res.outputs[0], mmRef(a, b), { rtol: 5e-2, atol: 5e-2, what: "autocast mm" });
});

// ---- introspection ---------------------------------------------------------

test("introspection: ops, op, dump, keys, devices, stats, explain", async () => {
  const c = await client();
  const ops = await c.ops();
  assert.ok(ops.count > 50);
  assert.ok(ops.operators.some((o) => o.name === "aten::add" || o.name === "add"));
  const add = await c.op("add.Tensor");
  assert.equal(add.schema, "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  assert.ok(Array.isArray(add.table) && add.table.some((s) => s.key === "CPU" && s.kernel));
  assert.ok(add.arguments.some((a) => a.name === "alpha" && a.kwarg_only));
  const same = await c.op("aten::add.Tensor");
  assert.equal(same.schema, add.schema);
  const text = await c.dump("add.Tensor");
  assert.match(text, /_dispatch_dump_table/);
  assert.match(text, /name: aten::add\.Tensor/);
  const keys = await c.keys();
  assert.ok(keys.runtime_keys.some((k) => k.name === "CPU"));
  const dev = await c.devices();
  assert.ok(dev.cpu.cores >= 1);
  assert.equal(typeof dev.cuda.available, "boolean");
  await c.call("relu", [tensor("float32", [3], [1, -1, 2])]);
  const stats = await c.stats();
  assert.ok(stats.ops.some((o) => o.op === "aten::relu" && o.requests >= 1));
  const ex = await c.explain("matmul", [{ dtype: "float32", shape: [64, 128] }, tensor("float32", [128, 32])]);
  assert.equal(ex.op, "aten::matmul");
  assert.deepEqual(ex.outputs[0].shape, [64, 32]);
  assert.equal(ex.within_limits, true);
  assert.equal(await c.ready(), true);
  assert.equal((await c.index()).name, "opdispatch");
  assert.match(await c.metrics(), /od_http_requests_total/);
});
