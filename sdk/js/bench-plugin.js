// What every JavaScript bench plugin repeats, in one small module.
//
// Copy this file next to your plugin (`bench plugin new --lang js` does), import it with
// `import { ... } from './bench-plugin.js'` and build with componentize-js against bench's
// `wit/` (`-d http fetch-event`: bench gives plugins no network). It works in a dataset
// and in a backend plugin alike.
//
// - Errors: `throw invalidConfig(...)`, `invalidInput(...)` or `unsupported(...)` fail a
//   call with that kind of plugin-error; `guard(Class)` turns any other exception into an
//   `internal` error carrying its message and stack, which bench shows under the plugin's
//   name. Without it, a thrown `Error` reaches componentize-js as an error without a kind
//   and the user reads "invalid variant tag value undefined" instead of the message.
// - Options: declare them once with `option(...)` (the list `describe` returns) and read
//   `config.options` with `readOptions`, which parses each value by its kind, applies the
//   defaults and refuses a key the plugin does not declare, naming it.
// - `readText` reads the file bench granted (`--dataset-path`) through wasi:filesystem
//   (JavaScript has no `open`); `request` builds a request spec from the three fields that
//   matter, the rest defaulted; `stringSpan` finds a JSON string's bytes for `decode`.
// - Datasets: `nextBatch` returns samples, each a request with what a right answer to it
//   is: `samples(requests)` for an ordinary dataset, `samples(requests, references)` or
//   `sample(request, reference)` for one that grades answers. The `dataset` object exports
//   `grade` next to `describe`: `grade: ungraded` answers `unsupported`, and a grading
//   dataset returns `verdict(correct, extracted)`.

import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';

/** An option or the configuration is wrong: `throw invalidConfig('...')`. */
export const invalidConfig = (message) => ({ tag: 'invalid-config', val: message });
/** The input data is wrong (name the file and line): `throw invalidInput('...')`. */
export const invalidInput = (message) => ({ tag: 'invalid-input', val: message });
/** The plugin does not support what was asked: `throw unsupported('...')`. */
export const unsupported = (message) => ({ tag: 'unsupported', val: message });

const ERROR_KINDS = new Set(['invalid-config', 'invalid-input', 'unsupported', 'internal']);

/** The contract's methods and functions that return a result, so can fail with a
 * plugin-error. */
const FALLIBLE = ['open', 'nextBatch', 'nextTurn', 'grade', 'buildRequest', 'decode'];

/**
 * Wraps a function so that any exception it throws becomes an `internal` plugin-error
 * with the exception's message and stack; errors made by `invalidConfig` and its
 * siblings pass through unchanged.
 */
export function guardFunction(fn) {
  return function guarded(...args) {
    try {
      return fn.apply(this, args);
    } catch (e) {
      if (e !== null && typeof e === 'object' && ERROR_KINDS.has(e.tag)) throw e;
      const message = e instanceof Error ? `${e}\n${e.stack ?? ''}`.trimEnd() : `thrown: ${String(e)}`;
      throw { tag: 'internal', val: message };
    }
  };
}

/** Applies `guardFunction` to a resource class's fallible contract methods (`open`,
 * `nextBatch`, `nextTurn`, `buildRequest`, `decode`), static or not, and returns the
 * class. On an interface's export object (`guard({ describe() {...}, grade(...) {...},
 * RequestSource })`) it wraps its `grade` the same way and returns the object. */
export function guard(cls) {
  for (const owner of [cls, cls.prototype]) {
    // A plain object has no prototype property: its own functions are all there is.
    if (owner === undefined || owner === null) continue;
    for (const name of FALLIBLE) {
      if (Object.hasOwn(owner, name) && typeof owner[name] === 'function') {
        owner[name] = guardFunction(owner[name]);
      }
    }
  }
  return cls;
}

const PARSERS = {
  text: (v) => v,
  count: (v) => (/^\d+$/.test(v) ? Number(v) : undefined),
  integer: (v) => (/^[-+]?\d+$/.test(v) ? Number(v) : undefined),
  number: (v) => (v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : undefined),
  switch: (v) => ({ true: true, false: false })[v.toLowerCase()],
};

/**
 * One option of `describe`'s list: `--dataset-option NAME=VALUE` (or `--backend-option`),
 * and `--FLAG` when `flag` is given. `kind` is 'text', 'count', 'integer', 'number' or
 * 'switch'; `shared` lists the general flags ('output-len', 'input-len') that set it too.
 */
export function option(name, description, { defaultValue, kind = 'text', flag, required = false, choices = [], shared = [] } = {}) {
  return {
    name,
    description,
    defaultValue: defaultValue === undefined ? undefined : String(defaultValue),
    required,
    cliFlag: flag,
    kind,
    choices,
    sharedFlags: shared,
  };
}

/**
 * The values of `given` (`config.options`, [key, value] pairs) by name, parsed by each
 * declared option's kind, with the declared defaults for those not given (undefined where
 * there is none). A key not declared, a required option missing or a value of the wrong
 * kind throws `invalidConfig` naming the plugin and the key.
 */
export function readOptions(plugin, given, declared) {
  const byName = new Map(declared.map((o) => [o.name, o]));
  const values = new Map();
  for (const [key, value] of given) {
    if (!byName.has(key)) {
      const known = [...byName.keys()].join(', ') || 'none';
      throw invalidConfig(`${plugin}: unknown option '${key}' (known: ${known})`);
    }
    values.set(key, value);
  }
  const parsed = {};
  for (const [name, info] of byName) {
    const text = values.get(name) ?? info.defaultValue;
    if (text === undefined) {
      if (info.required) throw invalidConfig(`${plugin}: option '${name}' is required`);
      parsed[name] = undefined;
      continue;
    }
    const value = PARSERS[info.kind](text);
    if (value === undefined) {
      throw invalidConfig(`${plugin}: option '${name}' takes a ${info.kind}, got '${text}'`);
    }
    parsed[name] = value;
  }
  return parsed;
}

/**
 * The text of `path` (`config.path`: bench grants `--dataset-path` read-only, as a
 * wasi:filesystem preopen). No path, or a file that cannot be read, throws
 * `invalidConfig` naming it.
 */
export function readText(plugin, path) {
  if (path === undefined) throw invalidConfig(`${plugin}: needs --dataset-path`);
  for (const [dir, name] of getDirectories()) {
    const prefix = name.endsWith('/') ? name : `${name}/`;
    if (!path.startsWith(prefix)) continue;
    try {
      const file = dir.openAt({}, path.slice(prefix.length), {}, { read: true });
      const size = Number(file.stat().size);
      const stream = file.readViaStream(0n);
      const bytes = new Uint8Array(size);
      let got = 0;
      while (got < size) {
        const chunk = stream.blockingRead(BigInt(size - got));
        if (chunk.length === 0) break;
        bytes.set(chunk, got);
        got += chunk.length;
      }
      return new TextDecoder().decode(bytes.subarray(0, got));
    } catch (e) {
      throw invalidConfig(`${plugin}: cannot read ${path}: ${e?.payload ?? e}`);
    }
  }
  throw invalidConfig(`${plugin}: cannot read ${path}: not granted to the plugin`);
}

/**
 * A request spec: a text `prompt` (or a `{tag, val}` prompt), its length in tokens and
 * the output tokens to ask for; any other field of `request-spec` (`loraName`,
 * `extraBody`, `sendAt`, `outputConstraint`, ...) in `fields`.
 */
export function request(prompt, promptLen, expectedOutputLen, fields = {}) {
  return {
    prompt: typeof prompt === 'string' ? { tag: 'text', val: prompt } : prompt,
    promptLen,
    expectedOutputLen,
    multimodal: [],
    requestId: undefined,
    loraName: undefined,
    extraBody: undefined,
    sendAt: undefined,
    session: undefined,
    outputConstraint: undefined,
    ...fields,
  };
}

/**
 * One of the samples `nextBatch` returns: a request spec (`request(...)`) and, for a
 * dataset that grades answers, its `reference`, the text `grade` gets back with the
 * response (a final number, a letter). Undefined, the default, leaves the request
 * ungraded: bench never sends the reference to the server, and asks `grade` only about
 * requests that had one.
 */
export function sample(request, reference = undefined) {
  return { request, reference: reference ?? undefined };
}

/**
 * `nextBatch`'s list from an array of request specs: ungraded (an ordinary dataset:
 * `return samples(batch)`), or each with the reference at the same position of
 * `references` (undefined there leaves that one ungraded).
 */
export function samples(requests, references = undefined) {
  if (references === undefined) return requests.map((r) => sample(r));
  if (references.length !== requests.length) {
    throw new Error(`samples: ${requests.length} requests but ${references.length} references`);
  }
  return requests.map((r, i) => sample(r, references[i]));
}

/**
 * What `grade` returns: whether the answer is right, what the grader read as the answer
 * (undefined when it found none: bench counts an invalid answer) and a score from 0 to
 * 1, by default 1 when right and 0 when wrong (a grader without partial credit).
 */
export function verdict(correct, extracted = undefined, score = undefined) {
  return {
    correct: Boolean(correct),
    score: score ?? (correct ? 1 : 0),
    extracted: extracted ?? undefined,
  };
}

/**
 * `grade` for a dataset that knows no right answers: `grade: ungraded` in the `dataset`
 * export object. componentize-js needs every function of the interface exported; bench
 * only asks about samples that carried a reference, so this answers `unsupported` to a
 * call that should not happen.
 */
export function ungraded(_reference, _output) {
  throw unsupported('this dataset does not grade answers (its samples carry no reference)');
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const isSpace = (b) => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;

/**
 * Where the string value of `"key":` is in the frame `buffer[start:end]`, as a backend's
 * `decode` reports a text: `[offset, length, escaped]` with the offset into the whole
 * `buffer` (spans are never frame-relative), `escaped` when the literal holds a backslash
 * escape for bench to decode. Undefined when the frame has no such key with a string
 * value. It takes the first match: name a key that occurs once per frame.
 */
export function stringSpan(buffer, start, end, key) {
  const needle = new TextEncoder().encode(`"${key}"`);
  const frame = buffer.subarray(0, end);
  for (let at = indexOf(frame, needle, start); at >= 0; at = indexOf(frame, needle, at + 1)) {
    let i = at + needle.length;
    while (i < end && isSpace(buffer[i])) i++;
    if (buffer[i] !== 0x3a) continue; // not a key (the same text as a value)
    i++;
    while (i < end && isSpace(buffer[i])) i++;
    if (buffer[i] !== QUOTE) return undefined;
    const first = ++i;
    let escaped = false;
    while (i < end && buffer[i] !== QUOTE) {
      if (buffer[i] === BACKSLASH) {
        escaped = true;
        i++;
      }
      i++;
    }
    return i < end ? [first, i - first, escaped] : undefined;
  }
  return undefined;
}

function indexOf(bytes, needle, from) {
  outer: for (let i = from; i + needle.length <= bytes.length; i++) {
    for (let j = 0; j < needle.length; j++) if (bytes[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}
