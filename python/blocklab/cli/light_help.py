"""typer's help and error formatter without the two rich modules it never uses here.

typer draws help and usage errors with its `rich_utils` module, which imports
`rich.markdown` (markdown-it) and `rich.traceback` (pygments) at load time:
about half of what a `blocklab COMMAND --help` costs. blocklab uses neither
(its markup mode is "rich", not "markdown", and pretty exceptions are off), so
while `typer.rich_utils` loads, those two modules are stand-ins whose classes
import the real module the first time they are used. Once `rich_utils` has
loaded, the stand-ins leave `sys.modules`: any later import gets the real
modules. The help text is the same either way (tests/test_cli_startup.py).

`import typer` itself loads three standard modules only its rarely taken
paths use: `subprocess` (`typer.launch`), `difflib` (the "did you mean" of an
unknown command) and `pickle` (rich styles with metadata). `typer_quietly()`
imports typer with stand-ins for them in the same way: the stand-in's names
load the real module on first use.

rich, wherever it loads (a command's table as well as typer's formatter),
likewise gets stand-ins for `pickle` in `rich.style` and for `fractions`
(and the `decimal` it imports) in `rich._ratio`, which only a table too wide
for the terminal calls.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

# module -> the class typer's formatter takes from it.
DEFERRED = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}
# module -> the functions typer (or rich, under it) takes from it by name; the
# module's other names are looked up on first use (`subprocess.Popen`).
DEFERRED_STDLIB = {"subprocess": (), "difflib": ("get_close_matches",), "pickle": ("dumps", "loads"),
                   "fractions": ("Fraction",)}
# module -> the modules deferred while it loads (install()).
WATCHED = {"typer.rich_utils": (*DEFERRED, *DEFERRED_STDLIB), "rich.style": ("pickle",), "rich._ratio": ("fractions",)}


class _Deferred(type):
    """A class standing for `module.name`: calling it or reading an attribute imports the real one."""

    def _real(cls):
        return getattr(importlib.import_module(cls._module), cls.__name__)

    def __call__(cls, *args, **kwargs):
        return cls._real()(*args, **kwargs)

    def __getattr__(cls, attr):
        return getattr(cls._real(), attr)


def _real_module(module: str, stand_in: types.ModuleType):
    """The real module behind `stand_in` (imported now if need be)."""
    if sys.modules.get(module) is stand_in:
        del sys.modules[module]
    return importlib.import_module(module)


class _LazyModule(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(_real_module(self.__name__, self), attr)


def _stdlib_stand_in(module: str, functions: tuple[str, ...]) -> types.ModuleType:
    m = _LazyModule(module)

    def deferred(name):
        def call(*args, **kwargs):
            return getattr(_real_module(module, m), name)(*args, **kwargs)

        call.__name__ = name
        return call

    for name in functions:
        setattr(m, name, deferred(name))
    return m


def _stand_in(module: str, name: str) -> types.ModuleType:
    m = types.ModuleType(module)
    setattr(m, name, _Deferred(name, (), {"_module": module}))
    return m


def _with_stand_ins(modules, load):
    """`load()` with stand-ins in `sys.modules` for those of `modules` (names in
    DEFERRED or DEFERRED_STDLIB) not imported yet; they leave it afterwards."""
    placed = {}
    for name in modules:
        if name not in sys.modules:
            m = _stand_in(name, DEFERRED[name]) if name in DEFERRED else _stdlib_stand_in(name, DEFERRED_STDLIB[name])
            placed[name] = sys.modules[name] = m
    try:
        return load()
    finally:
        for name, m in placed.items():
            if sys.modules.get(name) is m:
                del sys.modules[name]


def typer_quietly():
    """`import typer` without the standard modules it does not need to start (see above)."""
    if "typer" in sys.modules:
        return sys.modules["typer"]
    return _with_stand_ins(DEFERRED_STDLIB, lambda: importlib.import_module("typer"))


class _Loader:
    # importlib.abc is not imported: it pulls in importlib.resources (a few ms).
    def __init__(self, real, deferred) -> None:
        self.real = real
        self.deferred = deferred

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module) -> None:
        _with_stand_ins(self.deferred, lambda: self.real.exec_module(module))


class _Finder:
    def __init__(self) -> None:
        self.finding = False

    def find_spec(self, name, path=None, target=None):
        deferred = WATCHED.get(name)
        if deferred is None or self.finding:
            return None
        self.finding = True  # the real finders answer for `name` below
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.finding = False
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, deferred)
        return spec


def install() -> None:
    """Defer those modules when typer's formatter or rich first loads (once per process)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
