// The client's encoding and decoding, without a server: tensors, float16 and
// bfloat16 bits, the JSON and binary request bodies it writes (seen through
// a stand-in fetch) and the responses it reads.

import { test } from "node:test";
import assert from "node:assert/strict";

import {
  Client, OpdispatchError, tensor, fromNested, float, toArray, toNested, toFloat64Array, parseJSON,
  normalizeDtype, floatToHalfBits, halfBitsToFloat, floatToBfloat16Bits, bfloat16BitsToFloat,
} from "../opdispatch.mjs";

// ---- float16 / bfloat16 ----------------------------------------------------

test("every non-NaN float16 and bfloat16 pattern survives bits -> number -> bits", () => {
  for (let b = 0; b < 65536; b++) {
    const h = halfBitsToFloat(b);
    if (Number.isNaN(h)) assert.equal(b & 0x7c00, 0x7c00);
    else assert.equal(floatToHalfBits(h), b, `half 0x${b.toString(16)}`);
    const f = bfloat16BitsToFloat(b);
    if (Number.isNaN(f)) assert.equal(b & 0x7f80, 0x7f80);
    else assert.equal(floatToBfloat16Bits(f), b, `bfloat16 0x${b.toString(16)}`);
  }
});

test("float16 rounding: nearest, ties to even, overflow, subnormals", () => {
  assert.equal(floatToHalfBits(1), 0x3c00);
  assert.equal(floatToHalfBits(-2), 0xc000);
  assert.equal(floatToHalfBits(1 + 2 ** -11), 0x3c00); // tie: even
  assert.equal(floatToHalfBits(1 + 3 * 2 ** -11), 0x3c02); // tie: even (up)
  assert.equal(floatToHalfBits(1 + 2 ** -11 + 2 ** -30), 0x3c01);
  assert.equal(floatToHalfBits(65504), 0x7bff);
  assert.equal(floatToHalfBits(65519.99), 0x7bff);
  assert.equal(floatToHalfBits(65520), 0x7c00); // rounds to infinity
  assert.equal(floatToHalfBits(-Infinity), 0xfc00);
  assert.equal(floatToHalfBits(2 ** -24), 0x0001);
  assert.equal(floatToHalfBits(2 ** -25), 0x0000); // tie to even: zero
  assert.equal(floatToHalfBits(3 * 2 ** -26), 0x0001);
  assert.equal(floatToHalfBits(2 ** -14 - 2 ** -25), 0x0400); // rounds up into the normals
  assert.equal(floatToHalfBits(-0), 0x8000);
  assert.equal(floatToHalfBits(1e-30), 0x0000);
  assert.equal(floatToHalfBits(NaN) & 0x7e00, 0x7e00);
  assert.equal(halfBitsToFloat(0x3555), 0.333251953125);
  assert.ok(Object.is(halfBitsToFloat(0x8000), -0));
});

test("bfloat16 rounding matches rounding float32 bits", () => {
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  let seed = 12345;
  for (let i = 0; i < 20000; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    u[0] = seed ^ (i << 7);
    if (Number.isNaN(f[0])) continue;
    const bits = u[0];
    const lsb = (bits >>> 16) & 1;
    let want = ((bits + 0x7fff + lsb) >>> 16) & 0xffff; // the classic round-to-nearest-even
    assert.equal(floatToBfloat16Bits(f[0]), want, `float32 bits 0x${bits.toString(16)}`);
  }
});

// ---- tensors ---------------------------------------------------------------

test("tensor() and fromNested() build {dtype, shape, data}", () => {
  const a = fromNested([[1, 2, 3], [4, 5, 6]]);
  assert.equal(a.dtype, "int64");
  assert.deepEqual(a.shape, [2, 3]);
  assert.ok(a.data instanceof BigInt64Array);
  assert.equal(fromNested([1.5, 2]).dtype, "float32");
  assert.equal(fromNested([true, false]).dtype, "bool");
  assert.ok(fromNested([true, false]).data instanceof Uint8Array);
  assert.deepEqual(fromNested(3.5).shape, []);
  assert.deepEqual(fromNested([[1, 2]], "float64").data, Float64Array.of(1, 2));

  const h = tensor("float16", [2], [1, -2]);
  assert.deepEqual(Array.from(h.data), [0x3c00, 0xc000]);
  const raw = Uint16Array.of(0x3c00, 0x4000);
  assert.equal(tensor("half", [2], raw).data, raw, "a Uint16Array is used as bits, not copied");
  assert.equal(tensor("torch.float32", null, [[1, 2], [3, 4]]).dtype, "float32");
  assert.deepEqual(tensor("FP64", null, [[1, 2], [3, 4]]).shape, [2, 2]);
  assert.deepEqual(tensor("float32", [2, 2]).data, new Float32Array(4));
  assert.throws(() => tensor("float32", [2, 2], [1, 2, 3]), /needs 4/);
  assert.throws(() => tensor("complex64", [1], [1]), /unknown dtype/);
  assert.throws(() => tensor("int64", [1], [1.5]), /not an integer/);
  assert.equal(normalizeDtype("long"), "int64");
  assert.equal(normalizeDtype("BF16"), "bfloat16");

  assert.deepEqual(toNested(tensor("float16", [2, 2], [1, 2, 3, 4])), [[1, 2], [3, 4]]);
  assert.deepEqual(toNested(fromNested([[1n, 2n]])), [[1n, 2n]]);
  assert.deepEqual(toNested(fromNested([[1, 2]]), { bigint: false }), [[1, 2]]);
  assert.deepEqual(toArray(fromNested([true, false])), [true, false]);
  assert.deepEqual(toNested(tensor("float32", [], [7])), 7);
  assert.deepEqual(toFloat64Array(tensor("bfloat16", [2], [1.5, -3])), Float64Array.of(1.5, -3));
});

test("parseJSON keeps integers beyond 2^53 exact and leaves strings alone", () => {
  const text = '{"id":"12345678901234567890","data":[9007199254740993,-9223372036854775808,1.2345678901234567,12,1e300],"x":"a\\"1234567890123456789"}';
  const v = parseJSON(text);
  assert.equal(v.id, "12345678901234567890");
  assert.equal(v.data[0], 9007199254740993n);
  assert.equal(v.data[1], -9223372036854775808n);
  assert.equal(v.data[2], 1.2345678901234567);
  assert.equal(v.data[3], 12);
  assert.equal(v.data[4], 1e300);
  assert.equal(v.x, 'a"1234567890123456789');
  assert.deepEqual(parseJSON('{"a":[1,2]}'), { a: [1, 2] });
});

// ---- what goes over the wire -----------------------------------------------

// A stand-in fetch: records the request, answers with `reply(request)`.
function fakeClient(reply, opts = {}) {
  const seen = [];
  const fetch = async (url, init) => {
    const req = { url, ...init, bodyBytes: init.body === undefined ? null : typeof init.body === "string" ? new TextEncoder().encode(init.body) : init.body };
    seen.push(req);
    return reply(req);
  };
  const c = new Client("http://od.test:8000/", { fetch, ...opts });
  return { c, seen };
}

const jsonReply = (obj, status = 200) => new Response(JSON.stringify(obj), { status, headers: { "Content-Type": "application/json" } });

function binaryReply(header, blobs, { exposeLength = true } = {}) {
  const head = new TextEncoder().encode(JSON.stringify(header));
  const size = head.length + blobs.reduce((a, b) => a + b.byteLength, 0);
  const body = new Uint8Array(size);
  body.set(head);
  let off = head.length;
  for (const b of blobs) {
    body.set(new Uint8Array(b.buffer, b.byteOffset, b.byteLength), off);
    off += b.byteLength;
  }
  const headers = { "Content-Type": "application/octet-stream" };
  if (exposeLength) headers["Inference-Header-Content-Length"] = String(head.length);
  return new Response(body, { status: 200, headers });
}

const DISPATCH = { key: "CPU", path: "CPU [kernel]" };

test("a JSON call: the body, NaN and Infinity, bigints, float(), handles and refs", async () => {
  const { c, seen } = fakeClient(() => jsonReply({
    op: "aten::add.Tensor",
    outputs: [{ dtype: "float32", shape: [2, 2], data: [1.5, "NaN", "Infinity", "-Infinity"] }],
    dispatch: DISPATCH,
  }), { session: "s1" });
  const x = tensor("float64", [4], [NaN, Infinity, -Infinity, -0]);
  const out = await c.call("aten::add.Tensor", [x, { id: "abc", dtype: "float32", shape: [4] }, { ref: "def" }],
    { alpha: float(2), n: 12345678901234567890n, half: tensor("float16", [1], [0.5]), dims: [0, 1] }, { device: "cpu", binary: false });
  const r = seen[0];
  assert.equal(r.url, "http://od.test:8000/v1/ops/aten::add.Tensor");
  assert.equal(r.method, "POST");
  assert.equal(r.headers["Content-Type"], "application/json");
  assert.equal(r.headers["X-OD-Session"], "s1");
  assert.equal(r.body,
    '{"args":[{"dtype":"float64","shape":[4],"data":["NaN","Infinity","-Infinity",-0.0]},{"ref":"abc"},{"ref":"def"}],'
    + '"kwargs":{"alpha":2.0,"n":12345678901234567890,"half":{"dtype":"float16","shape":[1],"data":[0.5]},"dims":[0,1]},'
    + '"device":"cpu"}');
  assert.deepEqual(out.shape, [2, 2]);
  assert.ok(out.data instanceof Float32Array);
  assert.equal(out.data[0], 1.5);
  assert.ok(Number.isNaN(out.data[1]));
  assert.equal(out.data[2], Infinity);
  assert.equal(out.data[3], -Infinity);
  assert.deepEqual(c.lastDispatch, DISPATCH);
});

test("a binary call: header, sizes, little-endian bytes in header order", async () => {
  const y = Float32Array.of(1, -2, 3);
  const flags = Uint8Array.of(1, 0, 1);
  const { c, seen } = fakeClient(() => binaryReply({
    op: "aten::where.self",
    outputs: [
      { dtype: "float32", shape: [3], parameters: { binary_data_size: 12 } },
      { dtype: "bool", shape: [3], parameters: { binary_data_size: 3 } },
      { name: "n", value: 7 },
    ],
    dispatch: DISPATCH,
  }, [y, flags]));
  const cond = tensor("bool", [3], [true, false, true]);
  const a = tensor("int64", [3], [1n, -1n, 2n ** 62n]);
  const out = await c.call("where", [cond, a, tensor("float32", [3], [0.5, 1, 2])], undefined, { binary: true });
  const r = seen[0];
  assert.equal(r.headers["Content-Type"], "application/octet-stream");
  const hl = Number(r.headers["Inference-Header-Content-Length"]);
  const header = JSON.parse(new TextDecoder().decode(r.bodyBytes.subarray(0, hl)));
  assert.deepEqual(header, {
    args: [
      { dtype: "bool", shape: [3], parameters: { binary_data_size: 3 } },
      { dtype: "int64", shape: [3], parameters: { binary_data_size: 24 } },
      { dtype: "float32", shape: [3], parameters: { binary_data_size: 12 } },
    ],
    parameters: { binary_data_output: true },
  });
  const rest = r.bodyBytes.slice(hl);
  assert.equal(rest.length, 3 + 24 + 12);
  assert.deepEqual(Array.from(rest.subarray(0, 3)), [1, 0, 1]);
  const dv = new DataView(rest.buffer, rest.byteOffset);
  assert.equal(dv.getBigInt64(3, true), 1n);
  assert.equal(dv.getBigInt64(11, true), -1n);
  assert.equal(dv.getBigInt64(19, true), 2n ** 62n);
  assert.equal(dv.getFloat32(27, true), 0.5);
  assert.equal(dv.getFloat32(35, true), 2);
  // three outputs: an array of a tensor, a tensor and a value
  assert.deepEqual(Array.from(out[0].data), [1, -2, 3]);
  assert.equal(out[1].dtype, "bool");
  assert.deepEqual(Array.from(out[1].data), [1, 0, 1]);
  assert.equal(out[2], 7);
});

test("a binary response whose header length is hidden (cross-origin) is still read", async () => {
  const { c } = fakeClient(() => binaryReply({ id: "x", outputs: [{ name: "out", dtype: "float64", shape: [2], parameters: { binary_data_size: 16 } }] },
    [Float64Array.of(0.25, -8)], { exposeLength: false }));
  const t = await c.get("x");
  assert.deepEqual(Array.from(t.data), [0.25, -8]);
});

test("the transport follows binaryThreshold unless told", async () => {
  const { c, seen } = fakeClient(() => jsonReply({ op: "aten::relu", outputs: [], dispatch: DISPATCH }), { binaryThreshold: 64 });
  await c.call("relu", [tensor("float32", [15])]);
  assert.equal(seen.at(-1).headers["Content-Type"], "application/json");
  assert.ok(!seen.at(-1).body.includes("binary_data_output"));
  await c.call("relu", [tensor("float32", [16])]);
  assert.equal(seen.at(-1).headers["Content-Type"], "application/octet-stream");
  await c.call("relu", [tensor("float32", [16])], undefined, { binary: false });
  assert.equal(seen.at(-1).headers["Content-Type"], "application/json");
  await c.call("relu", [tensor("float32", [1])], undefined, { binaryOutput: true });
  assert.ok(seen.at(-1).body.includes('"parameters":{"binary_data_output":true}'));
});

test("options become the call's fields; explain sends shapes only; put, backward, run bodies", async () => {
  const { c, seen } = fakeClient((req) => {
    if (req.url.endsWith("/v1/run")) return jsonReply({ steps: 1, outputs: [{ name: "$0", dtype: "int32", shape: [1], data: [3] }], dispatch: [{ op: "aten::abs", record: DISPATCH }] });
    if (req.url.includes("/v1/tensors")) return jsonReply({ id: "t1", dtype: "float32", shape: [2] }, 201);
    return jsonReply({ op: "aten::mm", outputs: [{ name: "out", id: "k1", dtype: "float32", shape: [1, 1], strides: [1, 1], device: "cpu", bytes: 4, contiguous: true }], dispatch: DISPATCH });
  });
  const x = tensor("float32", [1, 1], [2]);
  const k = await c.call("mm", [x, x], undefined, { keep: true, gradMode: "no_grad", modes: ["trace", { override: { mm: "mm_reference" } }], vmap: { in_dims: [0, null] }, autocast: "bfloat16" });
  assert.equal(k.id, "k1");
  assert.equal(seen.at(-1).body,
    '{"args":[{"dtype":"float32","shape":[1,1],"data":[2]},{"dtype":"float32","shape":[1,1],"data":[2]}],"keep":true,"grad_mode":"no_grad",'
    + '"modes":["trace",{"override":{"mm":"mm_reference"}}],"vmap":{"in_dims":[0,null]},"autocast":"bfloat16"}');

  await c.explain("mm", [x, { dtype: "float32", shape: [1, 5] }]);
  assert.equal(seen.at(-1).url, "http://od.test:8000/v1/ops/mm/explain");
  assert.equal(seen.at(-1).body, '{"args":[{"dtype":"float32","shape":[1,1]},{"dtype":"float32","shape":[1,5]}]}');

  const h = await c.put(tensor("float32", [2], [1, 2]), { requiresGrad: true, device: "cpu" });
  assert.equal(h.id, "t1");
  assert.equal(seen.at(-1).body, '{"tensor":{"dtype":"float32","shape":[2],"requires_grad":true,"data":[1,2]},"device":"cpu"}');

  await c.backward(h, { gradient: { id: "g" }, retainGraph: true });
  assert.equal(seen.at(-1).url, "http://od.test:8000/v1/tensors/t1/backward");
  assert.equal(seen.at(-1).body, '{"gradient":{"ref":"g"},"retain_graph":true}');

  await c.delete("t1");
  assert.equal(seen.at(-1).method, "DELETE");

  const res = await c.run({ steps: [{ op: "abs", args: [h] }], gradMode: "no_grad", vmap: { in_dims: { t1: 0 } } });
  assert.equal(seen.at(-1).body, '{"steps":[{"op":"abs","args":[{"ref":"t1"}]}],"vmap":{"in_dims":{"t1":0}},"grad_mode":"no_grad"}');
  assert.deepEqual(Array.from(res.results.$0.data), [3]);
  assert.deepEqual(c.lastDispatch, [{ op: "aten::abs", record: DISPATCH }]);
});

test("errors: the server's code and message, the OIP form, and non-JSON bodies", async () => {
  const replies = [
    () => jsonReply({ error: { code: "over_budget", message: "session over budget" } }, 507),
    () => jsonReply({ error: "model not found" }, 404),
    () => new Response("bad gateway", { status: 502 }),
  ];
  let i = 0;
  const { c } = fakeClient(() => replies[i++]());
  await assert.rejects(c.stats(), (e) => e instanceof OpdispatchError && e.status === 507 && e.code === "over_budget" && e.message === "session over budget");
  await assert.rejects(c.stats(), { status: 404, code: "not_found", message: "model not found" });
  await assert.rejects(c.stats(), { status: 502, code: "http_error", message: "bad gateway" });
});
