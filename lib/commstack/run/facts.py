"""Stack facts kept with each result, taken on the compute nodes by a probe placed like the step (once per run for
steps placed alike; docs/harness.md#batch-jobs-history-and-exports), and from NCCL's own INFO lines in its output.
The probe is a shell script passed inline (`bash -c`), so it needs no file on the node or in the
container; each line it prints is `@@ <rank> <host> <section> <text>`, parsed strictly."""

from __future__ import annotations

import re
from pathlib import Path

from commstack.errors import ParseError, TruncatedError, UnknownFormatError

#: per rank: what selects its GPU and NIC; per node (local rank 0): the MPI the binary links, fi_info, GPUs, NICs.
#: `$1` is the benchmark binary (may be missing inside a container: then no MPI facts), `$2` and `$3` the fi_info and
#: ucx_info to run (empty: the ones on PATH), then the benchmark's variables: fi_info runs with the FI_* ones
PROBE = r"""
B=$1; FI=${2:-$(command -v fi_info)}; UI=${3:-$(command -v ucx_info)}; shift 3
FE=(); for v in "$@"; do [[ $v == FI_*=* ]] && FE+=("$v"); done
fiinfo() { env "${FE[@]}" "$FI" "$@"; }
R=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-0}}; H=$(hostname)
p() { while IFS= read -r l; do printf '@@ %s %s %s %s\n' "$R" "$H" "$1" "$l"; done; }
{ env; printf '%s\n' "$@"; } | grep -E '^(CUDA_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|SLURM_LOCALID|'\
'FI_PROVIDER|FI_CXI_[A-Z_]*DEVICE[A-Z_]*|UCX_NET_DEVICES|NCCL_NET|NCCL_SOCKET_IFNAME|OMPI_MCA_btl_tcp_if_include|'\
'MPICH_OFI_NIC_POLICY)=' | p variables
[ "${SLURM_LOCALID:-${OMPI_COMM_WORLD_LOCAL_RANK:-0}}" = 0 ] || exit 0
lib=$(ldd "$B" 2>/dev/null | awk '/libmpi\.so/ {print $3; exit}')
[ -n "$lib" ] && echo "$lib" | p libmpi
oi=""; [ -n "$lib" ] && oi=$(dirname "$(dirname "$(readlink -f "$lib")")")/bin/ompi_info
[ -x "$oi" ] || oi=$(command -v ompi_info)
[ -n "$lib" ] && [ -n "$oi" ] && "$oi" --parsable --all 2>/dev/null \
  | grep -E '^ompi:version:full:|_built_with_cuda_support:value:|^mca:(btl|mtl|pml|osc):[a-z0-9_]+:version:"component' \
  | p ompi_info
[ -n "$FI" ] && { fiinfo 2>/dev/null | grep -m1 '^provider:' | p fi_selected
  fiinfo -l 2>/dev/null | grep -E '^[a-z0-9_;+:]+:$' | p fi_providers; }
[ -n "$FI" ] && fiinfo -l 2>/dev/null | grep -qx 'cxi:' && fiinfo -v -p cxi 2>/dev/null \
  | grep -E '^(fi_info:|    fi_domain_attr:|        name: .*|    fi_fabric_attr:|        prov_name: .*|    nic:.*'\
'|        fi_link_attr:|            (state|speed): .*)$' | p fi_cxi
[ -n "$UI" ] && "$UI" -d 2>/dev/null | grep -E '^# *(Memory domain|Transport|Device): ' \
  | p ucx_info
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | p gpus
ls /sys/class/net 2>/dev/null | grep -vx lo | p nics
ls /sys/class/cxi 2>/dev/null | p cxi
exit 0
"""
PROBE_LINE = re.compile(r"@@ (\d+) (\S+) (variables|libmpi|ompi_info|fi_selected|fi_providers|fi_cxi|ucx_info|gpus|nics"
                        r"|cxi) (.*)")


def probe_argv(binary: str, programs: dict[str, str] | None = None) -> list[str]:
    """The probe of `binary`; `programs`: {"fi_info": path, "ucx_info": path} where not the ones on PATH."""
    programs = programs or {}
    return ["bash", "-c", PROBE, "commstack-probe", binary, programs.get("fi_info", ""), programs.get("ucx_info", "")]


def parse_probe(text: str) -> dict:
    """The probe's output -> {"nodes": {host: facts}, "ranks": [{rank, host, variables}]}; a line that is
    not a probe line is a ParseError quoting it (the probe's stdout carries nothing else)."""
    nodes: dict[str, dict] = {}
    ranks: dict[int, dict] = {}
    raw: dict[tuple[str, str], list[str]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = PROBE_LINE.fullmatch(line)
        if not m:
            raise ParseError("not a commstack probe line", line, n)
        rank, host, section, value = int(m.group(1)), m.group(2), m.group(3), m.group(4)
        if section == "variables":
            key, _, val = value.partition("=")
            ranks.setdefault(rank, {"rank": rank, "host": host, "variables": {}})["variables"][key] = val
        else:
            raw.setdefault((host, section), []).append(value)
    for host in sorted({h for h, _ in raw} | {r["host"] for r in ranks.values()}):
        get = lambda section: raw.get((host, section), [])  # noqa: E731
        facts = {"gpus": get("gpus"), "nics": get("nics"), "cxi_devices": get("cxi"),
                 "libfabric_providers": sorted({p.rstrip(":") for p in get("fi_providers")}),
                 "libfabric_provider": next((v.split(":", 1)[1].strip() for v in get("fi_selected")), None),
                 # cxi's NICs (fi_info -v -p cxi): domain and link state; UCX's transports/devices (ucx_info -d)
                 "cxi_links": {n["domain"]: n.get("link_state") for n in nics("\n".join(get("fi_cxi")))},
                 "ucx_transports": sorted({f"{t['transport']}/{t['device']}"
                                           for t in transports("\n".join(get("ucx_info")))})}
        libmpi = next(iter(get("libmpi")), None)
        facts.update(_mpi(libmpi, "\n".join(get("ompi_info"))) if libmpi else {"libmpi": None})
        nodes[host] = facts
    for r in ranks.values():  # which of its node's GPUs a rank was given
        gpus = nodes[r["host"]]["gpus"]
        cvd = r["variables"].get("CUDA_VISIBLE_DEVICES", "")
        r["gpu"] = gpus[int(cvd)] if cvd.isdigit() and int(cvd) < len(gpus) else None
        r["nic_selection"] = {k: v for k, v in r["variables"].items()
                              if k not in ("CUDA_VISIBLE_DEVICES", "SLURM_LOCALID")}
    return {"nodes": nodes, "ranks": [ranks[k] for k in sorted(ranks)]}


def _mpi(libmpi: str, ompi_info: str) -> dict:
    """MPI library, version and CUDA support from the linked libmpi and (Open MPI) ompi_info's lines."""
    facts: dict = {"libmpi": libmpi}
    version = re.search(r"^ompi:version:full:(\S+)$", ompi_info, re.M)
    if version:
        cuda = re.search(r"(?:mpi|opal)_built_with_cuda_support:value:(\w+)", ompi_info)
        comps = sorted(set(re.findall(r'^mca:((?:btl|mtl|pml|osc):\w+):version:"component', ompi_info, re.M)))
        facts.update(mpi_library="Open MPI", mpi_version=version.group(1),
                     cuda_aware=cuda.group(1) == "true" if cuda else None, components=comps)
    elif "cray" in libmpi or "mpich" in libmpi:
        facts.update(mpi_library="MPICH (Cray MPICH)" if "cray" in libmpi else "MPICH",
                     mpi_version=Path(libmpi).name)
    return facts


# ---------------------------------------------------------------------------------- fi_info

SECTION = re.compile(r"^(?P<indent> {4}| {8})(?P<name>fi_\w+|nic):(?: (?P<value>.*))?$")
FIELD = re.compile(r"^(?P<indent> +)(?P<key>\w+): ?(?P<value>.*)$")


def nics(text: str) -> list[dict[str, str]]:
    """`fi_info -v -p PROVIDER` (fi_tostr of each fi_info, `---` between them): per entry the provider,
    the domain (cxi0 ...) and, where the provider reports its NIC (cxi does; tcp prints `nic: (nil)`),
    the link state (FI_LINK_UP, FI_LINK_DOWN, FI_LINK_UNKNOWN) and speed."""
    out: list[dict[str, str]] = []
    section: list[str] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line in ("---", ""):
            continue
        if line == "fi_info:":
            out.append({})
            section = []
            continue
        if not out:
            raise UnknownFormatError("fi_info -v: a line before the first `fi_info:`", line, lineno)
        if (m := SECTION.match(line)):
            depth = len(m.group("indent")) // 4
            section = section[:depth - 1] + [m.group("name")]
            continue
        m = FIELD.match(line)
        if not m:
            raise UnknownFormatError("not a line of fi_info -v", line, lineno)
        depth = len(m.group("indent")) // 4
        where, key, value = section[:depth - 1], m.group("key"), m.group("value")
        if where == ["fi_fabric_attr"] and key == "prov_name":
            out[-1]["provider"] = value
        elif where == ["fi_domain_attr"] and key == "name":
            out[-1]["domain"] = value
        elif where == ["nic", "fi_link_attr"] and key in ("state", "speed"):
            out[-1][f"link_{key}"] = value
        elif where == [] and key == "nic" and value == "(nil)":
            section = []
    return out


# ------------------------------------------------------------------------------- ucx_info -d

MD = re.compile(r"^# Memory domain: (?P<md>\S+)$")
TRANSPORT = re.compile(r"^#\s+Transport: (?P<tl>\S+)$")
DEVICE = re.compile(r"^#\s+Device: (?P<dev>\S+)$")
INFO_LINE = re.compile(r"^#.*$")


def transports(text: str) -> list[dict[str, str]]:
    """`ucx_info -d`: each transport and device with its memory domain (the same lines in 1.13 and 1.19),
    e.g. {"md": "cuda_cpy", "transport": "cuda_copy", "device": "cuda"}. Every line is a comment line
    of ucx_info; anything else is an error quoting it."""
    out: list[dict[str, str]] = []
    md = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if (m := MD.match(line)):
            md = m.group("md")
        elif (m := TRANSPORT.match(line)):
            if md is None:
                raise UnknownFormatError("ucx_info -d: a transport before any memory domain", line, lineno)
            out.append({"md": md, "transport": m.group("tl")})
        elif (m := DEVICE.match(line)):
            if not out or "device" in out[-1]:
                raise UnknownFormatError("ucx_info -d: a device without its transport", line, lineno)
            out[-1]["device"] = m.group("dev")
        elif not INFO_LINE.match(line) and line.strip():
            raise UnknownFormatError("not a line of ucx_info -d", line, lineno)
    if out and "device" not in out[-1]:
        lines = text.splitlines()
        raise TruncatedError("ucx_info -d: the output ends after a transport, before its device", lines[-1], len(lines))
    return out


#: why a UCX transport may be missing, by transport
UCX_WHY = {**dict.fromkeys(("cuda_copy", "cuda_ipc"), "UCX built without CUDA (+cuda), or no GPU driver"),
           "gdr_copy": "UCX built without GDRCopy (+gdrcopy), or the gdrdrv module not loaded"}


def lower_layer_problem(layer: str, provider: str | None, ucx_transports: list[str], nodes: dict[str, dict]) -> \
        str | None:
    """Why a step of the `fabric` or `ucx` layer fails on its nodes' stack facts, whatever its figures, or None:
    the libfabric provider the system expects is not listed by fi_info (or, for cxi, a NIC's link is not
    up), or a UCX transport the system expects is not in ucx_info -d."""
    problems = []
    if layer == "fabric" and provider:
        without = sorted(h for h, f in nodes.items() if provider not in f.get("libfabric_providers", []))
        if without:
            problems.append(f"provider {provider} not found on {', '.join(without)}: libfabric built without "
                            f"{provider}, or the {provider} driver not loaded")
        down = sorted(f"{d} on {h} ({state or 'no state'})" for h, f in nodes.items()
                      for d, state in f.get("cxi_links", {}).items() if state != "FI_LINK_UP")
        if provider == "cxi" and down:
            problems.append(f"cxi link not up: {', '.join(down)}")
    if layer == "ucx":
        for tl in ucx_transports:
            without = sorted(h for h, f in nodes.items()
                             if not any(t.split("/", 1)[0] == tl for t in f.get("ucx_transports", [])))
            if without:
                problems.append(f"UCX transport {tl} not found on {', '.join(without)}: "
                                f"{UCX_WHY.get(tl, f'UCX built without {tl}, or its device missing')}")
    return "; ".join(problems) or None
