"""Version pins: every batch of one call goes to workers of one scorer version, and so do all calls that share a
group (a GRPO prompt group, a rollout). A call's pin is decided by its first pick of a worker; a group's pin is
shared by all its calls, so calls of one group that run at the same time are scored by one version (the first of
them to pick decides it for all). A group whose version left the pool moves, whole, to a new pick."""
from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from dataclasses import dataclass

from .router import ANY

log = logging.getLogger("rewardpool.client")
MAX_GROUPS = 4096  # groups whose pin the client remembers (the least recently used go first)


class VersionGone(Exception):
    """Every worker of the scorer version a call was pinned to left the pool (a roll replaced them): the call
    is scored again, whole, on another version, so no call mixes two."""


@dataclass
class Pin:
    version: object = ANY  # ANY until the first pick of a worker (no await between the pick and this)
    group: str | None = None  # the caller's group key, sent with each batch (workers count active groups)


class GroupPins:
    """The pins of the caller's groups, bounded (least recently used forgotten first)."""

    def __init__(self, name: str, max_groups: int = MAX_GROUPS):
        self.name, self.max_groups = name, max_groups
        self._pins: OrderedDict[str, Pin] = OrderedDict()
        self.moves = 0  # groups moved to another version because theirs left the pool

    def __len__(self) -> int:
        return len(self._pins)

    def __contains__(self, group: str) -> bool:
        return group in self._pins

    def pin(self, group: str | None, serving: Counter) -> Pin:
        """The pin of a call in `group` (a fresh one without a group); `serving`: serving workers per version."""
        if group is None:
            return Pin()
        pin = self._pins.get(group)
        if pin is None:
            pin = Pin(group=group)
        elif pin.version is not ANY and not serving[pin.version]:
            self.moves += 1
            log.warning("%s: group %s was scored by version %s, which has left the pool; it moves to another",
                        self.name, group, pin.version)
            pin = Pin(group=group)
        self._pins[group] = pin
        self._pins.move_to_end(group)
        while len(self._pins) > self.max_groups:
            self._pins.popitem(last=False)
        return pin

    def repin(self, group: str | None, gone: Pin, serving: Counter) -> Pin:
        """A new pin after a call's version left mid-call: the group's, so its other calls follow (one move per
        group, whichever of its calls saw the version gone first)."""
        if group is None:
            return Pin()
        if self._pins.get(group) is gone:
            self.moves += 1
            self._pins[group] = Pin(group=group)
        return self.pin(group, serving)
