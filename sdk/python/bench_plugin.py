"""What every Python bench plugin repeats, in one small module.

Copy this file next to your plugin (``bench plugin new --lang python`` does) and build
with componentize-py against bench's ``wit/``; it imports the bindings componentize-py
generates (``wit_world``), so it works in a dataset and in a backend plugin alike.

- Errors: ``raise invalid_config(...)``, ``invalid_input(...)`` or ``unsupported(...)``
  fail a call with that kind of ``plugin-error``; ``@guard`` (on a resource class, or on
  one method) turns any other exception into an ``internal`` error carrying the
  exception's message and traceback, which bench shows under the plugin's name. Without
  it, an exception traps the component and the user sees a wasm backtrace instead.
- Options: declare them once with ``option(...)`` (the list ``describe`` returns) and read
  ``config.options`` with ``read_options``, which parses each value by its kind, applies
  the defaults and refuses a key the plugin does not declare, naming it.
- ``read_text`` reads the file bench granted (``--dataset-path``), ``request`` builds a
  request spec from the three fields that matter, the rest defaulted.
- Datasets: ``next_batch`` returns samples, each a request with what a right answer to it
  is: ``samples(requests)`` for an ordinary dataset, ``samples(requests, references)`` or
  ``sample(request, reference)`` for one that grades answers. Every dataset defines
  ``grade``: ``grade = ungraded`` in the ``Dataset`` class answers ``unsupported``, and a
  grading dataset returns ``verdict(correct, extracted)``.
"""

import functools
import traceback

from componentize_py_types import Err
# componentize-py names the contract's `types` interface after its package, as wasi has one too.
from wit_world.imports import bench_plugin_types as types


def invalid_config(message):
    """An option or the configuration is wrong: ``raise invalid_config("...")``."""
    return Err(types.PluginError_InvalidConfig(message))


def invalid_input(message):
    """The input data is wrong (name the file and line): ``raise invalid_input("...")``."""
    return Err(types.PluginError_InvalidInput(message))


def unsupported(message):
    """The plugin does not support what was asked: ``raise unsupported("...")``."""
    return Err(types.PluginError_Unsupported(message))


# The contract's methods that return a result, so can fail with a plugin-error: ``guard``
# on a class wraps these (the others, such as ``describe``, cannot carry an error).
_FALLIBLE = ("open", "next_batch", "next_turn", "grade", "build_request", "decode")


def guard(target):
    """Makes any exception of a method an ``internal`` plugin-error with its traceback.

    On a class, wraps its fallible contract methods (``open``, ``next_batch``,
    ``next_turn``, ``grade``, ``build_request``, ``decode``) that the class itself defines;
    on a function, wraps that function (put it under ``@classmethod``). Errors raised with
    ``invalid_config`` and its siblings pass through unchanged. A grading ``Dataset`` class
    takes it too: a grader that meets an output it did not foresee then fails that one
    call with its traceback instead of trapping the plugin.
    """
    if isinstance(target, type):
        for name in _FALLIBLE:
            method = target.__dict__.get(name)
            if isinstance(method, (classmethod, staticmethod)):
                setattr(target, name, type(method)(guard(method.__func__)))
            elif callable(method):
                setattr(target, name, guard(method))
        return target

    @functools.wraps(target)
    def guarded(*args, **kwargs):
        try:
            return target(*args, **kwargs)
        except Err:
            raise
        except Exception as e:
            # The traceback from the plugin's own frame on (this wrapper's is left out).
            shown = traceback.format_exception(type(e), e, e.__traceback__.tb_next)
            raise Err(types.PluginError_Internal("".join(shown).rstrip()))

    return guarded


def _count(text):
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


_KINDS = {
    types.OptionKind.TEXT: str,
    types.OptionKind.COUNT: _count,
    types.OptionKind.INTEGER: int,
    types.OptionKind.NUMBER: float,
    types.OptionKind.SWITCH: lambda v: {"true": True, "false": False}[v.lower()],
}


def option(name, description, default=None, kind=types.OptionKind.TEXT, flag=None,
           required=False, choices=(), shared=()):
    """One option of ``describe``'s list: ``--dataset-option NAME=VALUE`` (or
    ``--backend-option``), and ``--FLAG`` when ``flag`` is given. ``shared`` lists the
    general flags (``types.SharedFlag.OUTPUT_LEN``) that set it too."""
    return types.OptionInfo(
        name=name,
        description=description,
        default_value=None if default is None else str(default).lower()
        if isinstance(default, bool) else str(default),
        required=required,
        cli_flag=flag,
        kind=kind,
        choices=list(choices),
        shared_flags=list(shared),
    )


def read_options(plugin, given, declared):
    """The values of ``given`` (``config.options``, key/value pairs) by name, parsed by
    each declared option's kind, with the declared defaults for those not given (None
    where there is none). A key not declared, a required option missing or a value of
    the wrong kind raises ``invalid_config`` naming the plugin and the key."""
    by_name = {o.name: o for o in declared}
    values = {}
    for key, text in given:
        if key not in by_name:
            known = ", ".join(by_name) or "none"
            raise invalid_config(f"{plugin}: unknown option '{key}' (known: {known})")
        values[key] = text
    parsed = {}
    for name, info in by_name.items():
        text = values.get(name, info.default_value)
        if text is None:
            if info.required:
                raise invalid_config(f"{plugin}: option '{name}' is required")
            parsed[name] = None
            continue
        try:
            parsed[name] = _KINDS[info.kind](text)
        except (ValueError, KeyError):
            raise invalid_config(
                f"{plugin}: option '{name}' takes a {info.kind.name.lower()}, got '{text}'")
    return parsed


def read_text(plugin, path):
    """The text of ``path`` (``config.path``: bench grants ``--dataset-path`` read-only).
    No path, or a file that cannot be read, raises ``invalid_config`` naming it."""
    if path is None:
        raise invalid_config(f"{plugin}: needs --dataset-path")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise invalid_config(f"{plugin}: cannot read {path}: {e}")


def request(prompt, prompt_len, expected_output_len, **fields):
    """A request spec: a text ``prompt`` (or a ``types.Prompt_*`` value), its length in
    tokens and the output tokens to ask for; any other field of ``request-spec``
    (``lora_name``, ``extra_body``, ``send_at``, ``output_constraint``, ...) by keyword."""
    if isinstance(prompt, str):
        prompt = types.Prompt_Text(prompt)
    spec = dict(multimodal=[], request_id=None, lora_name=None, extra_body=None,
                send_at=None, session=None, output_constraint=None)
    spec.update(fields)
    return types.RequestSpec(prompt=prompt, prompt_len=prompt_len,
                             expected_output_len=expected_output_len, **spec)


def _dataset():
    # The dataset interface's bindings exist only in a dataset plugin's build; importing
    # them when called keeps this module usable in a backend plugin.
    from wit_world.exports import dataset
    return dataset


def sample(request, reference=None):
    """One of the samples ``next_batch`` returns: a request spec (``request(...)``) and,
    for a dataset that grades answers, its ``reference``, the text ``grade`` gets back
    with the response (a final number, a letter). None, the default, leaves the request
    ungraded: bench never sends the reference to the server, and asks ``grade`` only about
    requests that had one."""
    return _dataset().Sample(request=request, reference=reference)


def samples(requests, references=None):
    """``next_batch``'s list from a list of request specs: ungraded (an ordinary dataset:
    ``return samples(batch)``), or each with the reference at the same position of
    ``references`` (None there leaves that one ungraded)."""
    make = _dataset().Sample
    if references is None:
        return [make(request=r, reference=None) for r in requests]
    if len(references) != len(requests):
        raise ValueError(
            f"samples: {len(requests)} requests but {len(references)} references")
    return [make(request=r, reference=ref) for r, ref in zip(requests, references)]


def verdict(correct, extracted=None, score=None):
    """What ``grade`` returns: whether the answer is right, what the grader read as the
    answer (None when it found none: bench counts an invalid answer) and a score from 0
    to 1, by default 1 when right and 0 when wrong (a grader without partial credit)."""
    if score is None:
        score = 1.0 if correct else 0.0
    return _dataset().Verdict(correct=bool(correct), score=float(score), extracted=extracted)


def ungraded(self, reference, output):
    """``grade`` for a dataset that knows no right answers: put ``grade = ungraded`` in
    the ``Dataset`` class. componentize-py needs every function of the interface defined
    (``exports.Dataset`` declares ``grade`` abstract, so the class would not instantiate);
    bench only asks about samples that carried a reference, so this answers
    ``unsupported`` to a call that should not happen."""
    raise unsupported("this dataset does not grade answers (its samples carry no reference)")


def string_span(buffer, start, end, key):
    """Where the string value of ``"key":`` is in the frame ``buffer[start:end]``, as a
    backend's ``decode`` reports a text: ``(offset, length, escaped)`` with the offset into
    the whole ``buffer`` (spans are never frame-relative), ``escaped`` when the literal holds
    a backslash escape for bench to decode. None when the frame has no such key with a
    string value. It takes the first match: name a key that occurs once per frame.
    """
    needle = b'"' + key.encode() + b'"'
    at = buffer.find(needle, start, end)
    while at >= 0:
        i = at + len(needle)
        while i < end and buffer[i] in b" \t\r\n":
            i += 1
        if i < end and buffer[i] == ord(":"):
            i += 1
            while i < end and buffer[i] in b" \t\r\n":
                i += 1
            if i >= end or buffer[i] != ord('"'):
                return None
            first, escaped = i + 1, False
            i = first
            while i < end and buffer[i] != ord('"'):
                if buffer[i] == ord("\\"):
                    escaped = True
                    i += 1
                i += 1
            return (first, i - first, escaped) if i < end else None
        at = buffer.find(needle, at + 1, end)
    return None
