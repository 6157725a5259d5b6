"""{{name}}: a bench backend plugin for an OpenAI-compatible /v1/completions API, streamed
as server-sent events (or one JSON body with --no-stream).

    bench --backend {{name}}.wasm --base-url http://127.0.0.1:8000 --model M ...
"""

import json

from wit_world import exports
from wit_world.exports import backend
from wit_world.imports import bench_plugin_types as types

from bench_plugin import guard, invalid_config, read_options, string_span, unsupported

NAME = "{{name}}"

# This backend has no options of its own: read_options still refuses any key given.
OPTIONS = []


class Backend(exports.Backend):
    def describe(self):
        return backend.BackendDescription(
            info=types.PluginInfo(
                name=NAME,
                version="0.1.0",
                description="OpenAI-compatible /v1/completions, streamed (server-sent events)",
                options=OPTIONS,
            ),
            openai_compatible=True,
        )


# componentize-py finds the resource class by its name in this module. `guard` turns an
# unexpected exception into an error that shows its traceback.
@guard
class Client(backend.Client):
    @classmethod
    def open(cls, config):
        read_options(NAME, config.options, OPTIONS)
        client = cls()
        client.config = config
        # Sampling parameters and --extra-body, merged into every body.
        client.extra = json.loads(config.extra_body) if config.extra_body else {}
        if not isinstance(client.extra, dict):
            raise invalid_config(f"{NAME}: the extra body is not a JSON object")
        return client

    def framing(self):
        return backend.Framing.SSE if self.config.stream else backend.Framing.RAW

    def default_path(self):
        return "/v1/completions"

    def build_request(self, spec):
        if not isinstance(spec.prompt, types.Prompt_Text):
            raise unsupported(f"{NAME}: text prompts only")
        body = {
            "model": spec.lora_name or self.config.model,
            "prompt": spec.prompt.value,
            "max_tokens": spec.expected_output_len,
            "temperature": 0.0,
            "stream": self.config.stream,
        }
        if self.config.stream:
            # The server's token counts arrive in a last frame without choices.
            body["stream_options"] = {"include_usage": True}
        if self.config.ignore_eos:
            body["ignore_eos"] = True
        body.update(self.extra)
        if spec.extra_body:
            body.update(json.loads(spec.extra_body))
        return backend.HttpRequest(
            method="POST",
            headers=[("Content-Type", "application/json")],
            body=json.dumps(body).encode(),
        )

    def decode(self, head, buffer, frame_ends):
        """Reads the frames laid end to end in `buffer`: each frame with a choice is a
        chunk whose text is a span of `buffer`; finish reasons, usage and errors are events
        of the frame that carried them."""
        chunks = backend.Chunks(frames=[], spans=[], escaped=[], tokens=[])
        events = []
        start = 0
        for frame, end in enumerate(frame_ends):
            events.extend(self.read_frame(buffer, frame, start, end, chunks))
            start = end
        # A list<u8> crosses as bytes.
        chunks.escaped = bytes(chunks.escaped)
        return backend.Decoded(chunks=chunks, events=events)

    def read_frame(self, buffer, frame, start, end, chunks):
        def event(kind):
            return backend.Event(frame=frame, kind=kind)

        try:
            data = json.loads(buffer[start:end])
        except ValueError as e:
            return [event(backend.EventKind_Error(backend.ErrorEvent(
                kind=backend.ErrorKind.MALFORMED_FRAME, message=f"{NAME}: {e}")))]
        if not isinstance(data, dict):
            return []
        if "error" in data:
            return [event(backend.EventKind_Error(backend.ErrorEvent(
                kind=backend.ErrorKind.SERVER, message=json.dumps(data["error"]))))]
        events = []
        choices = data.get("choices") or []
        if choices:
            # The text's bytes as the server sent them (bench decodes escapes when told).
            text = string_span(buffer, start, end, "text")
            offset, length, escaped = text if text else (0, 0, False)
            chunks.frames.append(frame)
            chunks.spans.extend([offset, length, 0, 0])
            chunks.escaped.append(1 if escaped else 0)
            reason = choices[0].get("finish_reason")
            if reason:
                events.append(event(backend.EventKind_Finish(reason)))
        usage = data.get("usage")
        if usage:
            events.append(event(backend.EventKind_Usage(backend.Usage(
                prompt_tokens=usage.get("prompt_tokens"),
                completion_tokens=usage.get("completion_tokens"),
                cached_prompt_tokens=(usage.get("prompt_tokens_details") or {}).get(
                    "cached_tokens"),
            ))))
        return events
