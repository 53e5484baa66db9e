"""The documentation site and the CI files, checked with the real tools.

- both pipelines validate against check-jsonschema's vendored schemas (GitLab CI, GitHub workflows);
- every script a CI job calls (and the scripts those call) exists and is executable;
- the site builds with `mkdocs build --strict`, tabs and admonitions rendered;
- every `bin/commstack <sub>` in the docs, README.md, DEVELOPERS.md and the CI files is a real
  subcommand with real options (asked of the CLI itself, and of pytest for `test`/`run`);
- the pinned-stack table of docs/index.md is envs/common/pins.yaml and toolchain.yaml.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from commstack.spack.envs import ENVS
from commstack.config import load_system

TOP = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the venv's bin: mkdocs and check-jsonschema come with requirements/dev.txt
GITLAB = TOP / "ci" / "gitlab-ci.yml"
GITHUB = TOP / ".github" / "workflows" / "ci.yml"
DOCS = sorted((TOP / "docs").glob("*.md"))
PROSE = [*DOCS, TOP / "README.md", TOP / "DEVELOPERS.md"]
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def run(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, cwd=TOP, env=ENV, timeout=300, **kw)


# ---- (a) schemas ---------------------------------------------------------------------------------

def check_jsonschema(schema: str, path: Path) -> subprocess.CompletedProcess:
    return run(str(BIN / "check-jsonschema"), "--builtin-schema", schema, str(path))


@pytest.mark.parametrize("path,schema", [(GITLAB, "vendor.gitlab-ci"), (GITHUB, "vendor.github-workflows")],
                         ids=["gitlab", "github"])
def test_ci_file_matches_its_schema(path, schema):
    proc = check_jsonschema(schema, path)
    assert proc.returncode == 0 and "ok -- validation done" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("path,schema,good,bad,where", [
    (GITLAB, "vendor.gitlab-ci", "allow_failure: true ", "allow_failure: sometimes ", "allow_failure"),
    (GITHUB, "vendor.github-workflows", "runs-on: ubuntu-latest", "runs_on: ubuntu-latest", "runs_on"),
], ids=["gitlab", "github"])
def test_schema_check_rejects_a_broken_file(tmp_path, path, schema, good, bad, where):
    """The validator validates: one wrong key or value in a copy fails, naming it."""
    text = path.read_text()
    assert good in text
    broken = tmp_path / path.name
    broken.write_text(text.replace(good, bad, 1))
    proc = check_jsonschema(schema, broken)
    assert proc.returncode == 1 and "Schema validation errors" in proc.stdout and where in proc.stdout, proc.stdout


# ---- (b) the scripts CI calls --------------------------------------------------------------------

#: a path under bin/, ci/ or .ci/ as a word of its own (not the tail of .venv/bin/python, nor a
#: sentence's full stop)
SCRIPT = re.compile(r"(?<![\w./$-])((?:\.ci|ci|bin)(?:/[\w.-]*[\w-])+)")
GITLAB_KEYWORDS = {"default", "include", "stages", "variables", "workflow", "image", "services", "cache",
                   "before_script", "after_script"}


def flat(lines) -> list[str]:
    if lines is None:
        return []
    if isinstance(lines, str):
        return [lines]
    return [x for item in lines for x in flat(item)]


def gitlab_jobs(data: dict) -> dict[str, list[str]]:
    """Each job's command lines, with `extends:` and `default:` applied as GitLab does for scripts."""
    def resolved(name: str) -> dict:
        job = data[name]
        merged: dict = {}
        for parent in flat(job.get("extends")):
            merged.update(resolved(parent))
        merged.update(job)
        return merged

    jobs = {}
    for name, job in data.items():
        if name in GITLAB_KEYWORDS or name.startswith(".") or not isinstance(job, dict):
            continue
        job = resolved(name)
        before = job["before_script"] if "before_script" in job else data.get("default", {}).get("before_script")
        jobs[name] = flat(before) + flat(job.get("script")) + flat(job.get("after_script"))
    return jobs


def github_jobs(data: dict) -> dict[str, list[str]]:
    return {name: [s["run"] for s in job["steps"] if "run" in s] for name, job in data["jobs"].items()}


def called_scripts(lines: list[str]) -> set[str]:
    return {m for line in lines for m in SCRIPT.findall(line)}


def missing_scripts(paths: set[str]) -> list[str]:
    """Paths that are not executable files, following the scripts under ci/ that they call."""
    seen, todo, bad = set(), set(paths), []
    while todo:
        rel = todo.pop()
        seen.add(rel)
        f = TOP / rel
        if not (f.is_file() and os.access(f, os.X_OK)):
            bad.append(rel)
            continue
        if rel.startswith(("ci/", ".ci/")):
            todo |= called_scripts(f.read_text().splitlines()) - seen
    return sorted(bad)


@functools.cache
def ci_jobs() -> dict[str, dict[str, list[str]]]:
    return {"gitlab": gitlab_jobs(yaml.safe_load(GITLAB.read_text())),
            "github": github_jobs(yaml.safe_load(GITHUB.read_text()))}


@pytest.mark.parametrize("ci", ["gitlab", "github"])
def test_every_job_calls_our_scripts_and_they_exist(ci):
    jobs = ci_jobs()[ci]
    assert len(jobs) >= 5, jobs
    for name, lines in jobs.items():
        assert called_scripts(lines), f"{ci} job {name} calls no script under ci/ or bin/: {lines}"
    calls = called_scripts([line for lines in jobs.values() for line in lines])
    # the entry points .ci/run uses, and the spack tier's
    assert {"ci/install-deps.sh", "bin/commstack", "ci/spack-tier.sh", "ci/drift-canary.sh"} <= calls, calls
    assert missing_scripts(calls) == []


def test_a_missing_or_plain_file_script_is_reported(tmp_path):
    jobs = gitlab_jobs({"default": {"before_script": ["ci/install-deps.sh"]},
                        ".t": {"script": ["ci/no-such-script.sh --x"]},
                        "a": {"extends": ".t"},
                        "b": {"before_script": [], "script": [["ci/gitlab-ci.yml"], ".venv/bin/python -V"]}})
    assert jobs == {"a": ["ci/install-deps.sh", "ci/no-such-script.sh --x"],
                    "b": ["ci/gitlab-ci.yml", ".venv/bin/python -V"]}
    calls = called_scripts(jobs["a"] + jobs["b"])
    assert calls == {"ci/install-deps.sh", "ci/no-such-script.sh", "ci/gitlab-ci.yml"}
    assert missing_scripts(calls) == ["ci/gitlab-ci.yml", "ci/no-such-script.sh"]


def test_github_uses_no_action_but_checkout():
    data = yaml.safe_load(GITHUB.read_text())
    uses = {s["uses"] for job in data["jobs"].values() for s in job["steps"] if "uses" in s}
    assert uses and all(u.startswith("actions/checkout@") for u in uses), uses


def test_concretization_matrix_is_every_env():
    gitlab = yaml.safe_load(GITLAB.read_text())["concretize"]["parallel"]["matrix"]
    github = yaml.safe_load(GITHUB.read_text())["jobs"]["concretize"]["strategy"]["matrix"]["env"]
    assert sorted(v for entry in gitlab for v in entry["COMMSTACK_ENV"]) == sorted(ENVS)
    assert sorted(github) == sorted(ENVS)


def test_gitlab_keeps_results_and_junit():
    data = yaml.safe_load(GITLAB.read_text())
    artifacts = data[".results"]["artifacts"]
    assert artifacts["reports"]["junit"] == "results/junit.xml" and "results/" in artifacts["paths"]
    assert data["drift-canary"]["allow_failure"] is True
    assert data["site"]["tags"] and set(data["stages"]) == {"lint", "concretize", "test", "install"}


# ---- (c) the site --------------------------------------------------------------------------------

def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return run(str(BIN / "mkdocs"), "build", "--strict", "-f", str(config), "-d", str(site))


def test_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    proc = mkdocs_build(TOP / "mkdocs.yml", site)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nav = yaml.safe_load((TOP / "mkdocs.yml").read_text())["nav"]
    pages = [page for entry in nav for page in entry.values()]
    assert sorted(pages) == sorted(p.name for p in DOCS), "every page in nav, every nav entry a page"
    html = {p: (site / ("" if p == "index.md" else p[:-3]) / "index.html").read_text() for p in pages}
    for page, text in html.items():
        assert '=== "' not in text and "!!! " not in text, f"{page}: a tab or admonition left unrendered"
    assert 'class="tabbed-set' in html["getting-spack.md"] and 'class="admonition' in html["index.md"]


def test_strict_build_fails_on_a_broken_link(tmp_path):
    shutil.copytree(TOP / "docs", tmp_path / "docs")
    shutil.copy(TOP / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "ci.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    proc = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode == 1 and "no-such-page.md" in proc.stderr, proc.stderr


#: a pointer into the docs from code or the README: docs/PAGE.md#anchor
POINTER = re.compile(r"docs/([\w-]+\.md)(?:#([\w-]+))?")


def anchors(page: Path) -> set[str]:
    """The anchors the site gives a page: its headings as MkDocs' toc slugs them, and its explicit <a id>s."""
    from markdown.extensions.toc import slugify
    text = page.read_text()
    return ({slugify(re.sub(r"[`*]", "", h), "-") for h in re.findall(r"^#+ (.*)$", text, re.M)}
            | set(re.findall(r'<a id="([^"]+)"', text)))


def test_every_pointer_into_the_docs_from_code_or_the_readme_resolves():
    """Docstrings say the rules once, in the docs, and point there: a pointer must name a page and an anchor that
    exist (a renamed heading would leave the code pointing nowhere)."""
    known = {page.name: anchors(page) for page in DOCS}
    sources = [*sorted((TOP / "lib").rglob("*.py")), TOP / "README.md", TOP / "DEVELOPERS.md"]
    pointers = [(src.relative_to(TOP), page, anchor) for src in sources
                for page, anchor in POINTER.findall(src.read_text())]
    assert len(pointers) > 50, pointers
    bad = [f"{src}: docs/{page}" + (f"#{anchor}" if anchor else "") for src, page, anchor in pointers
           if page not in known or (anchor and anchor not in known[page])]
    assert not bad, bad


def test_a_pointer_to_a_heading_that_is_gone_is_caught(tmp_path):
    page = tmp_path / "harness.md"
    page.write_text("# Running the harness\n\n## Running an env's binaries: `--env`\n<a id=\"errors\"></a>\n")
    assert anchors(page) == {"running-the-harness", "running-an-envs-binaries-env", "errors"}
    assert POINTER.findall("see docs/harness.md#no-such-heading") == [("harness.md", "no-such-heading")]

# ---- (d) every bin/commstack command shown is real -----------------------------------------------

#: `bin/commstack SUB rest-of-command`, the command ending at a backtick, comment, table cell or ")"
COMMAND = re.compile(r"bin/commstack[ \t]+([a-z][\w-]*)([^`\n#|)]*)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")


@functools.cache
def cli() -> dict[str, set[str]]:
    """Each subcommand and its options, from the argparse help of the CLI itself."""
    top = run(sys.executable, "-m", "commstack", "--help")
    assert top.returncode == 0, top.stderr
    subs = re.search(r"\{([\w,-]+)\}", top.stdout).group(1).split(",")
    options = {sub: set(OPTION.findall(run(sys.executable, "-m", "commstack", sub, "--help").stdout))
               for sub in subs}
    # bin/commstack handles these itself, before Python (`bin/commstack venv`)
    for sub in re.findall(r'\[ "\$\{1:-\}" = (\w+) \]', (TOP / "bin" / "commstack").read_text()):
        options[sub] = set()
    return options


def bad_commands(text: str, known: dict[str, set[str]]) -> list[str]:
    bad = []
    for sub, rest in COMMAND.findall(text):
        if sub not in known:
            bad.append(f"bin/commstack {sub}: no such subcommand")
        else:
            bad += [f"bin/commstack {sub} {opt}: no such option" for opt in OPTION.findall(rest)
                    if opt not in known[sub]]
    return bad


def test_cli_knows_its_subcommands():
    known = cli()
    assert {"run", "test", "setup", "lock", "preflight", "containerize", "images", "slurm", "venv"} <= set(known)
    assert {"--spack-source", "--packages", "--force", "--detect"} <= known["setup"]
    assert {"--system", "--slurm", "--osu-prefix"} <= known["test"] and "--junit-xml" not in known["test"]
    assert {"--system", "--results", "--osu-prefix", "--allow-not-run", "--dry-run"} <= known["run"]


@pytest.mark.parametrize("path", PROSE + [GITLAB, GITHUB], ids=lambda p: str(p.relative_to(TOP)))
def test_commands_shown_are_real(path):
    assert bad_commands(path.read_text(), cli()) == []


def test_the_docs_show_commands():
    """The check above sees the commands (a COMMAND that matched nothing would pass any text)."""
    shown = {sub for p in DOCS for sub, _ in COMMAND.findall(p.read_text())}
    assert {"run", "test", "setup", "lock", "preflight", "containerize", "images", "venv"} <= shown, shown


def test_a_made_up_command_is_caught():
    text = ("$ bin/commstack deploy --now\n`bin/commstack setup --frobnicate`, then "
            "`bin/commstack test --system alps-gh200 -m slurm` and bin/commstack setup --force (or not)\n")
    assert bad_commands(text, cli()) == ["bin/commstack deploy: no such subcommand",
                                         "bin/commstack setup --frobnicate: no such option"]


# ---- one source of truth for versions ------------------------------------------------------------

def test_pinned_stack_table_is_the_pins():
    pins = yaml.safe_load((TOP / "envs" / "common" / "pins.yaml").read_text())["packages"]
    toolchain = yaml.safe_load((TOP / "toolchain.yaml").read_text())
    rows = re.findall(r"^\| `([\w-]+)` \| ([^|]+?) \| ([^|]+?) \|", (TOP / "docs" / "index.md").read_text(), re.M)
    table = {name: (version, kind) for name, version, kind in rows}
    want = {}
    for name, pkg in pins.items():
        kind = next(k for k in ("require", "prefer", "version") if k in pkg)
        want[name] = (next(str(v).lstrip("@") for v in pkg[kind] if kind == "version" or str(v).startswith("@")), kind)
    want["spack"] = (toolchain["spack"]["tag"], "`toolchain.yaml`")
    want["spack-packages"] = (toolchain["spack_packages"]["tag"], "`toolchain.yaml`")
    assert table == want


def test_toolchain_versions_in_prose_are_the_pins():
    toolchain = yaml.safe_load((TOP / "toolchain.yaml").read_text())
    for path in PROSE:
        text = path.read_text()
        for tag in re.findall(r"spack-packages (v\d{4}\.\d+\.\d+)", text):
            assert tag == toolchain["spack_packages"]["tag"], f"{path.name}: spack-packages {tag}"
        for tag in re.findall(r"Spack (v\d+\.\d+\.\d+)", text):
            assert tag == toolchain["spack"]["tag"], f"{path.name}: Spack {tag}"


def test_system_examples_load(tmp_path):
    """The YAML examples of docs/new-system.md are valid system files, as systems.py checks them."""
    blocks = re.findall(r"```yaml\n(.*?)```", (TOP / "docs" / "new-system.md").read_text(), re.S)
    examples = [b for b in blocks if "launcher:" in b]
    assert len(examples) == 2
    (tmp_path / "references").symlink_to(TOP / "systems" / "references")  # as beside systems/*.yaml
    for i, block in enumerate(examples):
        f = tmp_path / f"example{i}.yaml"
        f.write_text(textwrap.dedent(block))
        system = load_system(str(f))
        assert system.node.gpus == 4 and system.launcher.mpi in ("pmix", "cray_shasta")
