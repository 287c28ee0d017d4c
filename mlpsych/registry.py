"""Named choices the project is meant to grow by (PDF backends, merging rules, question kinds): one table each.

A new choice is one ``register`` call beside its code; settings name it by its key, and an unknown name is an
:class:`~mlpsych.errors.UnknownChoice` listing the known ones, instead of an if-chain falling through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from mlpsych.errors import UnknownChoice

T = TypeVar("T")


class Registry(Generic[T]):
    """Items of one kind by name, in the order registered (which is the order choices are offered in)."""

    def __init__(self, what: str) -> None:
        self.what = what  # "merging rule": how an error names the kind of thing asked for
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator (or call) adding ``item`` under ``name``; a name registered twice is a bug."""

        def add(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.what} {name!r} registered twice")
            self._items[name] = item
            return item

        return add

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownChoice(f"unknown {self.what} {name!r} (known: {', '.join(self._items)})") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)
