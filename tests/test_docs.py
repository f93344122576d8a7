"""The docs are part of the product: every command and hook is documented, and the
code examples in README.md and docs/ run."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from monk_framework import Registry, get_registry
from monk_framework.app.cli import app
from monk_framework.core import hookspecs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def code_blocks(path: Path, language: str = "python") -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(), flags=re.S)


def command_names() -> list[str]:
    import typer.main

    group = typer.main.get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]


def test_every_cli_command_and_option_is_documented():
    import typer.main

    text = (DOCS / "cli.md").read_text()
    group = typer.main.get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        assert f"## monkfw {name}" in text, f"command {name!r} is not in docs/cli.md"
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--") and opt != "--help":
                    assert f"`{opt}" in text, f"option {opt} of {name!r} is not in docs/cli.md"
    for param in group.params:
        for opt in getattr(param, "opts", []):
            if opt.startswith("--") and opt != "--help":
                assert f"`{opt}`" in text, f"global option {opt} is not in docs/cli.md"


def test_every_hook_is_documented():
    text = (DOCS / "plugins.md").read_text()
    hooks = [n for n in dir(hookspecs) if n.startswith("monk_") and callable(getattr(hookspecs, n))]
    assert hooks == ["monk_estimators", "monk_kernels"]
    for hook in hooks:
        assert f"### {hook}" in text, f"hook {hook} is not documented in docs/plugins.md"
        assert getattr(hookspecs, hook).__doc__.strip()


def test_every_builtin_is_documented():
    reg = get_registry()
    kernels_doc = (DOCS / "kernels.md").read_text()
    estimators_doc = (DOCS / "estimators.md").read_text()
    for entry in reg.kernels():
        assert f"`{entry.name}`" in kernels_doc
    for entry in reg.estimators():
        assert f"`{entry.name}`" in estimators_doc


def _example_module(name: str, what: str, tmp_path, monkeypatch) -> str:
    """Write the example module of docs/plugins.md whose name matches ``name`` (the first,
    marked ``<!-- example: NAME.py -->``) where it can be imported, and return its name."""
    text = (DOCS / "plugins.md").read_text()
    match = re.search(rf"<!-- example: ({name})\.py -->\n```python\n(.*?)```", text, flags=re.S)
    assert match, f"docs/plugins.md lost {what}"
    module_name, source = match.groups()
    (tmp_path / f"{module_name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return module_name


def test_plugin_example_runs(tmp_path, monkeypatch, rng):
    module_name = _example_module(r"\w+", "its example plugin", tmp_path, monkeypatch)
    try:
        # the second python block of the page: register from a script
        script = code_blocks(DOCS / "plugins.md")[1]
        namespace: dict = {}
        exec(compile(script, "docs/plugins.md", "exec"), namespace)
        assert namespace["kernel"].sigma == 2.0
        # the third block: the conformance kit on the example
        exec(compile(code_blocks(DOCS / "plugins.md")[2], "docs/plugins.md", "exec"), {})
        module = __import__(module_name)
        reg = Registry()
        reg.register(module)
        kernel = reg.get_kernel("cauchy", sigma=2.0)
        X = rng.normal(size=(6, 2))
        import numpy as np

        want = 1 / (1 + ((X[:, None] - X[None]) ** 2).sum(-1) / 4)
        np.testing.assert_allclose(kernel.gram(X), want, rtol=1e-13)
        assert reg.get_estimator("u-stat").estimate(kernel, X, X + 1).mmd > 0
    finally:
        sys.modules.pop(module_name, None)


def test_plugin_estimator_example_runs_and_is_its_definition(tmp_path, monkeypatch, rng):
    # the estimator written against monk_framework.plugin: its numbers against the block
    # V-statistics computed here by hand from the Gram matrices, and one block = v-stat
    import numpy as np

    from monk_framework.checks import check_estimator

    module_name = _example_module("monk_blockmed", "its example estimator", tmp_path, monkeypatch)
    try:
        module = __import__(module_name)
        reg = Registry()
        reg.register(module)
        kernel = reg.get_kernel("rbf", sigma=1.0)
        X, Y = rng.normal(size=(40, 2)), rng.normal(0.5, 1.0, size=(30, 2))
        est = reg.get_estimator("block-median", n_blocks=5)
        got = est.estimate(kernel, X, Y, rng=4)
        # the same partition, drawn from the estimate's own stream
        from monk_framework.core.randomness import generator
        from monk_framework.engine.partitions import median_value, pair_partition

        part = pair_partition(40, 30, 5, generator(4)[0])
        values = []
        for q in range(5):
            A, B = X[part.x_labels == q], Y[part.y_labels == q]
            values.append(np.sqrt(kernel.gram(A).mean() + kernel.gram(B).mean() - 2 * kernel.gram(A, B).mean()))
        assert got.mmd == pytest.approx(float(median_value(np.array(values))), rel=1e-12)
        one = reg.get_estimator("block-median", n_blocks=1).estimate(kernel, X, Y, rng=0)
        assert one.mmd == pytest.approx(reg.get_estimator("v-stat").estimate(kernel, X, Y).mmd, rel=1e-12)
        check_estimator(module.BlockMedian, kernel=kernel)
    finally:
        sys.modules.pop(module_name, None)


def test_readme_python_example_runs(capsys):
    blocks = code_blocks(ROOT / "README.md")
    assert blocks, "README lost its Python example"
    assert len(blocks[0].strip().splitlines()) <= 12
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "sigma" in out


def test_readme_starts_with_the_two_commands_and_ci_runs_the_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)[:2]
    assert "monkfw run" in commands[0]
    assert "pip install -q -e . " in commands[0]  # the main job installs no extra: it needs none
    assert commands[1].endswith("pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_docs_links_resolve(page):
    text = (DOCS / page).read_text()
    for target in re.findall(r"\]\(([\w./-]+\.md)\)", text):
        assert (DOCS / target).exists(), f"{page} links to missing {target}"


def test_testing_page_example_runs(capsys):
    block = code_blocks(DOCS / "testing.md")[0]
    exec(compile(block, "docs/testing.md", "exec"), {})
    out = capsys.readouterr().out
    assert "Reject H0" in out or "No evidence" in out


def test_testing_page_aggregated_example_runs(capsys):
    block = next(b for b in code_blocks(DOCS / "testing.md") if "aggregated_test(X, Y, rng=0)" in b)
    exec(compile(block, "docs/testing.md", "exec"), {})
    out = capsys.readouterr().out
    assert "MMDAgg over 20 kernels" in out


@pytest.mark.slow  # 6 s: an experiment through the page's example (.ci/run runs it)
def test_reproduction_page_example_runs(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the example writes into monk-results/
    block = code_blocks(DOCS / "studies" / "reproduction.md")[0]
    exec(compile(block, "docs/studies/reproduction.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("180 180 0 ")
    assert (tmp_path / "monk-results" / "my-exp1" / "exp1.png").exists()


def test_cli_console_examples_print_what_the_docs_show():
    # every ```console block of docs/cli.md: "$ monkfw ..." then its stdout, compared line
    # by line except the time row (rich tables at the width the docs were made with)
    import shlex

    from typer.testing import CliRunner

    text = (DOCS / "studies" / "cli-examples.md").read_text()
    blocks = code_blocks(DOCS / "studies" / "cli-examples.md", "console")
    assert blocks, "docs/studies/cli-examples.md lost its console examples"
    runner = CliRunner()
    for block in blocks:
        for chunk in block.split("$ ")[1:]:
            command, _, shown = chunk.partition("\n")
            result = runner.invoke(app, shlex.split(command)[1:], env={"COLUMNS": "88"})
            assert result.exit_code == 0, (command, result.stderr)
            keep = lambda out: [line.rstrip() for line in out.splitlines() if not line.startswith("│ time ")]  # noqa: E731
            assert keep(result.stdout) == keep(shown), command
    assert "--contamination 10" in text


def test_readme_command_examples_work_as_pasted(monkeypatch):
    # every command of the README's command-line block, from the repository root, through
    # typer's runner (the bundled example files must exist); the slow ones run on fewer points
    import shlex

    from typer.testing import CliRunner

    text = (ROOT / "README.md").read_text()
    block = text.split("## On the command line", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [c.split("#", 1)[0].strip() for c in block.replace("\\\n", " ").splitlines() if c.strip()]
    assert len(commands) >= 10
    monkeypatch.chdir(ROOT)
    runner = CliRunner()
    for command in commands:
        args = shlex.split(command)[1:]
        if "ssk" in args and "--x" not in args:
            args += ["--data-param", "n=40"]  # the bundled splice data, fewer sequences
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (command, result.stderr)


#: the pages whose python blocks have a test of their own (they need files or a module)
RUN_ELSEWHERE = {"plugins.md", "studies/reproduction.md", "testing.md", "getting-started.md", "README.md"}


def _pages_with_python() -> list[str]:
    return sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "_build" not in p.parts and code_blocks(p))


@pytest.mark.parametrize("page", [p for p in _pages_with_python() if p not in RUN_ELSEWHERE])
def test_every_other_python_block_of_the_docs_runs(page):
    # so that no code block of the docs goes stale: a page's blocks run in order, sharing a namespace
    namespace: dict = {}
    for block in code_blocks(DOCS / page):
        exec(compile(block, f"docs/{page}", "exec"), namespace)
    assert set(namespace) - {"__builtins__"}, f"docs/{page}: its code ran but defined nothing"


def test_the_pages_run_elsewhere_still_have_code():
    assert RUN_ELSEWHERE - {"README.md"} <= set(_pages_with_python())


def test_the_docs_are_for_users():
    # the run history lives in benchmarks/RESULTS.md: no dates of runs in docs/, a short
    # performance page, and examples that name a cluster use a placeholder host
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        assert not re.findall(r"\b20\d\d-\d\d-\d\d\b", text), f"docs/{page.name} holds dates of runs"
        assert not re.findall(r"tcp://(?:\d+\.){3}\d+", text), f"docs/{page.name} names a real address"
    assert len((DOCS / "performance.md").read_text().splitlines()) <= 250
    assert (ROOT / "benchmarks" / "RESULTS.md").exists()


def test_the_getting_started_page_runs_and_is_short(tmp_path, monkeypatch, capsys):
    page = DOCS / "getting-started.md"
    assert len(page.read_text().split()) <= 800
    monkeypatch.chdir(tmp_path)  # its plot is saved where it runs
    namespace: dict = {}
    for block in code_blocks(page):
        exec(compile(block, "docs/getting-started.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "Permutation test" in out and "MMD = " in out and (tmp_path / "witness.png").stat().st_size > 1000
    # the output shown on the page is what the code prints
    for shown in ("u-stat: 0.374 clean, 57.315 dirty", "monk-bcd-fast:n_blocks=11: 0.927 clean, 0.817 dirty"):
        assert shown in out and shown in page.read_text()


@pytest.mark.slow
def test_the_docs_and_the_api_reference_build_without_warnings(tmp_path):
    import subprocess

    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(tmp_path / "html")], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr[-5000:]
    api = (tmp_path / "html" / "api.html").read_text()
    for name in ("permutation_test", "aggregated_test", "robust_test", "split_test", "estimate", "embed"):
        assert f'id="monk_framework.{name}"' in api, name


@pytest.mark.slow  # a pip install and two processes: about 15 s
def test_the_plugin_example_installs_as_written_and_works_in_a_robust_test(tmp_path):
    import subprocess

    text = (DOCS / "plugins.md").read_text()
    module = re.search(r"<!-- example: monk_cauchy\.py -->\n```python\n(.*?)```", text, flags=re.S)
    project = re.search(r"<!-- example: pyproject\.toml -->\n```toml\n(.*?)```", text, flags=re.S)
    assert module and project, "docs/plugins.md lost its example plugin or its pyproject.toml"
    (tmp_path / "monk_cauchy.py").write_text(module.group(1))
    (tmp_path / "pyproject.toml").write_text(project.group(1))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps"]  # as written: pip install .
    subprocess.run([*pip, str(tmp_path)], check=True, capture_output=True)
    try:
        listed = subprocess.run([str(Path(sys.executable).with_name("monkfw")), "plugins", "--json"], capture_output=True, text=True, check=True)
        assert "cauchy" in listed.stdout and "monk-cauchy==0.1.0" in listed.stdout
        code = (
            "import numpy as np; from monk_framework import robust_test; g = np.random.default_rng(0); "
            "r = robust_test(g.normal(size=(80, 2)), g.normal(1.0, 1.0, size=(80, 2)), kernel='cauchy:sigma=2', "
            "contamination=2, n_permutations=99, rng=0); print(r.method, r.reject)"
        )
        ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert ran.stdout.split() == ["dc", "True"], ran.stdout + ran.stderr
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", "monk-cauchy"], capture_output=True)


def test_the_guide_pages_can_be_read_in_one_sitting():
    # studies and proofs live under docs/studies/; a guide page answers one question
    for page in DOCS.glob("*.md"):
        words = len(page.read_text().split())
        assert words <= (800 if page.name == "getting-started.md" else 2500), f"{page.name}: {words} words"
