"""Where the repository's data lives. commstack is installed editable from its repository
(`bin/commstack` does that), so the package sits in lib/ beside the data it reads;
COMMSTACK_HOME names another checkout to work on (a copy, or an install outside the repo)."""

import os
from pathlib import Path

TOP = Path(os.environ.get("COMMSTACK_HOME") or Path(__file__).resolve().parents[2]).resolve()
SYSTEMS = TOP / "systems"
SUITES = TOP / "suites"
CONTAINERS = TOP / "containers"
IMAGES = CONTAINERS / "images.yaml"


def absolute(path: str) -> str:
    """A path given on a command line, absolute: it goes into command lines (srun's, mpirun's), where a
    relative one starting with '-' would be read as an option. "" stays "" (none)."""
    return os.path.abspath(path) if path else path
