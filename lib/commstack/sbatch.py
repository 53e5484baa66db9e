"""What may stand on an #SBATCH line of a job script (commstack.run.batch) or on commstack's salloc, checked by
the system schema (commstack.config); the rules: docs/harness.md#untrusted-input. An entry is read as getopt_long
reads it (abbreviations, bundled short options), against the program's own option table, before it is judged."""

import re
from typing import NamedTuple

# sbatch's and salloc's getopt_long tables in Debian 12's slurm-wlm 22.05.8 (dumped from the binaries' call to
# getopt_long; their --help lists all but a few): NAME= takes a value, NAME[=] may, X|NAME is -X too, A>NAME is NAME.
# What both take, then each one's own.
BOTH_TABLE = """
A|account= acctg-freq= b|begin= bb= bbf= cluster-constraint= D|chdir= cluster= M|clusters= comment= container= context=
contiguous C|constraint= S|core-spec= cores-per-socket= cpu-freq= cpus-per-gpu= c|cpus-per-task= deadline= delay-boot=
d|dependency= m|distribution= x|exclude= exclusive[=] B|extra-node-info= get-user-env[=] gid= gpu-bind= gpu-freq=
G|gpus= gpus-per-node= gpus-per-socket= gpus-per-task= gres= gres-flags= h|help hint= H|hold J|job-name= L|licenses=
mail-type= mail-user= mcs-label= mem= mem-bind= mem-per-cpu= mem-per-gpu= mincpus= network= nice[=] k|no-kill[=]
F|nodefile= w|nodelist= N|nodes= n|ntasks= ntasks-per-core= ntasks-per-gpu= ntasks-per-node= ntasks-per-socket=
ntasks-per-tres= O|overcommit s|oversubscribe p|partition= power= prefer= priority= profile= q|qos= Q|quiet reboot
reservation= signal= sockets-per-node= spread-job switches= tasks-per-node>ntasks-per-node thread-spec=
threads-per-core= t|time= time-min= tmp= uid= use-min-nodes v|verbose V|version usage wait-all-nodes= wckey=
"""
SBATCH_TABLE = BOTH_TABLE + """
a|array= batch= e|error= export= export-file= ignore-pbs i|input= kill-on-invalid-dep= no-requeue open-mode=
o|output= parsable propagate[=] requeue test-only W|wait wrap=
"""
SALLOC_TABLE = BOTH_TABLE + "bell I|immediate[=] K|kill-command[=] no-bell no-shell x11[=]"

#: what the run sets (the job's name, size and time; its partition, from the system's), or names a file or directory
#: the job uses: no flags list may hold these
RUN_OPTIONS = {"job-name", "nodes", "ntasks", "time", "partition", "output", "error", "input", "chdir"}
#: what a job script sets from the system's batch section: not in sbatch_flags; salloc_flags may hold them (the
#: interactive salloc takes them no other way) where the batch section does not set them too (config.System)
BATCH_OPTIONS = {"account", "reservation", "qos"}


class Option(NamedTuple):
    name: str    # the long name; an alias's is the option's own
    takes: str   # getopt_long's has_arg: "" no value, "=" a value, "[=]" an optional one


class Table(NamedTuple):
    program: str
    long: dict[str, Option]    # every long name, aliases included
    short: dict[str, Option]


_ENTRY = re.compile(r"(?:(?P<short>[A-Za-z])\|)?(?P<name>[a-z0-9-]+)(?:>(?P<alias_of>[a-z0-9-]+)|(?P<takes>=|\[=\])?)")


def _table(program: str, text: str) -> Table:
    long, short = {}, {}
    for entry in text.split():
        m = _ENTRY.fullmatch(entry)
        assert m, entry
        o = long[m["alias_of"]] if m["alias_of"] else Option(m["name"], m["takes"] or "")
        long[m["name"]] = o
        if m["short"]:
            short[m["short"]] = o
    return Table(program, long, short)


SBATCH, SALLOC = _table("sbatch", SBATCH_TABLE), _table("salloc", SALLOC_TABLE)
_OPTION = re.compile(r"--(?P<long>[^=]+)(=(?P<value>.*))?|-(?P<short>[^-])(?P<attached>.*)", re.S)


def value(v: str) -> str:
    """`v` when it is one word, not an option; ValueError with the rule."""
    if not v or v.startswith("-") or any(c.isspace() or c in "\"'" for c in v):
        raise ValueError("an #SBATCH value is one word: no whitespace or quotes, not starting with '-' (sbatch "
                         "splits the line into options)")
    return v


def resolve(v: str, table: Table) -> tuple[Option, str | None]:
    """The option `v` is to `table`'s program, and its value (None: none given), read as getopt_long reads one word
    (docs/harness.md#untrusted-input says how); ValueError quoting `v` where it is not one option with its value."""
    m = _OPTION.fullmatch(v)
    if not m:
        raise ValueError(f"{v!r} is not one option: an entry is --name[=value] or -x[value]")
    if m["long"] is not None:
        name, given = m["long"], m["value"]
        matches = {table.long[name]} if name in table.long else {o for n, o in table.long.items() if n.startswith(name)}
        if len(matches) > 1:
            raise ValueError(f"{v!r} is ambiguous to {table.program}: it abbreviates "
                             + ", ".join(sorted(f"--{o.name}" for o in matches)))
        if not matches:
            raise ValueError(f"{v!r} is not an option of {table.program} (Slurm 22.05)")
        found = matches.pop()
        if found.takes == "" and given is not None:
            raise ValueError(f"{v!r}: {table.program}'s --{found.name} takes no value")
        if found.takes == "=" and given is None:
            raise ValueError(f"{v!r}: {table.program}'s --{found.name} takes a value: write --{found.name}=VALUE")
        return found, given
    letter, rest = m["short"], m["attached"]
    found = table.short.get(letter)
    if found is None:
        raise ValueError(f"{v!r}: -{letter} is not an option of {table.program} (Slurm 22.05)")
    if found.takes == "" and rest:
        raise ValueError(f"{v!r}: -{letter} takes no value, and short options are not bundled here: one option "
                         "an entry")
    if found.takes == "=" and not rest:
        raise ValueError(f"{v!r}: {table.program}'s -{letter} takes a value: write -{letter}VALUE")
    return found, rest or None


def _check(v: str, table: Table, refused: set[str]) -> str:
    found, given = resolve(v, table)
    if found.name in refused:
        said = "" if v.lstrip("-").split("=")[0] == found.name else f" (to {table.program}, --{found.name})"
        why = f"batch.{found.name} gives it" if found.name in BATCH_OPTIONS else \
            "the run sets it or it names a file the job uses"
        raise ValueError(f"option {v!r}{said} is not a flag: {why}")
    if given:
        value(given)
    return v


def option(v: str) -> str:
    """`v` when it is one option of sbatch that sbatch_flags may hold; ValueError."""
    return _check(v, SBATCH, RUN_OPTIONS | BATCH_OPTIONS)


def salloc_option(v: str) -> str:
    """`v` when it is one option that salloc_flags may hold: one of salloc's, and of sbatch's (an #SBATCH line of a
    batch job too), that neither reads as what the run sets; ValueError."""
    _check(v, SALLOC, RUN_OPTIONS)
    try:
        return _check(v, SBATCH, RUN_OPTIONS)
    except ValueError as e:
        raise ValueError(f"{e} (a salloc flag is an #SBATCH line of a batch job too)") from None
