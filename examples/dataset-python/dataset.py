"""An example dataset plugin in Python: one request per row of a CSV file.

The prompt is the row's ``prompt`` column (``--dataset-option prompt-column=NAME`` picks
another); each request asks for ``output-len`` tokens, or for the row's own count when
``output-len-column`` names a column that holds one. Prompt lengths are counted with the
run's tokenizer, in one call for the whole file; ``shuffle`` draws the order from the run's
``--seed``. Rows repeat in order when the run asks for more requests than the file has.

componentize-py builds the module named ``dataset``: it must define the ``Dataset`` class
(the world's export: ``describe`` and ``grade``) and the ``RequestSource`` resource class.
The rows carry no right answers, so its samples have no reference and ``grade`` answers
``unsupported`` (bench never asks).
"""

import csv
import io
import random

import bench_plugin as bp
from wit_world import exports
from wit_world.exports import dataset
from wit_world.imports import bench_plugin_types as types
from wit_world.imports import seed, tokenizer

NAME = "csv-prompts"

OPTIONS = [
    bp.option("prompt-column", "The column that holds the prompt", default="prompt",
              flag="csv-prompt-column"),
    # Answers to the general --output-len too, as vLLM's own datasets do.
    bp.option("output-len", "Output tokens to ask for per request", default=128,
              kind=types.OptionKind.COUNT, flag="csv-output-len",
              shared=[types.SharedFlag.OUTPUT_LEN]),
    bp.option("output-len-column",
              "A column with each row's own output length (overrides output-len)"),
    bp.option("shuffle", "Shuffle the rows with a seed derived from --seed", default=False,
              kind=types.OptionKind.SWITCH, flag="csv-shuffle"),
]


class Dataset(exports.Dataset):
    def describe(self):
        return dataset.DatasetDescription(
            info=types.PluginInfo(
                name=NAME,
                version="0.1.0",
                description="One request per row of a CSV file (--dataset-path), its prompt "
                            "from a named column",
                options=OPTIONS,
            ),
            path=dataset.PathUse.REQUIRED,
            ignore_eos_by_default=False,
            align_to_server_tokenizer=False,
            multi_turn=False,
            shardable=False,
        )

    # The rows hold no right answers: bench never asks, and the contract still needs it.
    grade = bp.ungraded


def rows(path, text, prompt_column, output_len_column, output_len):
    """(prompt, output length) for each row of the CSV ``text`` with a non-empty prompt."""
    reader = csv.DictReader(io.StringIO(text))
    for column in (prompt_column, output_len_column):
        if column is not None and column not in (reader.fieldnames or []):
            raise bp.invalid_config(
                f"{NAME}: {path} has no column '{column}' (its columns: "
                f"{', '.join(reader.fieldnames or []) or 'none'})")
    out = []
    for row in reader:
        prompt = (row[prompt_column] or "").strip()
        if not prompt:
            continue
        length = output_len
        if output_len_column is not None:
            value = row[output_len_column]
            if not (value or "").strip().isdigit():
                # line_num: the line of the file the row ends on.
                raise bp.invalid_input(
                    f"{NAME}: {path} line {reader.line_num}: column '{output_len_column}' "
                    f"is not a count: {value!r}")
            length = int(value)
        out.append((prompt, length))
    return out


@bp.guard
class RequestSource(dataset.RequestSource):
    @classmethod
    def open(cls, config):
        opts = bp.read_options(NAME, config.options, OPTIONS)
        text = bp.read_text(NAME, config.path)
        found = rows(config.path, text, opts["prompt-column"], opts["output-len-column"],
                     opts["output-len"])
        if not found:
            raise bp.invalid_input(f"{NAME}: {config.path} has no row with a prompt")
        if opts["shuffle"]:
            # The draw happens here; only the seed crosses from bench.
            random.Random(seed.derive(NAME)).shuffle(found)
        counts = tokenizer.encode_batch([prompt for prompt, _ in found], True)
        source = cls()
        source.requests = [
            bp.request(found[i % len(found)][0], len(counts[i % len(found)]),
                       found[i % len(found)][1])
            for i in range(config.num_requests)
        ]
        source.next = 0
        return source

    def size_hint(self):
        return len(self.requests)

    def next_batch(self, max):
        batch = self.requests[self.next:self.next + max]
        self.next += len(batch)
        # Ungraded samples: requests without a reference.
        return bp.samples(batch)

    def next_turn(self, turn):
        return None
