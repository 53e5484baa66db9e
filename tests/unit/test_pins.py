"""The pins are consistent without Spack: one toolchain file, envs that include the shared pins."""

from pathlib import Path

import yaml

TOP = Path(__file__).resolve().parents[2]


def test_toolchain_pins_are_the_ones_the_issue_names():
    t = yaml.safe_load((TOP / "toolchain.yaml").read_text())
    assert (t["spack"]["tag"], t["spack"]["commit"]) == ("v1.1.0", "2e907202bcc8209a6a62243aab50c179b524cc3b")
    assert (t["spack_packages"]["tag"], t["spack_packages"]["commit"]) == ("v2025.11.0", "119680aeee")


def test_every_env_includes_the_shared_pins():
    for env in [TOP / "spack.yaml", *sorted((TOP / "envs").glob("*/spack.yaml"))]:
        spack = yaml.safe_load(env.read_text())["spack"]
        paths = [i if isinstance(i, str) else i["path"] for i in spack["include"]]
        assert any(p.endswith("common/pins.yaml") for p in paths), env
        for p in paths:
            target = (env.parent / p)
            assert target.exists() or p.startswith(("../../.spack", ".spack")), f"{env}: include {p} missing"


def test_pins_state_the_stack_versions_once():
    pins = yaml.safe_load((TOP / "envs" / "common" / "pins.yaml").read_text())["packages"]
    req = {name: pkg.get("require", []) for name, pkg in pins.items()}
    assert "@5.0.8" in req["openmpi"] and "@1.22.0" in req["libfabric"] and "@1.19.0" in req["ucx"]
    assert "@2.5.1" in req["gdrcopy"] and "@12.8.1" in req["cuda"] and "@7.5.1" in req["osu-micro-benchmarks"]
    for env in sorted((TOP / "envs").glob("*/spack.yaml")):
        text = env.read_text()
        for version in ("5.0.8", "1.19.0", "2.5.1", "7.5.1"):
            assert f"@{version}" not in text, f"{env} restates pin {version}: it lives in pins.yaml"
