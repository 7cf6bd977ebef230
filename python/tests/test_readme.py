"""The README's Python session runs as written, from the clone's top folder."""
import contextlib
import io
import os
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_readme_python_session_runs_as_written():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md (Python)", "exec"), {})
    finally:
        os.chdir(cwd)
    lines = out.getvalue().splitlines()
    assert lines[1] == "125000 True"
    assert lines[2] == "True"
    assert lines[3].startswith("ShapeMismatch: matmul")
    accuracy = float(lines[4].split()[-1])
    assert accuracy > 0.95, lines[4]
