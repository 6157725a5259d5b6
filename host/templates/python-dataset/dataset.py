"""{{name}}: a bench dataset plugin, one request per non-empty line of a text file.

    bench --plugin {{name}}.wasm --dataset-path prompts.txt --{{name}}-output-len 64 ...
"""

from wit_world import exports
from wit_world.exports import dataset
from wit_world.imports import tokenizer
from wit_world.imports import bench_plugin_types as types

from bench_plugin import (guard, invalid_input, option, read_options, read_text, request,
                          samples, ungraded)

NAME = "{{name}}"

OPTIONS = [
    # Answers to the general --output-len too, as vLLM's own datasets do.
    option("output-len", "Output tokens to ask for per request", 128,
           kind=types.OptionKind.COUNT, flag=f"{NAME}-output-len",
           shared=[types.SharedFlag.OUTPUT_LEN]),
]


class Dataset(exports.Dataset):
    def describe(self):
        return dataset.DatasetDescription(
            info=types.PluginInfo(
                name=NAME,
                version="0.1.0",
                description="One request per non-empty line of a text file (--dataset-path)",
                options=OPTIONS,
            ),
            path=dataset.PathUse.REQUIRED,
            ignore_eos_by_default=False,
            align_to_server_tokenizer=False,
            multi_turn=False,
            shardable=False,
        )

    # Judges an answer against a sample's reference. These samples carry none, so bench
    # never asks; a dataset that knows its answers returns `verdict(...)` here (see the
    # Python plugin guide's "Graded datasets").
    grade = ungraded


# componentize-py finds the resource class by its name in this module. `guard` turns an
# unexpected exception into an error that shows its traceback.
@guard
class RequestSource(dataset.RequestSource):
    @classmethod
    def open(cls, config):
        output_len = read_options(NAME, config.options, OPTIONS)["output-len"]
        text = read_text(NAME, config.path)
        prompts = [line.strip() for line in text.splitlines() if line.strip()]
        if not prompts:
            raise invalid_input(f"{NAME}: {config.path} has no non-empty line")
        # One call for all prompts: bench tokenizes them natively with the run's tokenizer.
        lengths = [len(ids) for ids in tokenizer.encode_batch(prompts, True)]
        source = cls()
        # Cycles through the file when the run asks for more requests than it has lines.
        source.requests = [
            request(prompts[i % len(prompts)], lengths[i % len(prompts)], output_len)
            for i in range(config.num_requests)
        ]
        source.next = 0
        return source

    def size_hint(self):
        return len(self.requests)

    def next_batch(self, max):
        batch = self.requests[self.next:self.next + max]
        self.next += len(batch)
        # Samples without a reference: `samples(batch, references)` would grade them.
        return samples(batch)

    def next_turn(self, turn):
        return None
