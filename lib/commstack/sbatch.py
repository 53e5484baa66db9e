"""What may stand on an #SBATCH line of a job script (commstack.run.batch), checked by the system schema
(commstack.config). sbatch splits such a line into options at whitespace, after its own quoting: a value
is one word that is not an option, and an entry of a flags list (salloc_flags, sbatch_flags) is one option,
none that the script sets itself or that names a file the job writes."""

import re

#: the options the job script sets (or that name a file or directory the job writes), as long and short names
OWN_OPTIONS = {"job-name", "J", "nodes", "N", "ntasks", "n", "time", "t", "output", "o", "error", "e", "input", "i",
               "chdir", "D", "partition", "p", "account", "A", "reservation", "qos", "q"}
_OPTION = re.compile(r"--(?P<long>[A-Za-z][A-Za-z0-9-]*)(=(?P<value>.*))?|-(?P<short>[A-Za-z])(?P<attached>.*)")


def value(v: str) -> str:
    """`v` when it is one word, not an option; ValueError with the rule."""
    if not v or v.startswith("-") or any(c.isspace() or c in "\"'" for c in v):
        raise ValueError("an #SBATCH value is one word: no whitespace or quotes, not starting with '-' (sbatch "
                         "splits the line into options)")
    return v


def option(v: str) -> str:
    """`v` when it is one option, `--name[=value]` or `-x[value]`, that a flags list may hold; ValueError."""
    m = _OPTION.fullmatch(v)
    if not m:
        raise ValueError("an sbatch option is one word, --name[=value] or -x[value]")
    name, given = (m["long"], m["value"]) if m["long"] else (m["short"], m["attached"])
    if name in OWN_OPTIONS:
        raise ValueError(f"option {name!r} is set by the job script or names a file it writes; not a flag")
    if given:
        value(given)
    return v
