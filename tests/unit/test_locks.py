"""`commstack lock` keeps a committed lock that the new solve only reorders (Spack orders roots
from a set), and replaces it when a root is paired with another spec or a spec changed."""

import json

import pytest

from commstack.paths import TOP
from commstack.spack.envs import LOCKED, same_lock


@pytest.mark.parametrize("env", LOCKED)
def test_a_reordered_lock_is_the_same_lock_and_a_moved_root_is_not(env, tmp_path):
    committed = TOP / "envs" / env / "spack.lock"
    data = json.loads(committed.read_text())
    data["roots"].reverse()
    data["concrete_specs"] = dict(reversed(list(data["concrete_specs"].items())))
    other = tmp_path / "spack.lock"
    other.write_text(json.dumps(data, indent=1))
    assert other.read_text() != committed.read_text() and same_lock(committed, other)

    data["roots"][0]["hash"], data["roots"][1]["hash"] = data["roots"][1]["hash"], data["roots"][0]["hash"]
    other.write_text(json.dumps(data))
    assert not same_lock(committed, other)
