"""A state array's fields declared by name: what each int64 slot of a model's state means.

The kernels address their state arrays through module-level integer offsets (numba folds
them into the code). A StateLayout is where those offsets come from: every field is declared
once, in order, with its length; offsets follow from the order (so no two fields overlap and
nothing is placed by hand), and `dump` names every slot of a live array for debugging.
"""

from __future__ import annotations

import numpy as np


class StateLayout:
    """The named fields of one state array, in declaration order."""

    def __init__(self, what: str):
        self.what = what
        self._fields: dict[str, tuple[int, int]] = {}  # name -> (offset, length)
        self.size = 0

    def add(self, name: str, length: int = 1) -> int:
        """Declare a field of `length` slots after the last one; its offset."""
        if name in self._fields:
            raise ValueError(f"{self.what}: field {name!r} is declared twice")
        if length < 1:
            raise ValueError(f"{self.what}: field {name!r} needs at least one slot")
        self._fields[name] = (self.size, length)
        self.size += length
        return self.size - length

    def add_each(self, *names: str) -> tuple[int, ...]:
        """Declare one-slot fields, in this order; their offsets."""
        return tuple(self.add(name) for name in names)

    def offset(self, name: str) -> int:
        return self._fields[name][0]

    def offsets(self, *names: str) -> tuple[int, ...]:
        return tuple(self.offset(name) for name in names)

    def length(self, name: str) -> int:
        return self._fields[name][1]

    def fields(self) -> list[tuple[str, int, int]]:
        """(name, offset, length) of every field, in order."""
        return [(name, at, n) for name, (at, n) in self._fields.items()]

    def dump(self, state: np.ndarray, show: int = 8) -> str:
        """Every field of a live array with its values (a long field: its first `show` and
        how many are not zero), one line each; slots after the fields (tables an array
        keeps after them) are counted on a last line."""
        if len(state) < self.size:
            raise ValueError(f"{self.what} has {self.size} slots, the array {len(state)}")
        lines = []
        for name, at, n in self.fields():
            values = state[at:at + n]
            if n == 1:
                lines.append(f"{name} = {int(values[0])}")
                continue
            head = ", ".join(str(int(v)) for v in values[:show])
            more = f", ... ({np.count_nonzero(values)} of {n} not 0)" if n > show else ""
            lines.append(f"{name}[{n}] = [{head}{more}]")
        if len(state) > self.size:
            rest = state[self.size:]
            lines.append(f"(after the fields: {len(rest)} slots, "
                         f"{np.count_nonzero(rest)} not 0)")
        return "\n".join(lines)
