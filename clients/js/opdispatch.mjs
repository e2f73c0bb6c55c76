// opdispatch.mjs: the JavaScript client of opdispatchd (proto/PROTOCOL.md).
//
// One ES module for browsers and Node 20+: it uses fetch, TypedArrays,
// TextEncoder/TextDecoder and nothing else (no Node-only APIs, no
// dependencies).
//
//   import { Client, tensor, fromNested } from "./opdispatch.mjs";
//   const od = new Client("http://127.0.0.1:8000");
//   const y = await od.call("add", [fromNested([[1, 2], [3, 4]]), tensor("float32", [2], [10, 20])]);
//   // y = {dtype: "float32", shape: [2, 2], data: Float32Array [11, 22, 13, 24]}
//
// A tensor is a plain object {dtype, shape, data}; data is a TypedArray in
// row-major order:
//
//   float32  Float32Array     int64   BigInt64Array    uint8  Uint8Array
//   float64  Float64Array     int32   Int32Array       int8   Int8Array
//   float16  Uint16Array (raw IEEE half bits)          int16  Int16Array
//   bfloat16 Uint16Array (raw bfloat16 bits)           bool   Uint8Array (0/1)
//
// Tensors kept on the server are handles {id, dtype, shape, strides, device,
// bytes, ...}; pass a handle (or {ref: id}) wherever a tensor goes.

// ---- dtypes ----------------------------------------------------------------

/** Every dtype the server knows: element size, TypedArray, kind. */
export const DTYPES = Object.freeze({
  bool: { size: 1, array: Uint8Array, kind: "bool", oip: "BOOL" },
  uint8: { size: 1, array: Uint8Array, kind: "int", oip: "UINT8" },
  int8: { size: 1, array: Int8Array, kind: "int", oip: "INT8" },
  int16: { size: 2, array: Int16Array, kind: "int", oip: "INT16" },
  int32: { size: 4, array: Int32Array, kind: "int", oip: "INT32" },
  int64: { size: 8, array: BigInt64Array, kind: "int64", oip: "INT64" },
  float16: { size: 2, array: Uint16Array, kind: "half", oip: "FP16" },
  bfloat16: { size: 2, array: Uint16Array, kind: "bhalf", oip: "BF16" },
  float32: { size: 4, array: Float32Array, kind: "float", oip: "FP32" },
  float64: { size: 8, array: Float64Array, kind: "float", oip: "FP64" },
});

const DTYPE_ALIASES = {
  float: "float32", double: "float64", half: "float16", long: "int64", int: "int32",
  short: "int16", byte: "uint8", char: "int8", float32: "float32", float64: "float64",
};
for (const [name, d] of Object.entries(DTYPES)) DTYPE_ALIASES[d.oip.toLowerCase()] = name;

/** The canonical dtype name ("float32") of a torch name, alias or OIP name. */
export function normalizeDtype(name) {
  if (typeof name !== "string") throw new TypeError(`dtype must be a string, not ${typeof name}`);
  let n = name.trim();
  if (n.startsWith("torch.")) n = n.slice(6);
  if (Object.prototype.hasOwnProperty.call(DTYPES, n)) return n;
  const a = DTYPE_ALIASES[n.toLowerCase()];
  if (a) return a;
  throw new TypeError(`unknown dtype '${name}' (expected one of ${Object.keys(DTYPES).join(", ")})`);
}

/** The number of elements of a shape. */
export function numel(shape) {
  let n = 1;
  for (const s of shape) n *= s;
  return n;
}

// ---- float16 / bfloat16 bits -----------------------------------------------

const F64 = new Float64Array(1);
const F64_U32 = new Uint32Array(F64.buffer);
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function exponentOf(x) {
  // floor(log2(x)) for a finite positive double, exactly
  F64[0] = x;
  const hi = F64_U32[LITTLE_ENDIAN ? 1 : 0];
  const biased = (hi >>> 20) & 0x7ff;
  if (biased !== 0) return biased - 1023;
  let e = Math.floor(Math.log2(x)); // subnormal double
  if (2 ** e > x) e--;
  else if (2 ** (e + 1) <= x) e++;
  return e;
}

// A double rounded (to nearest, ties to even) to a binary format with eb
// exponent bits and mb mantissa bits; overflow gives infinity, NaN a quiet NaN.
function toBits(x, eb, mb) {
  const expMax = (1 << eb) - 1;
  const bias = (1 << (eb - 1)) - 1;
  x = Number(x);
  if (Number.isNaN(x)) return (expMax << mb) | (1 << (mb - 1));
  let sign = 0;
  if (x < 0 || Object.is(x, -0)) {
    sign = 1 << (eb + mb);
    x = -x;
  }
  if (x === Infinity) return sign | (expMax << mb);
  if (x === 0) return sign;
  let e = exponentOf(x);
  if (e < 1 - bias) e = 1 - bias; // subnormal range: fixed quantum
  const m = x / 2 ** (e - mb); // exact: a power-of-two scaling
  const f = Math.floor(m);
  const d = m - f;
  let r = d > 0.5 ? f + 1 : d < 0.5 ? f : f + (f % 2);
  if (r >= 2 ** (mb + 1)) {
    e += 1;
    r /= 2;
  }
  if (e + bias >= expMax) return sign | (expMax << mb);
  return sign | (((e + bias - 1) * 2 ** mb + r) >>> 0);
}

function fromBits(bits, eb, mb) {
  const expMax = (1 << eb) - 1;
  const bias = (1 << (eb - 1)) - 1;
  const sign = bits >>> (eb + mb) & 1 ? -1 : 1;
  const ex = (bits >>> mb) & expMax;
  const man = bits & ((1 << mb) - 1);
  if (ex === expMax) return man ? NaN : sign * Infinity;
  if (ex === 0) return sign * man * 2 ** (1 - bias - mb);
  return sign * (2 ** mb + man) * 2 ** (ex - bias - mb);
}

/** IEEE half bits (0..65535) of a number, rounded to nearest even. */
export const floatToHalfBits = (x) => toBits(x, 5, 10);
/** The number that IEEE half bits hold (exact). */
export const halfBitsToFloat = (b) => fromBits(b, 5, 10);
/** bfloat16 bits of a number, rounded to nearest even. */
export const floatToBfloat16Bits = (x) => toBits(x, 8, 7);
/** The number that bfloat16 bits hold (exact). */
export const bfloat16BitsToFloat = (b) => fromBits(b, 8, 7);

// ---- tensors ---------------------------------------------------------------

/** A JSON float argument: `float(2)` is sent as `2.0` (a float Scalar, not an int). */
export class Float {
  constructor(value) {
    this.value = Number(value);
  }
}
export const float = (value) => new Float(value);

function isTypedArray(v) {
  return ArrayBuffer.isView(v) && !(v instanceof DataView);
}

function flatten(data, out = []) {
  if (Array.isArray(data)) for (const x of data) flatten(x, out);
  else if (isTypedArray(data)) for (const x of data) out.push(x);
  else out.push(data);
  return out;
}

function nestedShape(data) {
  const shape = [];
  let d = data;
  while (Array.isArray(d)) {
    shape.push(d.length);
    d = d[0];
  }
  if (isTypedArray(d)) shape.push(d.length);
  return shape;
}

function num(v) {
  // a JSON element as a number: numbers, "NaN"/"Infinity"/"-Infinity", bigints, bools
  if (typeof v === "number") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  return Number(v);
}

function toInt64(v) {
  if (typeof v === "bigint") return v;
  if (typeof v === "boolean") return v ? 1n : 0n;
  if (typeof v === "string") return BigInt(v);
  if (!Number.isInteger(v)) throw new TypeError(`int64 element ${v} is not an integer`);
  return BigInt(v);
}

/** A TypedArray of the dtype's kind holding the values (numbers, bools, bigints). */
function typedFrom(dtype, values) {
  const d = DTYPES[dtype];
  switch (d.kind) {
    case "int64": return BigInt64Array.from(values, toInt64);
    case "bool": return Uint8Array.from(values, (v) => (num(v) ? 1 : 0));
    case "half": return Uint16Array.from(values, (v) => floatToHalfBits(num(v)));
    case "bhalf": return Uint16Array.from(values, (v) => floatToBfloat16Bits(num(v)));
    default: return d.array.from(values, (v) => (typeof v === "bigint" ? Number(v) : num(v)));
  }
}

/**
 * A tensor {dtype, shape, data}. `data`: a TypedArray of the dtype's array
 * type (used as is; for float16/bfloat16 a Uint16Array of raw bits), any
 * other TypedArray or a flat or nested array of values (converted: numbers
 * to half bits for float16/bfloat16, to BigInt for int64), one number (a
 * 0-dim tensor when shape is [] or absent), or absent (zeros).
 * `shape` may be omitted (then taken from nested data, or [n] for flat data).
 */
export function tensor(dtype, shape, data, { requiresGrad } = {}) {
  dtype = normalizeDtype(dtype);
  const d = DTYPES[dtype];
  if (shape == null) {
    if (data == null) throw new TypeError("tensor: a shape or data is needed");
    shape = typeof data === "object" ? nestedShape(data) : [];
  }
  shape = Array.from(shape, (s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 0) throw new TypeError(`tensor: bad size ${s} in shape`);
    return n;
  });
  const n = numel(shape);
  let arr;
  if (data == null) arr = new d.array(n);
  else if (data instanceof d.array) arr = data;
  else if (typeof data !== "object") arr = typedFrom(dtype, [data]);
  else arr = typedFrom(dtype, flatten(data));
  if (arr.length !== n) {
    throw new TypeError(`tensor: data has ${arr.length} elements but shape [${shape.join(", ")}] needs ${n}`);
  }
  const t = { dtype, shape, data: arr };
  if (requiresGrad) t.requiresGrad = true;
  return t;
}

/**
 * A tensor from nested arrays, inferring like torch.tensor: all booleans
 * give bool, all integers (or bigints) int64, anything else float32
 * (unless `dtype` is given).
 */
export function fromNested(array, dtype) {
  const shape = typeof array === "object" ? nestedShape(array) : [];
  const flat = typeof array === "object" ? flatten(array) : [array];
  if (dtype == null) {
    if (flat.length && flat.every((v) => typeof v === "boolean")) dtype = "bool";
    else if (flat.length && flat.every((v) => typeof v === "bigint" || Number.isInteger(v))) dtype = "int64";
    else dtype = "float32";
  }
  return tensor(dtype, shape, flat);
}

/**
 * The elements of a tensor as plain JS values, flat: numbers (float16 and
 * bfloat16 decoded), booleans for bool, BigInts for int64 (numbers with
 * {bigint: false}).
 */
export function toArray(t, { bigint = true } = {}) {
  const kind = DTYPES[normalizeDtype(t.dtype)].kind;
  const src = t.data;
  const out = new Array(src.length);
  for (let i = 0; i < src.length; i++) {
    const v = src[i];
    out[i] = kind === "half" ? halfBitsToFloat(v)
      : kind === "bhalf" ? bfloat16BitsToFloat(v)
        : kind === "bool" ? v !== 0
          : kind === "int64" && !bigint ? Number(v) : v;
  }
  return out;
}

/** The elements of a tensor as numbers in a Float64Array (float16 decoded, int64 and bool converted). */
export function toFloat64Array(t) {
  return Float64Array.from(toArray(t, { bigint: false }), (v) => (typeof v === "boolean" ? +v : v));
}

/** A tensor's elements as nested arrays of its shape (a 0-dim tensor gives its one value). */
export function toNested(t, opts) {
  const flat = toArray(t, opts);
  const shape = t.shape;
  if (shape.length === 0) return flat[0];
  let i = 0;
  const build = (dim) => {
    const a = new Array(shape[dim]);
    for (let k = 0; k < shape[dim]; k++) a[k] = dim === shape.length - 1 ? flat[i++] : build(dim + 1);
    return a;
  };
  return build(0);
}

function isTensorLike(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !isTypedArray(v)
    && typeof v.dtype === "string" && Array.isArray(v.shape) && !("id" in v && v.data === undefined);
}

function isRef(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !isTypedArray(v)
    && v.data === undefined && (typeof v.ref === "string" || typeof v.id === "string");
}

// ---- JSON writing ----------------------------------------------------------

function numberText(x) {
  if (Number.isNaN(x)) return '"NaN"';
  if (x === Infinity) return '"Infinity"';
  if (x === -Infinity) return '"-Infinity"';
  if (Object.is(x, -0)) return "-0.0";
  return String(x);
}

function floatText(x) {
  const s = numberText(x);
  return Number.isFinite(x) && /^-?\d+$/.test(s) ? s + ".0" : s;
}

function dataText(t) {
  const kind = DTYPES[t.dtype].kind;
  const a = t.data;
  const n = a.length;
  if (kind === "int64" || kind === "int") return "[" + a.join(",") + "]";
  const parts = new Array(n);
  if (kind === "bool") for (let i = 0; i < n; i++) parts[i] = a[i] ? "true" : "false";
  else if (kind === "half") for (let i = 0; i < n; i++) parts[i] = numberText(halfBitsToFloat(a[i]));
  else if (kind === "bhalf") for (let i = 0; i < n; i++) parts[i] = numberText(bfloat16BitsToFloat(a[i]));
  else for (let i = 0; i < n; i++) parts[i] = numberText(a[i]);
  return "[" + parts.join(",") + "]";
}

function littleEndianBytes(a) {
  const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  if (LITTLE_ENDIAN || a.BYTES_PER_ELEMENT === 1) return bytes;
  const out = new Uint8Array(bytes.length);
  const w = a.BYTES_PER_ELEMENT;
  for (let i = 0; i < bytes.length; i += w) for (let k = 0; k < w; k++) out[i + k] = bytes[i + w - 1 - k];
  return out;
}

/**
 * Writes a request body. Values in `value` positions (args, kwargs, a
 * tensor, a gradient) recognise tensors and handles; `blobs` collects the
 * binary tensor data in header order when given; `shapeOnly` drops data
 * (explain).
 */
class Writer {
  constructor({ blobs = null, shapeOnly = false } = {}) {
    this.blobs = blobs;
    this.shapeOnly = shapeOnly;
    this.binaryBytes = 0;
  }

  plain(v) {
    if (v === null || v === undefined) return "null";
    switch (typeof v) {
      case "boolean": return v ? "true" : "false";
      case "number": return numberText(v);
      case "bigint": return v.toString();
      case "string": return JSON.stringify(v);
      default: break;
    }
    if (v instanceof Float) return floatText(v.value);
    if (Array.isArray(v)) return "[" + v.map((x) => this.plain(x)).join(",") + "]";
    if (isTypedArray(v)) return "[" + Array.from(v, (x) => this.plain(x)).join(",") + "]";
    return this.object(v, (x) => this.plain(x));
  }

  object(o, write) {
    const parts = [];
    for (const [k, x] of Object.entries(o)) if (x !== undefined) parts.push(JSON.stringify(k) + ":" + write(x));
    return "{" + parts.join(",") + "}";
  }

  value(v) {
    if (v === null || v === undefined || typeof v !== "object" || v instanceof Float) return this.plain(v);
    if (Array.isArray(v)) return "[" + v.map((x) => this.value(x)).join(",") + "]";
    if (isTypedArray(v)) return this.plain(v);
    if (isTensorLike(v)) return this.tensor(v);
    if (isRef(v)) return this.plain({ ref: typeof v.ref === "string" ? v.ref : v.id });
    return this.object(v, (x) => this.value(x));
  }

  tensor(t) {
    let dtype = t.dtype;
    let data = t.data;
    if (data !== undefined && !(isTypedArray(data) && data instanceof DTYPES[normalizeDtype(dtype)].array)) {
      data = tensor(dtype, t.shape, data).data; // plain arrays: convert
    }
    dtype = normalizeDtype(dtype);
    const shape = t.shape.map(Number);
    let s = '{"dtype":' + JSON.stringify(dtype) + ',"shape":[' + shape.join(",") + "]";
    if (t.requiresGrad || t.requires_grad) s += ',"requires_grad":true';
    if (this.shapeOnly || data === undefined) return s + "}";
    const n = numel(shape);
    if (data.length !== n) {
      throw new TypeError(`tensor data has ${data.length} elements but shape [${shape.join(", ")}] needs ${n}`);
    }
    if (this.blobs) {
      this.blobs.push(littleEndianBytes(data));
      this.binaryBytes += data.byteLength;
      return s + ',"parameters":{"binary_data_size":' + data.byteLength + "}}";
    }
    return s + ',"data":' + dataText({ dtype, data }) + "}";
  }
}

// Bytes of tensor data in a value (decides the transport).
function tensorBytes(v, depth = 0) {
  if (v === null || typeof v !== "object" || depth > 64) return 0;
  if (isTypedArray(v)) return 0;
  if (Array.isArray(v)) return v.reduce((a, x) => a + tensorBytes(x, depth + 1), 0);
  if (isTensorLike(v)) {
    if (v.data === undefined) return 0;
    return isTypedArray(v.data) ? v.data.byteLength : numel(v.shape) * DTYPES[normalizeDtype(v.dtype)].size;
  }
  let n = 0;
  for (const x of Object.values(v)) n += tensorBytes(x, depth + 1);
  return n;
}

// ---- JSON reading ----------------------------------------------------------

const BIG_MARK = "\u0000od-bigint:";

/**
 * JSON.parse, except that integers beyond 2^53 become BigInts (int64 data
 * stays exact). "NaN"/"Infinity" strings are left to the tensor decoder.
 */
export function parseJSON(text) {
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  let out = "";
  let last = 0;
  const n = text.length;
  let big = false;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) { // a string: skip it
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i);
        if (d === 92) i++;
        else if (d === 34) break;
      }
      continue;
    }
    if (c === 45 || (c >= 48 && c <= 57)) {
      let j = i + 1;
      let integer = true;
      for (; j < n; j++) {
        const d = text.charCodeAt(j);
        if (d >= 48 && d <= 57) continue;
        if (d === 46 || d === 101 || d === 69 || d === 43 || d === 45) { integer = false; continue; }
        break;
      }
      if (integer && j - i >= 16) {
        const tok = text.slice(i, j);
        if (!Number.isSafeInteger(Number(tok))) {
          out += text.slice(last, i) + '"\\u0000od-bigint:' + tok + '"';
          last = j;
          big = true;
        }
      }
      i = j - 1;
    }
  }
  if (!big) return JSON.parse(text);
  out += text.slice(last);
  return JSON.parse(out, (k, v) => (typeof v === "string" && v.startsWith(BIG_MARK) ? BigInt(v.slice(BIG_MARK.length)) : v));
}

// Where the JSON object at the start of bytes ends (for binary responses
// whose Inference-Header-Content-Length a browser does not expose).
function jsonPrefixLength(bytes) {
  let depth = 0;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (c === 34) {
      for (i++; i < bytes.length; i++) {
        if (bytes[i] === 92) i++;
        else if (bytes[i] === 34) break;
      }
    } else if (c === 123 || c === 91) depth++;
    else if (c === 125 || c === 93) {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  throw new OpdispatchError(0, "invalid_response", "binary response without a complete JSON header");
}

const utf8 = new TextDecoder();

// Decodes one output of a response: tensors to {dtype, shape, data}, kept
// outputs to handles, values to values. `take(n)` gives the next n binary bytes.
function decodeOutput(o, take) {
  if (o === null || typeof o !== "object") return o;
  if ("value" in o && !("shape" in o)) return o.value;
  if (typeof o.id === "string" && o.data === undefined && !(o.parameters && "binary_data_size" in o.parameters)) {
    return { ...o };
  }
  const dtype = normalizeDtype(o.dtype ?? o.datatype);
  const d = DTYPES[dtype];
  const shape = (o.shape ?? []).map(Number);
  const n = numel(shape);
  let data;
  if (o.parameters && "binary_data_size" in o.parameters) {
    const size = Number(o.parameters.binary_data_size);
    if (size !== n * d.size) {
      throw new OpdispatchError(0, "invalid_response", `binary_data_size ${size} does not fit ${dtype} [${shape}]`);
    }
    const bytes = take(size);
    const copy = new Uint8Array(size); // aligned, owned
    if (LITTLE_ENDIAN || d.size === 1) copy.set(bytes);
    else for (let i = 0; i < size; i += d.size) for (let k = 0; k < d.size; k++) copy[i + k] = bytes[i + d.size - 1 - k];
    data = new d.array(copy.buffer, 0, n);
  } else {
    let values = o.data;
    if (values === undefined) values = [];
    else if (!Array.isArray(values)) values = [values];
    else if (values.some(Array.isArray)) values = flatten(values);
    data = typedFrom(dtype, values);
    if (data.length !== n) {
      throw new OpdispatchError(0, "invalid_response", `output has ${data.length} elements, shape [${shape}] needs ${n}`);
    }
  }
  const t = { dtype, shape, data };
  if (o.name !== undefined) t.name = o.name;
  if (o.requires_grad) t.requiresGrad = true;
  return t;
}

// ---- errors ----------------------------------------------------------------

const STATUS_CODES = {
  400: "invalid_argument", 404: "not_found", 405: "method_not_allowed", 408: "request_timeout",
  409: "duplicate", 410: "gone", 413: "too_large", 415: "unsupported_media_type", 422: "mismatch",
  500: "internal", 501: "no_kernel", 503: "unavailable", 504: "deadline_exceeded", 507: "out_of_memory",
};

/** An error answer of the server ({"error": {"code", "message"}}), or a failed request (status 0). */
export class OpdispatchError extends Error {
  constructor(status, code, message, { body, headers, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "OpdispatchError";
    this.status = status;
    this.code = code;
    if (body !== undefined) this.body = body;
    // the response headers (Retry-After, Allow), kept out of printed errors
    if (headers !== undefined) Object.defineProperty(this, "headers", { value: headers, enumerable: false });
  }
}

async function errorFrom(resp) {
  let text = "";
  try {
    text = await resp.text();
  } catch { /* the body is lost */ }
  let body;
  let code = STATUS_CODES[resp.status] ?? "http_error";
  let message = text || resp.statusText || `HTTP ${resp.status}`;
  try {
    body = JSON.parse(text);
    const e = body?.error;
    if (e && typeof e === "object") {
      if (typeof e.code === "string") code = e.code;
      if (typeof e.message === "string") message = e.message;
    } else if (typeof e === "string") {
      message = e;
    }
  } catch { /* not JSON */ }
  return new OpdispatchError(resp.status, code, message, { body: body ?? text, headers: resp.headers });
}

// ---- the client ------------------------------------------------------------

const BIN = "application/octet-stream";
const JSON_CT = "application/json";

function opPath(name) {
  if (typeof name !== "string" || !name) throw new TypeError("an operator name is needed");
  return encodeURIComponent(name).replace(/%3A/gi, ":");
}

function idOf(x) {
  if (typeof x === "string") return x;
  if (x && typeof x === "object") {
    if (typeof x.id === "string") return x.id;
    if (typeof x.ref === "string") return x.ref;
  }
  throw new TypeError("a stored tensor id or handle is needed");
}

/**
 * A client of one opdispatchd.
 *
 * new Client(url, {session, device, binaryThreshold, timeout, headers, fetch})
 *   session          X-OD-Session for stored tensors (default: the server's
 *                    shared session "default")
 *   device           default device of calls ("cpu", "cuda", "cuda:1", "auto")
 *   binaryThreshold  tensor bytes in a request from which the binary
 *                    extension is used (default 1024); below it, JSON
 *   timeout          milliseconds per request (default none)
 *   headers          extra headers for every request
 *   fetch            a fetch implementation (default globalThis.fetch)
 */
export class Client {
  constructor(url = "http://127.0.0.1:8000", opts = {}) {
    this.url = String(url).replace(/\/+$/, "");
    this.session = opts.session ?? null;
    this.device = opts.device ?? null;
    this.binaryThreshold = opts.binaryThreshold ?? 1024;
    this.timeout = opts.timeout ?? null;
    this.headers = { ...(opts.headers ?? {}) };
    const f = opts.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("no fetch available: pass {fetch}");
    this._fetch = opts.fetch ? f : f.bind(globalThis);
    /** The dispatch record of the last call (an array, one per step, after run()). */
    this.lastDispatch = null;
    /** What the modes of the last call or program reported. */
    this.lastModes = null;
    /** The last call's or program's whole response header (outputs decoded). */
    this.lastResponse = null;
  }

  /** A client for another session of the same server (same options). */
  withSession(session) {
    const c = Object.create(Object.getPrototypeOf(this));
    Object.assign(c, this, { session, lastDispatch: null, lastModes: null, lastResponse: null });
    return c;
  }

  // -- transport --

  /**
   * One request. `body`: a string (JSON) or {header, blobs} (binary).
   * Answers {header (parsed JSON), blobs: take} for JSON and binary
   * responses, or text.
   */
  async request(method, path, { body, accept, text = false, headers: extra } = {}) {
    const headers = { ...this.headers, ...(extra ?? {}) };
    if (this.session) headers["X-OD-Session"] = this.session;
    if (accept) headers.Accept = accept;
    let payload;
    if (typeof body === "string") {
      headers["Content-Type"] = JSON_CT;
      payload = body;
    } else if (body) {
      const head = new TextEncoder().encode(body.header);
      let size = head.length;
      for (const b of body.blobs) size += b.length;
      payload = new Uint8Array(size);
      payload.set(head, 0);
      let off = head.length;
      for (const b of body.blobs) {
        payload.set(b, off);
        off += b.length;
      }
      headers["Content-Type"] = BIN;
      headers["Inference-Header-Content-Length"] = String(head.length);
    }
    const init = { method, headers };
    if (payload !== undefined) init.body = payload;
    if (this.timeout && typeof AbortSignal !== "undefined" && AbortSignal.timeout) {
      init.signal = AbortSignal.timeout(this.timeout);
    }
    let resp;
    try {
      resp = await this._fetch(this.url + path, init);
    } catch (e) {
      throw new OpdispatchError(0, "network_error", `${method} ${this.url + path}: ${e?.message ?? e}`, { cause: e });
    }
    if (!resp.ok) throw await errorFrom(resp);
    if (text) return resp.text();
    const ct = (resp.headers.get("Content-Type") || "").toLowerCase();
    const hl = resp.headers.get("Inference-Header-Content-Length");
    if (hl !== null || ct.startsWith(BIN)) {
      const bytes = new Uint8Array(await resp.arrayBuffer());
      const len = hl !== null ? Number(hl) : jsonPrefixLength(bytes);
      if (!(len >= 0 && len <= bytes.length)) {
        throw new OpdispatchError(0, "invalid_response", `Inference-Header-Content-Length ${hl} does not fit the body`);
      }
      const header = parseJSON(utf8.decode(bytes.subarray(0, len)));
      let off = len;
      const take = (n) => {
        if (off + n > bytes.length) throw new OpdispatchError(0, "invalid_response", "binary response data is short");
        const b = bytes.subarray(off, off + n);
        off += n;
        return b;
      };
      return { header, take, binary: true };
    }
    const t = await resp.text();
    const header = t ? parseJSON(t) : null;
    return { header, take: () => { throw new OpdispatchError(0, "invalid_response", "no binary data in a JSON response"); }, binary: false };
  }

  async getJSON(path) {
    return (await this.request("GET", path)).header;
  }

  _useBinary(binary, bytes) {
    if (binary === true || binary === false) return binary;
    return bytes >= this.binaryThreshold;
  }

  // Writes a body object whose `valueKeys` hold tensors ("kwargs": an
  // object of them); the rest is plain JSON.
  _body(fields, valueKeys, binary, shapeOnly = false) {
    const w = new Writer({ blobs: binary ? [] : null, shapeOnly });
    const parts = [];
    for (const [k, v] of Object.entries(fields)) {
      if (v === undefined) continue;
      let text;
      if (!valueKeys.includes(k)) text = w.plain(v);
      else if (k === "kwargs" && v !== null && typeof v === "object") text = w.object(v, (x) => w.value(x));
      else text = w.value(v);
      parts.push(JSON.stringify(k) + ":" + text);
    }
    const header = "{" + parts.join(",") + "}";
    return binary ? { header, blobs: w.blobs } : header;
  }

  _callFields(args, kwargs, opts) {
    if (args === undefined || args === null) args = [];
    else if (!Array.isArray(args)) args = [args];
    const f = { args };
    if (kwargs && Object.keys(kwargs).length) f.kwargs = kwargs;
    const device = opts.device ?? this.device;
    if (device) f.device = device;
    if (opts.keep) f.keep = true;
    if (opts.gradMode ?? opts.grad_mode) f.grad_mode = opts.gradMode ?? opts.grad_mode;
    if (opts.modes) f.modes = opts.modes;
    if (opts.vmap) f.vmap = opts.vmap;
    if (opts.autocast) f.autocast = opts.autocast;
    if (opts.outputs) f.outputs = opts.outputs;
    return f;
  }

  // -- operators --

  /**
   * Calls an operator: `call("add", [a, b], {alpha: 2})`.
   *
   * args/kwargs hold tensors ({dtype, shape, data}), handles or {ref: id},
   * numbers (`float(2)` sends 2.0), bigints, booleans, strings, arrays, null.
   * opts: device, binary (true/false; default: binary when the tensors
   * passed hold at least binaryThreshold bytes), binaryOutput (default: as
   * the request), keep (outputs stay in the session; handles come back),
   * gradMode ("no_grad", "inference_mode"), modes (["trace", "profile",
   * {override: {...}}]), vmap ({in_dims, out_dims, randomness}), autocast
   * ("bfloat16", "float16"), outputs (an output selection), full (answer
   * {op, outputs, dispatch, modes} instead of the outputs).
   *
   * Answers the one output, or an array when the operator returns several.
   */
  async call(name, args = [], kwargs = undefined, opts = {}) {
    const fields = this._callFields(args, kwargs, opts);
    const binary = this._useBinary(opts.binary, tensorBytes(fields.args) + tensorBytes(Object.values(fields.kwargs ?? {})));
    const binaryOutput = opts.binaryOutput ?? binary;
    if (binaryOutput && !opts.keep) fields.parameters = { binary_data_output: true };
    const body = this._body(fields, ["args", "kwargs"], binary);
    const r = await this.request("POST", `/v1/ops/${opPath(name)}`, { body });
    return this._result(r, opts.full);
  }

  _result(r, full) {
    const h = r.header;
    const outputs = (h.outputs ?? []).map((o) => decodeOutput(o, r.take));
    const res = { ...h, outputs };
    this.lastResponse = res;
    this.lastDispatch = h.dispatch ?? null;
    this.lastModes = h.modes ?? null;
    if (full) return res;
    // a Tensor[] return (split, unbind: entries with "index") stays a list, even of one
    if ((h.outputs ?? []).some((o) => o && typeof o === "object" && "index" in o)) return outputs;
    return outputs.length === 1 ? outputs[0] : outputs;
  }

  /** Which key and kernel a call would reach and its output shapes, without running it (tensors need only dtype and shape). */
  async explain(name, args = [], kwargs = undefined, opts = {}) {
    const fields = this._callFields(args, kwargs, opts);
    const body = this._body(fields, ["args", "kwargs"], false, true);
    const r = await this.request("POST", `/v1/ops/${opPath(name)}/explain`, { body });
    return r.header;
  }

  /**
   * Runs a program (POST /v1/run) in one round trip:
   *   {steps: [{op, args, kwargs} | {backward: "$k", gradient, retain_graph}],
   *    outputs: ["$1", "$2.0"], keep: ["$2"], device, gradMode, modes, vmap, autocast}
   * A step's argument {ref: "$k"} is step k's first output ("$k.i" its
   * output i); other refs and handles are stored tensors of the session.
   * opts: binary, binaryOutput as for call().
   * Answers {outputs (decoded, in order), results (by name), kept, grads,
   * dispatch (one record per step), modes, steps}.
   */
  async run(program, opts = {}) {
    if (Array.isArray(program)) program = { steps: program };
    const p = { ...program };
    if (p.gradMode !== undefined) {
      p.grad_mode = p.gradMode;
      delete p.gradMode;
    }
    const device = p.device ?? this.device;
    if (device) p.device = device;
    const steps = p.steps ?? [];
    const binary = this._useBinary(opts.binary, tensorBytes(steps));
    const binaryOutput = opts.binaryOutput ?? binary;
    if (binaryOutput) p.parameters = { ...(p.parameters ?? {}), binary_data_output: true };
    const body = this._body(p, ["steps"], binary);
    const r = await this.request("POST", "/v1/run", { body });
    const res = this._result(r, true);
    res.results = {};
    for (const o of res.outputs) if (o && typeof o === "object" && typeof o.name === "string") res.results[o.name] = o;
    return res;
  }

  /** Every operator with its overloads, schemas and kernels (GET /v1/ops). */
  ops() {
    return this.getJSON("/v1/ops");
  }

  /** One operator: schema, computed dispatch table, registrations (or {name, overloads}). */
  op(name) {
    return this.getJSON(`/v1/ops/${opPath(name)}`);
  }

  /** PyTorch's two text dumps of an operator (_dispatch_dump_table and _dispatch_dump). */
  dump(name) {
    return this.request("GET", `/v1/ops/${opPath(name)}?format=text`, { text: true });
  }

  /** Runtime and alias dispatch keys, and the request TLS sets. */
  keys() {
    return this.getJSON("/v1/keys");
  }

  /** CPU, BLAS and CUDA devices. */
  devices() {
    return this.getJSON("/v1/devices");
  }

  /** Per-operator, per-key and per-route statistics. */
  stats() {
    return this.getJSON("/v1/stats");
  }

  /** Starts the statistics over. */
  resetStats() {
    return this.request("POST", "/v1/stats/reset").then((r) => r.header);
  }

  /** Prometheus text. */
  metrics() {
    return this.request("GET", "/metrics", { text: true });
  }

  /** The server's name, version and endpoints (GET /). */
  index() {
    return this.getJSON("/");
  }

  /** True when GET /v2/health/ready answers 200. */
  async ready() {
    try {
      await this.request("GET", "/v2/health/ready", { text: true });
      return true;
    } catch (e) {
      if (e instanceof OpdispatchError) return false;
      throw e;
    }
  }

  // -- stored tensors --

  /**
   * Stores a tensor in the session (POST /v1/tensors). Answers its handle
   * {id, dtype, shape, strides, device, bytes, contiguous, requires_grad, ...}.
   * opts: device, requiresGrad, binary.
   */
  async put(t, opts = {}) {
    if (!isTensorLike(t) || t.data === undefined) throw new TypeError("put: a tensor {dtype, shape, data} is needed");
    if (opts.requiresGrad) t = { ...t, requiresGrad: true };
    const binary = this._useBinary(opts.binary, tensorBytes(t));
    const device = opts.device ?? this.device;
    const body = this._body({ tensor: t, device: device ?? undefined }, ["tensor"], binary);
    return (await this.request("POST", "/v1/tensors", { body })).header;
  }

  /** A stored tensor's data as a tensor (binary transfer unless {binary: false}). */
  async get(id, opts = {}) {
    const binary = opts.binary ?? true;
    const r = await this.request("GET", `/v1/tensors/${encodeURIComponent(idOf(id))}${binary ? "?binary=1" : ""}`);
    const outs = (r.header.outputs ?? []).map((o) => decodeOutput(o, r.take));
    return outs.length === 1 ? outs[0] : outs;
  }

  /** A stored tensor's metadata (requires_grad, grad_fn, grad, shares_storage_with, ...). */
  meta(id) {
    return this.getJSON(`/v1/tensors/${encodeURIComponent(idOf(id))}?meta=1`);
  }

  /** Frees a stored tensor. */
  async delete(id) {
    return (await this.request("DELETE", `/v1/tensors/${encodeURIComponent(idOf(id))}`)).header;
  }

  /** The session's stored tensors (handles). */
  async tensors() {
    return (await this.getJSON("/v1/tensors")).tensors;
  }

  /**
   * Runs a stored tensor's graph backward (tensor.backward()).
   * opts: gradient (a tensor or handle; needed when the root has more than
   * one element), retainGraph. Answers {id, grads: [{id, grad: handle}]}:
   * each leaf's .grad is stored, and keeps its id across passes.
   */
  async backward(id, opts = {}) {
    const fields = {};
    if (opts.gradient !== undefined) fields.gradient = opts.gradient;
    if (opts.retainGraph ?? opts.retain_graph) fields.retain_graph = true;
    const body = this._body(fields, ["gradient"], false);
    return (await this.request("POST", `/v1/tensors/${encodeURIComponent(idOf(id))}/backward`, { body })).header;
  }

  /** The .grad of a stored leaf as a tensor, or null when it has none. */
  async grad(id) {
    const m = await this.meta(id);
    return m.grad ? this.get(m.grad) : null;
  }

  // -- sessions --

  /** Makes a session with a random id and uses it from now on (unless {use: false}). */
  async newSession({ use = true } = {}) {
    const s = await this.request("POST", "/v1/sessions").then((r) => r.header);
    if (use) this.session = s.id;
    return s;
  }

  /** A session's tensor ids, count, bytes per device type and budget. */
  sessionInfo(id = this.session ?? "default") {
    return this.getJSON(`/v1/sessions/${encodeURIComponent(id)}`);
  }

  /** Frees a session and every tensor in it (this client's session by default). */
  async deleteSession(id = this.session ?? "default") {
    const r = (await this.request("DELETE", `/v1/sessions/${encodeURIComponent(id)}`)).header;
    if (id === this.session) this.session = null;
    return r;
  }
}

export default Client;
