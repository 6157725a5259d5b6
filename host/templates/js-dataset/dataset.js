// {{name}}: a bench dataset plugin, one request per non-empty line of a text file.
//
//     bench --plugin {{name}}.wasm --dataset-path prompts.txt --{{name}}-output-len 64 ...

import { encodeBatch } from 'bench:plugin/tokenizer@0.7.0';
import {
  guard,
  invalidInput,
  option,
  readOptions,
  readText,
  request,
  samples,
  ungraded,
} from './bench-plugin.js';

const NAME = '{{name}}';

const OPTIONS = [
  // Answers to the general --output-len too, as vLLM's own datasets do.
  option('output-len', 'Output tokens to ask for per request', {
    defaultValue: 128,
    kind: 'count',
    flag: `${NAME}-output-len`,
    shared: ['output-len'],
  }),
];

class RequestSource {
  static open(config) {
    const outputLen = readOptions(NAME, config.options, OPTIONS)['output-len'];
    const prompts = readText(NAME, config.path)
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.length > 0);
    if (prompts.length === 0) throw invalidInput(`${NAME}: ${config.path} has no non-empty line`);
    // One call for all prompts: bench tokenizes them natively with the run's tokenizer.
    const lengths = encodeBatch(prompts, true).map((ids) => ids.length);
    // Cycles through the file when the run asks for more requests than it has lines.
    const requests = Array.from({ length: config.numRequests }, (_, i) =>
      request(prompts[i % prompts.length], lengths[i % prompts.length], outputLen));
    return new RequestSource(requests);
  }

  constructor(requests) {
    this.requests = requests;
    this.next = 0;
  }

  sizeHint() {
    return this.requests.length;
  }

  nextBatch(max) {
    const batch = this.requests.slice(this.next, this.next + max);
    this.next += batch.length;
    // Samples without a reference: `samples(batch, references)` would grade them.
    return samples(batch);
  }

  nextTurn(_turn) {
    return undefined;
  }
}

// The export named after the interface. `guard` turns an unexpected exception into an
// error that shows its message and stack.
export const dataset = {
  describe() {
    return {
      info: {
        name: NAME,
        version: '0.1.0',
        description: 'One request per non-empty line of a text file (--dataset-path)',
        options: OPTIONS,
      },
      path: 'required',
      ignoreEosByDefault: false,
      alignToServerTokenizer: false,
      multiTurn: false,
      shardable: false,
    };
  },
  // Judges an answer against a sample's reference. These samples carry none, so bench
  // never asks; a dataset that knows its answers returns `verdict(...)` here (see the
  // JavaScript plugin guide's "Graded datasets").
  grade: ungraded,
  RequestSource: guard(RequestSource),
};
