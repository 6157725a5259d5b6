// {{name}}: a bench backend plugin for an OpenAI-compatible /v1/completions API, streamed
// as server-sent events (or one JSON body with --no-stream).
//
//     bench --backend {{name}}.wasm --base-url http://127.0.0.1:8000 --model M ...

import { guard, invalidConfig, readOptions, stringSpan, unsupported } from './bench-plugin.js';

const NAME = '{{name}}';

// This backend has no options of its own: readOptions still refuses any key given.
const OPTIONS = [];

class Client {
  static open(config) {
    readOptions(NAME, config.options, OPTIONS);
    // Sampling parameters and --extra-body, merged into every body.
    const extra = config.extraBody ? JSON.parse(config.extraBody) : {};
    if (typeof extra !== 'object' || extra === null || Array.isArray(extra)) {
      throw invalidConfig(`${NAME}: the extra body is not a JSON object`);
    }
    return new Client(config, extra);
  }

  constructor(config, extra) {
    this.config = config;
    this.extra = extra;
  }

  framing() {
    return this.config.stream ? 'sse' : 'raw';
  }

  defaultPath() {
    return '/v1/completions';
  }

  buildRequest(spec) {
    if (spec.prompt.tag !== 'text') throw unsupported(`${NAME}: text prompts only`);
    const body = {
      model: spec.loraName ?? this.config.model,
      prompt: spec.prompt.val,
      max_tokens: spec.expectedOutputLen,
      temperature: 0.0,
      stream: this.config.stream,
    };
    // The server's token counts arrive in a last frame without choices.
    if (this.config.stream) body.stream_options = { include_usage: true };
    if (this.config.ignoreEos) body.ignore_eos = true;
    Object.assign(body, this.extra, spec.extraBody ? JSON.parse(spec.extraBody) : {});
    return {
      method: 'POST',
      headers: [['Content-Type', 'application/json']],
      body: new TextEncoder().encode(JSON.stringify(body)),
    };
  }

  // Reads the frames laid end to end in `buffer`: each frame with a choice is a chunk
  // whose text is a span of `buffer`; finish reasons, usage and errors are events of the
  // frame that carried them.
  decode(_head, buffer, frameEnds) {
    const chunks = { frames: [], spans: [], escaped: [], tokens: [] };
    const events = [];
    const decoder = new TextDecoder();
    let start = 0;
    frameEnds.forEach((end, frame) => {
      const event = (kind) => events.push({ frame, kind });
      let data;
      try {
        data = JSON.parse(decoder.decode(buffer.subarray(start, end)));
      } catch (e) {
        event({ tag: 'error', val: { kind: 'malformed-frame', message: `${NAME}: ${e.message}` } });
        start = end;
        return;
      }
      if (data?.error !== undefined) {
        event({ tag: 'error', val: { kind: 'server', message: JSON.stringify(data.error) } });
      } else if (data?.choices?.length) {
        // The text's bytes as the server sent them (bench decodes escapes when told).
        const [offset, length, escaped] = stringSpan(buffer, start, end, 'text') ?? [0, 0, false];
        chunks.frames.push(frame);
        chunks.spans.push(offset, length, 0, 0);
        chunks.escaped.push(escaped ? 1 : 0);
        const reason = data.choices[0].finish_reason;
        if (reason) event({ tag: 'finish', val: reason });
      }
      if (data?.usage) {
        event({
          tag: 'usage',
          val: {
            promptTokens: data.usage.prompt_tokens ?? undefined,
            completionTokens: data.usage.completion_tokens ?? undefined,
            cachedPromptTokens: data.usage.prompt_tokens_details?.cached_tokens ?? undefined,
          },
        });
      }
      start = end;
    });
    return { chunks, events };
  }
}

// The export named after the interface. `guard` turns an unexpected exception into an
// error that shows its message and stack.
export const backend = {
  describe() {
    return {
      info: {
        name: NAME,
        version: '0.1.0',
        description: 'OpenAI-compatible /v1/completions, streamed (server-sent events)',
        options: OPTIONS,
      },
      openaiCompatible: true,
    };
  },
  Client: guard(Client),
};
