"""Version counters that let a compiled step skip re-deriving its state on every call.

``xla_trace`` caches, per tuple of state holders (modules, optimizers, GradManagers), the
flat list of their state tensors and its signature. Anything that could change that list
or that signature bumps ``VERSIONS.structure``: a module attribute, parameter, buffer or
submodule assigned or deleted, ``train()``/``eval()``, a parameter group added or its
``params`` list changed, optimizer state or a hyper tensor created, a GradManager's
``attach``, and a ``.grad`` set or cleared (or replaced by one of another shape/dtype).
A change of a hyper-parameter's *value* in ``param_groups`` (``lr``) bumps
``VERSIONS.hyper``, after which the optimizers refresh their hyper tensors (no walk over
the modules). A call whose counters are unchanged since the last one re-uses the cached
state in O(1). See :mod:`hlotrace.state`.
"""

from __future__ import annotations


class Versions:
    __slots__ = ("hyper", "structure", "values")

    def __init__(self):
        self.structure = 0
        self.hyper = 0
        # Bumped whenever some tensor's value is replaced (an in-place update, a compiled
        # step's write-back, a restore): hlotrace.captures re-checks captured values then.
        self.values = 0


VERSIONS = Versions()


def structure_changed() -> None:
    VERSIONS.structure += 1


def hyper_changed() -> None:
    VERSIONS.hyper += 1


class TrackedList(list):
    """A list whose every mutation counts as a structural change (an optimizer's
    ``param_groups`` and each group's ``params``)."""

    __slots__ = ()

    def _changed(name):
        method = getattr(list, name)

        def mutate(self, *args, **kwargs):
            VERSIONS.structure += 1
            return method(self, *args, **kwargs)

        mutate.__name__ = name
        return mutate

    for _name in ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"):
        locals()[_name] = _changed(_name)
    __setitem__ = _changed("__setitem__")
    __delitem__ = _changed("__delitem__")
    __iadd__ = _changed("__iadd__")
    __imul__ = _changed("__imul__")
    del _changed, _name


class TrackedGroup(dict):
    """An optimizer's parameter group: a new ``params`` entry is a structural change, any
    other change (``lr``, ``momentum``) a hyper-parameter change (the optimizer then
    re-reads its structural choices too)."""

    __slots__ = ()

    def __setitem__(self, key, value):
        if key == "params":
            VERSIONS.structure += 1
            value = TrackedList(value)
        VERSIONS.hyper += 1
        dict.__setitem__(self, key, value)

    def __delitem__(self, key):
        VERSIONS.structure += 1
        dict.__delitem__(self, key)

    def update(self, *args, **kwargs):
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, *args):
        VERSIONS.structure += 1
        return dict.pop(self, *args)

    def popitem(self):
        VERSIONS.structure += 1
        return dict.popitem(self)

    def clear(self):
        VERSIONS.structure += 1
        dict.clear(self)

    def __ior__(self, other):
        self.update(other)
        return self


class GroupList(TrackedList):
    """An optimizer's ``param_groups``: a group dict put in by hand (``opt.param_groups[0] =
    {...}``) becomes a :class:`TrackedGroup` too, so its later changes are seen."""

    __slots__ = ()

    def __setitem__(self, index, value):
        if isinstance(index, slice):
            value = [_tracked(v) for v in value]
        else:
            value = _tracked(value)
        TrackedList.__setitem__(self, index, value)

    def append(self, value):
        TrackedList.append(self, _tracked(value))

    def insert(self, index, value):
        TrackedList.insert(self, index, _tracked(value))

    def extend(self, values):
        TrackedList.extend(self, [_tracked(v) for v in values])

    def __iadd__(self, values):
        self.extend(values)
        return self


def _tracked(group):
    if isinstance(group, dict) and not isinstance(group, TrackedGroup):
        tracked = TrackedGroup()
        for key, value in group.items():
            tracked[key] = value
        return tracked
    return group
