"""The command index. `nox -l` lists sessions; `./dev` is the zero-install path to the same things."""

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests"]
PY = "3.12"


def _install(session, *extras):
    spec = ".[" + ",".join(extras) + "]" if extras else "."
    session.install("-c", "constraints.txt", "-e", spec)


@nox.session(python=PY)
def tests(session):
    """Run the test suite."""
    _install(session, "server", "test")
    session.run("pytest", *session.posargs)


@nox.session(python=PY)
def lint(session):
    """ruff and mypy on the package."""
    session.install("ruff", "mypy")
    session.run("ruff", "check", "geoengine", "tests", "benchmarks")
    session.run("mypy", "--ignore-missing-imports", "geoengine")


@nox.session(python=PY)
def bench(session):
    """Run the benchmarks (peers are installed by each benchmark script)."""
    _install(session, "server", "test")
    for script in sorted(__import__("pathlib").Path("benchmarks").glob("*.py")):
        session.run("python", str(script), *session.posargs)


@nox.session(python=PY)
def serve(session):
    """Serve the default region."""
    _install(session, "server")
    session.run("geoengine", "serve", *session.posargs)


@nox.session(python=PY)
def fuzz(session):
    """A larger schemathesis run (every operation, positive and negative, 500 examples each, every check)."""
    _install(session, "server", "test")
    session.run("pytest", "tests/api", "-q", *session.posargs, env={"SCHEMATHESIS_EXAMPLES": "500", "SCHEMATHESIS_ALL_CHECKS": "1"})
