#!/usr/bin/env python3
"""Real models' chat templates rendered by packtrain and by Python's jinja2, compared byte for byte.

The templates come from the llama-cpp-python sdist on PyPI (vendor/llama.cpp/models/templates/), fetched
once from PyPI into ${XDG_CACHE_HOME:-~/.cache}/packtrain/chat-templates-0.3.36/. jinja2 is set up as
transformers sets it up for apply_chat_template (read from transformers' chat_template_utils.py, without
importing transformers). Every template renders a set of generated conversations; packtrain (through
packtrain_jinja_tool) must give the same text and the same {% generation %} byte ranges, and must raise
where jinja2 raises. Prints a table and exits 1 on any mismatch outside KNOWN_DIFFERENCES, 77 (CTest's
skip) when jinja2 or the network is missing.

    template_oracle.py --tool build/packtrain_jinja_tool [--only NAME] [--show N]
"""

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime

SKIP = 77
VERSION = "0.3.36"
NOW = 1717243200.5  # a fixed time for strftime_now(), on both sides

# Templates packtrain does not render byte-equal, with the reason; their mismatches are reported, not
# failed. Everything else must match.
KNOWN_DIFFERENCES = {}


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "packtrain", f"chat-templates-{VERSION}")


def download_sdist(tmp):
    """The sdist from PyPI's simple index (as pip finds it), checked against the index's sha256; None offline."""
    try:
        with urllib.request.urlopen("https://pypi.org/simple/llama-cpp-python/", timeout=60) as r:
            index = r.read().decode()
        name = f"llama_cpp_python-{VERSION}.tar.gz"
        url, digest = next((u, d) for u, d in re.findall(r'href="([^"#]+)#sha256=([0-9a-f]+)"', index)
                           if u.endswith("/" + name))
        path = os.path.join(tmp, name)
        with urllib.request.urlopen(url, timeout=600) as r, open(path, "wb") as out:
            shutil.copyfileobj(r, out)
    except (OSError, ValueError, StopIteration):
        return None
    with open(path, "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != digest:
            sys.exit(f"{url}: the download does not match the index's sha256")
    return path


def fetch_templates(dest):
    """The sdist's templates in `dest` (fetched once); None when the network is unavailable."""
    marker = os.path.join(dest, ".complete")
    if os.path.exists(marker):
        return sorted(glob.glob(os.path.join(dest, "*.jinja")))
    tmp = tempfile.mkdtemp()
    try:
        sdist = download_sdist(tmp)
        if sdist is None:
            return None
        os.makedirs(dest, exist_ok=True)
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                parts = member.name.split("/")
                if member.isfile() and parts[-2:-1] == ["templates"] and "models" in parts and parts[-1].endswith(".jinja"):
                    with tar.extractfile(member) as src, open(os.path.join(dest, parts[-1]), "wb") as out:
                        shutil.copyfileobj(src, out)
        open(marker, "w").close()
        return sorted(glob.glob(os.path.join(dest, "*.jinja")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def make_environment(jinja2):
    """jinja2 as transformers' _cached_compile_jinja_template configures it."""
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class AssistantTracker(Extension):
        tags = {"generation"}

        def __init__(self, environment):
            super().__init__(environment)
            environment.extend(activate_tracker=self.activate_tracker)
            self._tracking = ContextVar("assistant_tracker", default=None)

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

        @jinja2.pass_eval_context
        def _generation_support(self, context, caller):
            rv = caller()
            tracking = self._tracking.get()
            if tracking is not None:
                rendered_blocks, generation_indices = tracking
                start_index = len("".join(rendered_blocks))
                generation_indices.append((start_index, start_index + len(rv)))
            return rv

        @contextmanager
        def activate_tracker(self, rendered_blocks, generation_indices):
            token = self._tracking.set((rendered_blocks, generation_indices))
            try:
                yield
            finally:
                self._tracking.reset(token)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.fromtimestamp(NOW).strftime(format)

    class TemplateDict:
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"underscore-prefixed namespace attribute {name!r}")

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


def render_python(env, source, context):
    """(text, generation byte ranges) or (None, error message), as transformers renders with
    return_assistant_tokens_mask."""
    try:
        template = env.from_string(source)
        blocks, indices = [], []
        with env.activate_tracker(blocks, indices):
            for block in template.generate(**context):
                blocks.append(block)
        text = "".join(blocks)
        # transformers' indices count characters; packtrain's count UTF-8 bytes of the same text.
        generation = [[len(text[:b].encode()), len(text[:e].encode())] for b, e in indices]
        return text, generation
    except Exception as e:  # any exception: packtrain must fail too
        return None, f"{type(e).__name__}: {e}"


SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
UNICODE = "Grüße, 世界! 🌍 — \"quoted\" 'single' \\ back\tslash\n<b>tag</b> & {{ not }} {% a tag %}"


def conversations():
    """(name, messages) pairs: with and without a system turn, one and many turns, empty, unicode and
    whitespace-padded content."""
    def turn(role, content):
        return {"role": role, "content": content}

    base = [
        ("one-turn", [turn("user", "Hello!")]),
        ("multi-turn", [turn("user", "What is 2+2?"), turn("assistant", "4."), turn("user", "And 3+3?"),
                        turn("assistant", "6.")]),
        ("ends-with-user", [turn("user", "Hi"), turn("assistant", "Hello! How can I help?"), turn("user", "Tell me a joke.")]),
        ("empty-content", [turn("user", ""), turn("assistant", "")]),
        ("unicode", [turn("user", UNICODE), turn("assistant", UNICODE[::-1])]),
        ("whitespace", [turn("user", "  padded question  \n\n"), turn("assistant", "\n answer with spaces \n")]),
    ]
    out = []
    for name, messages in base:
        out.append((name, messages))
        out.append((name + "+system", [SYSTEM] + messages))
    return out


TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    },
}]


def harder_conversations():
    """Beyond the issue's set: tool calls and results, reasoning, and content given as a list of parts."""
    call = {"id": "call0AbC9", "type": "function",  # 9 alphanumerics, as Mistral's templates demand
            "function": {"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}}}
    tool_use = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call0AbC9", "name": "get_weather", "content": "22 °C, sunny"},
        {"role": "assistant", "content": "It is 22 °C and sunny in Paris."},
    ]
    reasoning = [
        {"role": "user", "content": "Is 17 prime?"},
        {"role": "assistant", "content": "Yes.", "reasoning_content": "17 has no divisors but 1 and itself."},
        {"role": "user", "content": "And 21?"},
    ]
    parts = [
        {"role": "user", "content": [{"type": "text", "text": "Describe this."}, {"type": "text", "text": "Briefly."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A short description."}]},
    ]
    return [("tool-calls", tool_use), ("tool-calls+system", [SYSTEM] + tool_use), ("reasoning", reasoning),
            ("content-parts", parts)]


def alias_reasoning(messages):
    """transformers' _alias_reasoning_fields: reasoning is also given as `thinking`."""
    out = []
    for m in messages:
        r = next((m[k] for k in ("reasoning_content", "thinking", "reasoning") if m.get(k) is not None), None)
        out.append({"thinking": r, **m, "reasoning_content": r} if r is not None else m)
    return out


def contexts():
    variants = [(name, messages, None) for name, messages in conversations()]
    variants += [(name, messages, None) for name, messages in harder_conversations()]
    variants += [("tools-given/" + name, messages, TOOLS) for name, messages in harder_conversations()[:2]]
    variants.append(("tools-given/one-turn", conversations()[0][1], TOOLS))
    for name, messages, tools in variants:
        for add_generation_prompt in (False, True):
            yield f"{name}/agp={int(add_generation_prompt)}", {
                # What apply_chat_template passes: the conversation, tools and documents (None when not
                # given), add_generation_prompt and the tokenizer's special tokens.
                "messages": alias_reasoning(messages),
                "tools": tools,
                "documents": None,
                "add_generation_prompt": add_generation_prompt,
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "<pad>",
            }


def render_packtrain(tool, jobs):
    lines = "".join(json.dumps({"template": t, "context": c, "now": NOW}, ensure_ascii=False) + "\n" for t, c in jobs)
    proc = subprocess.run([tool], input=lines.encode(), stdout=subprocess.PIPE, check=True)
    results = []
    for line in proc.stdout.decode().split("\n")[:-1]:
        r = json.loads(line)
        results.append((r["text"], r["generation"]) if r["error"] is None else (None, r["error"]))
    if len(results) != len(jobs):
        raise SystemExit(f"packtrain_jinja_tool answered {len(results)} of {len(jobs)} requests")
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", required=True, help="path of packtrain_jinja_tool")
    ap.add_argument("--templates", help="a directory of .jinja files instead of the sdist's")
    ap.add_argument("--only", help="only templates whose name contains this")
    ap.add_argument("--show", type=int, default=1, help="mismatches to print in full per template")
    args = ap.parse_args()

    try:
        import jinja2
        import jinja2.ext
        import jinja2.nodes
        import jinja2.utils
    except ImportError:
        print("SKIP: Python's jinja2 is not installed (Debian: python3-jinja2)")
        return SKIP
    if args.templates:
        files = sorted(glob.glob(os.path.join(args.templates, "*.jinja")))
    else:
        files = fetch_templates(cache_dir())
        if files is None:
            print(f"SKIP: could not fetch llama-cpp-python=={VERSION} from PyPI (no network)")
            return SKIP
    if args.only:
        files = [f for f in files if args.only in os.path.basename(f)]
    if not files:
        print("no templates found")
        return 1

    env = make_environment(jinja2)
    cases = list(contexts())
    jobs, expected = [], []
    for path in files:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        for case, context in cases:
            jobs.append((source, context))
            expected.append((os.path.basename(path)[: -len(".jinja")], case, render_python(env, source, context)))
    actual = render_packtrain(args.tool, jobs)

    rows, failures, stale = [], 0, []
    by_template = {}
    for (name, case, want), got in zip(expected, actual):
        by_template.setdefault(name, []).append((case, want, got))
    for name, results in by_template.items():
        equal = differing = raised = 0
        whys, shown, first_error = [], 0, None
        for case, (want_text, want_gen), (got_text, got_gen) in results:
            if want_text is None:
                raised += 1
                first_error = first_error or want_gen
                # raise_exception()'s message is what users see: it must come through unchanged.
                message = want_gen.split(": ", 1)[1] if want_gen.startswith("TemplateError: ") else ""
                if got_text is not None:
                    why = "jinja2 raises, packtrain renders"
                elif message and not got_gen.endswith(": " + message):
                    why = "raise_exception() message differs: " + got_gen
                else:
                    equal += 1
                    continue
            elif got_text is None:
                why = "packtrain raises: " + got_gen
            elif got_text != want_text:
                why = "text differs"
            elif got_gen != want_gen:
                why = "generation ranges differ"
            else:
                equal += 1
                continue
            differing += 1
            if why not in whys:
                whys.append(why)
            if shown < args.show and name not in KNOWN_DIFFERENCES:
                shown += 1
                print(f"--- {name} [{case}]: {why}")
                if want_text is None:
                    print(f"jinja2 error: {want_gen}")
                else:
                    print(f"jinja2:    {want_text!r}\n           {want_gen}")
                print(f"packtrain: {got_text!r}\n           {got_gen}" if got_text is not None else "")
        known = KNOWN_DIFFERENCES.get(name)
        if differing and not known:
            failures += 1
        if known and not differing:
            stale.append(name)
        if known:
            why = known
        elif whys:
            why = "; ".join(whys)
        else:
            why = "byte-equal"
            if raised:
                why += f"; raises with jinja2, e.g. {first_error[:70]}"
        rows.append((name, len(results), equal, differing, raised, why))

    width = max(len(r[0]) for r in rows)
    print(f"\n{'template':<{width}}  conversations  equal  differing  jinja2-errors  why")
    for name, n, equal, differing, raised, why in rows:
        print(f"{name:<{width}}  {n:>13}  {equal:>5}  {differing:>9}  {raised:>13}  {why}")
    total = len(rows)
    clean = sum(1 for r in rows if r[3] == 0)
    print(f"\n{clean} of {total} templates byte-equal on all {len(cases)} conversations"
          f" ({sum(r[4] == r[1] for r in rows)} of them raise on every conversation in jinja2 too)")
    for name in stale:
        print(f"note: {name} is listed in KNOWN_DIFFERENCES but now matches; remove it from the list")
    if failures:
        print(f"FAIL: {failures} template(s) differ from jinja2")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
