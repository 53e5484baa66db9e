"""What commstack shows of a failed concretization: our requirement's message alone, where Spack lists it
among every other error of its solver's model (issue 36 item 4; docs/environments.md#errors)."""

from pathlib import Path

from commstack.paths import TOP
from commstack.spack.envs import explain

# `spack -e envs/gh200-ompi concretize -f` on this x86_64 Debian 12 host, Spack 1.1.0: 6 lines
PLAIN = (TOP / "tests" / "data" / "spack" / "concretize-gh200-ompi-on-x86_64.txt").read_text()
# the same for envs/alps-login: our reason alone, Spack's `concretizer:unify` advice appended to it
ALPS = (TOP / "tests" / "data" / "spack" / "concretize-alps-login-on-x86_64.txt").read_text()
LIBC = ("this host is not an Ubuntu 24.04 GH200 node (glibc 2.39): Spack takes the libc of the compiler it runs "
        "here, so a lock made here would be this host's. Concretize on the node, or lock from any host with "
        "`bin/commstack lock` (docs/environments.md#locks)")


def test_our_reason_alone_out_of_spacks_6_lines():
    assert len(PLAIN.splitlines()) == 6 and "Cannot select a single \"node_os\" for package \"glibc\"" in PLAIN
    assert explain(PLAIN, TOP, Path("envs/gh200-ompi")) == LIBC


def test_our_reason_without_the_advice_spack_appends_to_it():
    assert len(ALPS.splitlines()) == 2 and "You could consider setting `concretizer:unify`" in ALPS
    shown = explain(ALPS, TOP, Path("envs/alps-login"))
    assert shown.startswith("this host is not an Alps SLES 15 GH200 node (glibc 2.38, /usr/bin/gcc-13)")
    assert shown.endswith("(docs/environments.md#locks)") and "unify" not in shown


def test_an_error_without_our_reason_keeps_spacks_lines_and_the_lines_they_name():
    other = PLAIN.replace(LIBC, "a reason of Spack's own")
    shown = explain(other, TOP, Path("envs/gh200-ompi"))
    assert "a reason of Spack's own" in shown and LIBC not in shown
    assert "offending lines:" in shown and "envs/common/ompi.yaml" in shown  # glibc's lines there
    longer = other + "\n".join(f"        required because line {i}" for i in range(20))
    assert "a reason of Spack's own" not in explain(longer, TOP, Path("envs/gh200-ompi"))  # Spack's last 12 lines
