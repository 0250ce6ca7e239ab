"""Start-up cost of a fresh process (docs/analysis.md, "First call in a fresh process").

Numba initialises its CPU target the first time any kernel is dispatched, even when the machine code comes
from the compile cache. Part of that is `numba.np.arraymath`, which checks at import that a BLAS exists
with `import scipy.linalg.cython_blas`: that statement runs `scipy.linalg/__init__`, which imports all of
scipy.linalg and scipy's array-API layer (numpy.f2py, numpy.testing, unittest...), about 0.25 s of CPU
for a check that only needs the one extension module. geoengine's kernels never call BLAS.

`install()` (run by `import geoengine`) adds a meta-path finder that acts on two imports only:

- just before `numba.np.arraymath` runs, it loads the extension module `scipy.linalg.cython_blas` by
  itself (milliseconds) and registers it in `sys.modules`, so Numba's check finds it there; Numba's BLAS
  wrappers look functions up through `sys.modules` as well (`get_cython_function_address`), so `np.dot`
  in a kernel still works;
- if `scipy.linalg` is imported later, it is imported in full as usual and the finder then binds the
  already loaded `cython_blas` as its attribute, so `scipy.linalg.cython_blas` is the same module.

Nothing happens when scipy.linalg was imported before Numba's target, and any failure falls back to the
ordinary import. GEOENGINE_FULL_SCIPY_IMPORT=1 turns the finder off (docs/settings.md).
"""

from __future__ import annotations

import os
import sys

_BLAS = "scipy.linalg.cython_blas"
_TRIGGER = "numba.np.arraymath"
_PARENT = "scipy.linalg"


class _Finder:
    """A meta-path finder (duck-typed: importing importlib.abc would cost more than it saves) that returns
    None, so the next finder decides, for every module; see the module docstring."""

    def __init__(self):
        self.blas_preloaded = False

    def find_spec(self, name, path=None, target=None):
        if name == _TRIGGER:
            if _PARENT not in sys.modules and _BLAS not in sys.modules:
                self.blas_preloaded = _preload_blas()
            if not self.blas_preloaded:
                self._done()
        elif name == _PARENT and self.blas_preloaded:
            import importlib.machinery

            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                spec.loader = _BindBlas(spec.loader)
            self._done()
            return spec
        return None

    def _done(self):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


class _BindBlas:
    """Runs scipy.linalg's own loader, then binds the preloaded cython_blas as its attribute."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        # the package's own loader from here on (importlib.resources, reload...)
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        blas = sys.modules.get(_BLAS)
        if blas is not None and not hasattr(module, "cython_blas"):
            module.cython_blas = blas

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _preload_blas() -> bool:
    """Load the cython_blas extension module without its package's __init__; False if that fails."""
    try:
        import importlib.machinery
        import importlib.util

        import scipy

        spec = importlib.machinery.PathFinder.find_spec(_BLAS, [os.path.join(os.path.dirname(scipy.__file__),
                                                                             "linalg")])
        if spec is None or spec.loader is None:
            return False
        module = importlib.util.module_from_spec(spec)
        sys.modules[_BLAS] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(_BLAS, None)
            raise
        return True
    except Exception:  # noqa: BLE001 - any problem: Numba imports scipy.linalg the ordinary way
        return False


_FINDER: _Finder | None = None


def install() -> None:
    """Add the finder once per process (no-op when Numba's target is already initialised)."""
    global _FINDER
    if _FINDER is not None or os.environ.get("GEOENGINE_FULL_SCIPY_IMPORT", "") not in ("", "0"):
        return
    if _TRIGGER in sys.modules or _PARENT in sys.modules:
        return
    _FINDER = _Finder()
    sys.meta_path.insert(0, _FINDER)
