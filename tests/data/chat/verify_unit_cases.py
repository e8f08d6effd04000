#!/usr/bin/env python3
"""Checks the expected outputs in the Jinja engine's C++ case tables against Python's jinja2.

Every `{R"J(template)J", R"J(context)J", R"J(expected)J"}` (or nullptr where jinja2 raises) in
tests/data/chat/jinja_*_test.cpp is rendered with jinja2 set up as transformers does (the same environment
as template_oracle.py); any case whose expectation differs is printed. Exit 1 on a difference.

    python3 tests/data/chat/verify_unit_cases.py
"""

import glob
import json
import os
import re
import sys

sys.dont_write_bytecode = True  # run from the source tree by CTest: leave no __pycache__ there
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import template_oracle  # noqa: E402

# A fixed time for strftime_now(), as jinja_test_util.h's fixed_now().
template_oracle.NOW = 1717243200.5

STRING = r'(?:R"J\((?P<{0}>.*?)\)J"|(?P<{0}_empty>"")|(?P<{0}_name>k[A-Za-z0-9]+))'
CASE = re.compile(r"\{\s*" + STRING.format("source") + r"\s*,\s*" + STRING.format("context") + r"\s*,\s*(?:" +
                  STRING.format("expected") + r"|(?P<raises>nullptr))\s*\}", re.S)
# Shared contexts: constexpr const char* kName = R"J(...)J";
CONSTANT = re.compile(r'constexpr const char\* (k[A-Za-z0-9]+) =\s*R"J\((.*?)\)J";', re.S)


def main():
    try:
        import jinja2
        import jinja2.ext
        import jinja2.nodes
        import jinja2.utils
    except ImportError:
        print("SKIP: Python's jinja2 is not installed (Debian: python3-jinja2)")
        return template_oracle.SKIP

    env = template_oracle.make_environment(jinja2)
    here = os.path.dirname(os.path.abspath(__file__))
    checked = failed = 0
    for path in sorted(glob.glob(os.path.join(here, "jinja_*_test.cpp"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        constants = dict(CONSTANT.findall(text))
        for m in CASE.finditer(text):
            source = m.group("source") or ""
            context = json.loads(constants[m.group("context_name")] if m.group("context_name") else m.group("context") or "{}")
            text_out, info = template_oracle.render_python(env, source, context)
            want = None if m.group("raises") else (m.group("expected") or "")
            checked += 1
            if text_out != want:
                failed += 1
                line = text.count("\n", 0, m.start()) + 1
                got = f"raises {info}" if text_out is None else repr(text_out)
                print(f"{os.path.basename(path)}:{line}: {source!r}\n  expected {want!r}\n  jinja2   {got}")
    print(f"{checked} cases checked, {failed} differ from jinja2")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
