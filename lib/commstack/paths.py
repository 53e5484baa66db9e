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
