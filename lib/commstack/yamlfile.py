"""YAML input files read safely: bounded in size, UTF-8, without anchors and aliases (a few lines of `*a`
can otherwise expand to gigabytes) and without duplicate keys (YAML keeps the last one, silently)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from commstack.errors import CommstackError, ConfigError
from commstack.files import read_bounded


class _OnceLoader(yaml.SafeLoader):
    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.YAMLError(f"line {key_node.start_mark.line + 1}: key {key!r} is given twice")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _NoAliasLoader(_OnceLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) are not allowed")
        return super().compose_node(parent, index)


def read_yaml(path: Path, aliases: bool = False) -> Any:
    """The YAML file `path`, bounded; `aliases`: a file of someone else's format that may hold them (Spack's
    config), whose reader walks only the keys it needs (an alias is one shared object there, never a copy)."""
    try:
        text = read_bounded(Path(path)).decode()
    except CommstackError as e:
        raise ConfigError(str(e)) from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        return yaml.load(text, Loader=_OnceLoader if aliases else _NoAliasLoader)  # noqa: S506 - SafeLoader's
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    except ValueError as e:  # an integer of more digits than Python converts (4,300)
        raise ConfigError(f"{path}: a number too long to read: {str(e).split(';')[0]}") from None
