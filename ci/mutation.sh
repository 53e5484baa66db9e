#!/usr/bin/env bash
# The mutation score of the verdict code (perf/mutation.py: every module of commstack.tools and
# commstack.results, functions and the code that runs at import) against the figure
# recorded in perf/mutation-score.yaml: exit 1 when a module's score fell below it, with the survivors
# listed. Weekly or by hand, not on every push: each mutant runs the unit tests that reach its line.
set -euo pipefail
cd "$(dirname "$0")/.."
bin/commstack venv
exec .venv/bin/python perf/mutation.py --check perf/mutation-score.yaml "$@"
