"""How a kernel is compiled where other kernels call it (ops/jit.Kernel.callee).

numba compiles each jitted function into its own module and then finishes it as if Python
would call it: a Python wrapper, a full -O3 pass over the function and every callee linked
into it, and machine code for all of that. A kernel that calls it links its IR (not its
machine code) into its own module and optimises the whole again. So for a function that
only kernels call, all of that finishing is work thrown away, once per level of the call
tree: the default level's cold compile spent 72-75 s in one process, 55 s without the
wrappers and machine code, 48 s without the repeated -O3 as well (numba 0.68, an AMD EPYC;
the entry kernels, which Python calls, are compiled as before and run at the same speed).

A Callee is that function compiled for kernels only: no Python wrapper, its IR optimised
function by function (the -O3 of the kernel it is linked into does the rest), never turned
into machine code of its own, and cached as that IR. Bits are unchanged: only the order in
which LLVM optimises changes, and no optimisation under ops/jit.FASTMATH changes results.
"""

from __future__ import annotations

from numba.core import caching, compiler
from numba.core.codegen import JITCodeLibrary
from numba.core.registry import CPUDispatcher

# the numba internals this module overrides; without one of them (another numba) a kernel
# is compiled the usual way where kernels call it too (ops/jit.Kernel)
SUPPORTED = all(hasattr(owner, name) for owner, name in (
    (JITCodeLibrary, "_optimize_final_module"),
    (JITCodeLibrary, "_finalize_final_module"),
    (JITCodeLibrary, "_finalize_dynamic_globals"),
    (JITCodeLibrary, "_verify_declare_only_symbols"),
    (JITCodeLibrary, "serialize_using_bitcode"),
    (caching.CompileResultCacheImpl, "rebuild"),
    (caching.CompileResultCacheImpl, "get_filename_base"),
))


class _EnvlessCodegen:
    """The codegen less `set_env`: a callee's environment lives in the module of the kernel
    it is linked into, where numba sets it; its own module never reaches the JIT engine."""

    def __init__(self, codegen) -> None:
        self._codegen = codegen

    def __getattr__(self, name: str):
        return getattr(self._codegen, name)

    def set_env(self, env_name, env) -> None:
        pass


class CalleeLibrary(JITCodeLibrary):
    """A callee's code: IR for other kernels to link, never machine code of its own."""

    def _optimize_final_module(self) -> None:
        pass  # the kernel that links it runs -O3 over the whole

    def _finalize_final_module(self) -> None:
        self._finalize_dynamic_globals()
        self._verify_declare_only_symbols()
        self._finalized = True

    def get_pointer_to_function(self, name: str) -> int:
        self._ensure_finalized()
        return 0  # nothing to call from Python (Callee refuses such calls)

    @property
    def codegen(self):
        return _EnvlessCodegen(self._codegen)

    def serialize_using_object_code(self):
        return self.serialize_using_bitcode()


class CalleeCompiler(compiler.Compiler):
    """numba's pipeline, lowering into a CalleeLibrary."""

    def compile_extra(self, func):
        if self.state.library is None:
            self.state.library = CalleeLibrary(self.state.targetctx.codegen(),
                                               func.__qualname__)
        return super().compile_extra(func)


class CalleeCacheImpl(caching.CompileResultCacheImpl):
    """A callee's cache files sit beside the kernel's, under their own name, and load as
    CalleeLibrary (numba's loader builds its codegen's library class)."""

    def get_filename_base(self, fullname: str, abiflags: str) -> str:
        return super().get_filename_base(fullname + "-callee", abiflags)

    def rebuild(self, target_context, payload):
        codegen = target_context.codegen()
        codegen._library_class = CalleeLibrary  # under numba's compile lock
        try:
            return super().rebuild(target_context, payload)
        finally:
            del codegen._library_class


class CalleeCache(caching.FunctionCache):
    _impl_class = CalleeCacheImpl


class Callee(CPUDispatcher):
    """A kernel as other kernels call it."""

    def enable_caching(self) -> None:
        self._cache = CalleeCache(self.py_func)

    def add_overload(self, cres) -> None:
        self.overloads[tuple(cres.signature.args)] = cres  # not entered for Python calls

    def _compile_for_args(self, *args, **kws):
        raise TypeError(f"{self.py_func.__qualname__}: this form is only for kernels to call")


def callee(py_func, locals: dict, targetoptions: dict, cache: bool) -> Callee | None:
    """The form of `py_func` that kernels call (None where numba lacks what it needs)."""
    if not SUPPORTED:
        return None
    form = Callee(py_func=py_func, locals=locals,
                  targetoptions={**targetoptions, "no_cpython_wrapper": True},
                  pipeline_class=CalleeCompiler)
    if cache:
        form.enable_caching()
    return form
