"""YAML input files read safely: bounded in size, UTF-8, without anchors and aliases (a few lines of `*a`
can otherwise expand to gigabytes) and without duplicate keys (YAML keeps the last one, silently)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from commstack.errors import CommstackError, ConfigError
from commstack.files import read_bounded


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader without anchors and aliases (a few lines of `*a` can otherwise expand to
    gigabytes) and without duplicate keys (YAML keeps the last one, silently)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) are not allowed")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.YAMLError(f"line {key_node.start_mark.line + 1}: key {key!r} is given twice")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path) -> Any:
    try:
        text = read_bounded(Path(path)).decode()
    except CommstackError as e:
        raise ConfigError(str(e)) from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
