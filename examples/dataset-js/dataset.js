// An example dataset plugin in JavaScript: one request per line of a JSONL file.
//
// Each line is a JSON object; its `prompt` field (`--dataset-option prompt-field=NAME`
// picks another) is the prompt, and an optional `system` field is put before it, as a
// line of its own. Each request asks for `output-len` tokens (the general `--output-len`
// sets it too). Prompt lengths are counted with the run's tokenizer, in one call for the
// whole file. Lines repeat in order when the run asks for more requests than the file
// has.
//
// componentize-js builds this module as the world's `dataset` export: `describe`, `grade`
// and the `RequestSource` resource class. The lines carry no right answers, so its samples
// have no reference and `grade` answers `unsupported` (bench never asks).

import { encodeBatch } from 'bench:plugin/tokenizer@0.7.0';
import {
  guard,
  invalidConfig,
  invalidInput,
  option,
  readOptions,
  readText,
  request,
  samples,
  ungraded,
} from '../../sdk/js/bench-plugin.js';

const NAME = 'jsonl-prompts';

const OPTIONS = [
  option('prompt-field', 'The field of each line that holds the prompt', {
    defaultValue: 'prompt',
    flag: 'jsonl-prompt-field',
  }),
  // Answers to the general --output-len too, as vLLM's own datasets do.
  option('output-len', 'Output tokens to ask for per request', {
    defaultValue: 128,
    kind: 'count',
    flag: 'jsonl-output-len',
    shared: ['output-len'],
  }),
];

/** The prompts of a JSONL `text`: `system` (when a line has one) and the prompt field. */
function prompts(path, text, field) {
  const out = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let row;
    try {
      row = JSON.parse(line);
    } catch (e) {
      throw invalidInput(`${NAME}: ${path} line ${i + 1}: not JSON: ${e.message}`);
    }
    const prompt = row?.[field];
    if (typeof prompt !== 'string') {
      throw invalidInput(`${NAME}: ${path} line ${i + 1}: no string field '${field}'`);
    }
    out.push(typeof row.system === 'string' ? `${row.system}\n${prompt}` : prompt);
  });
  return out;
}

class RequestSource {
  constructor(requests) {
    this.requests = requests;
    this.next = 0;
  }

  static open(config) {
    const opts = readOptions(NAME, config.options, OPTIONS);
    const found = prompts(config.path, readText(NAME, config.path), opts['prompt-field']);
    if (found.length === 0) throw invalidConfig(`${NAME}: ${config.path} has no prompt`);
    const counts = encodeBatch(found, true).map((ids) => ids.length);
    const requests = [];
    for (let i = 0; i < config.numRequests; i++) {
      const k = i % found.length;
      requests.push(request(found[k], counts[k], opts['output-len']));
    }
    return new RequestSource(requests);
  }

  sizeHint() {
    return this.requests.length;
  }

  nextBatch(max) {
    const batch = this.requests.slice(this.next, this.next + max);
    this.next += batch.length;
    // Ungraded samples: requests without a reference.
    return samples(batch);
  }

  nextTurn() {
    return undefined;
  }
}

export const dataset = {
  describe() {
    return {
      info: {
        name: NAME,
        version: '0.1.0',
        description: 'One request per line of a JSONL file (--dataset-path), its prompt from a named field',
        options: OPTIONS,
      },
      path: 'required',
      ignoreEosByDefault: false,
      alignToServerTokenizer: false,
      multiTurn: false,
      shardable: false,
    };
  },
  // The lines hold no right answers: bench never asks, and the contract still needs it.
  grade: ungraded,
  // Exceptions become plugin errors with their message and stack.
  RequestSource: guard(RequestSource),
};
