"""Kernels without machine code of their own. A kernel (jit.py's `kernel`, `allocating_kernel`) is code that entries
link in: numba links a callee's LLVM module into each caller's, and each entry emits machine code for everything
it links. numba also emitted each kernel's own module, its callees linked in, when the kernel compiled, because
its dispatcher wants a Python-callable function at once: 6 of a cold single-engine run's 38 CPU-s went to
machine code nothing ran (Python calls few kernels; entries run their own copy). Here a kernel compiles to
LLVM IR only (numba's `no_compile` flag), is cached as the bitcode callers link (kind "link_only"), and gets
machine code the first time Python calls it (materialize).

Its compile result's entry point, which numba keys the callers' lowering on (BaseContext.insert_user_function,
Dispatcher.get_overload), is a LinkOnly placeholder until then; the dispatcher never hands the placeholder to
its C-level call table, so a Python call goes through `_compile_for_args`, which materializes.
"""

from __future__ import annotations

import llvmlite.binding as ll
from numba.core.codegen import JITCodeLibrary
from numba.core.compiler import CompileResult
from numba.core.compiler_lock import global_compiler_lock

# How a link-only kernel is serialized in numba's cache: (name, LINK_ONLY, bitcode callers link).
LINK_ONLY = "link_only"


class LinkOnly:
    """A link-only kernel's entry point until Python calls it: a unique key, never called."""

    __slots__ = ()

    def __repr__(self):
        return "<kernel without machine code until Python calls it>"


def placeholder(cres, target_context):
    """`cres` (compiled with no_compile: no entry point) with a LinkOnly one, under which callers find it."""
    entry = LinkOnly()
    target_context.insert_user_function(entry, cres.fndesc, [cres.library])
    return cres._replace(entry_point=entry)


class LinkedLibrary(JITCodeLibrary):
    """A kernel's compiled code, finished (its callees linked in) but not handed to the JIT engine: nothing emits
    machine code for it. Serialized as the module callers link."""

    def _finalize_final_module(self):
        self._finalize_dynamic_globals()  # numba's cache refuses code with dynamic globals: it reads these
        self._verify_declare_only_symbols()
        self._finalized = True

    def serialize_using_object_code(self):
        return (self.name, LINK_ONLY, self._get_module_for_linking().as_bitcode())


class CachedLinkedLibrary(LinkedLibrary):
    """A link-only kernel loaded from the cache (finalized already): its bitcode, parsed when a caller first links
    it, and serialized as LinkedLibrary serializes."""

    bitcode: bytes | None = None

    def _get_module_for_linking(self):
        if self._shared_module is None:
            self._shared_module = ll.parse_bitcode(self.bitcode)
            self.bitcode = None
        return self._shared_module


def unserialize(codegen, name: str, bitcode: bytes) -> CachedLinkedLibrary:
    library = codegen.create_library(name)
    library.__class__ = CachedLinkedLibrary
    library.bitcode = bitcode
    library._finalized = True
    return library


def rebuild(target_context, payload: tuple) -> CompileResult:
    """numba's CompileResult._rebuild for a link-only kernel (`payload`: what CompileResult._reduce saved): the
    same result, with a LinkOnly entry point (the dispatcher that loads it registers it for callers) and no
    environment set, which needs machine code."""
    libdata, fndesc, env, signature, objectmode, lifted, typeann, reload_init, referenced_envs = payload
    for fn in reload_init or ():
        fn()
    return CompileResult(target_context=target_context, typing_context=target_context.typing_context,
                         library=unserialize(target_context.codegen(), *libdata[::2]), environment=env,
                         entry_point=LinkOnly(), fndesc=fndesc, type_annotation=typeann, signature=signature,
                         objectmode=objectmode, lifted=lifted, typing_error=None, call_helper=None, metadata=None,
                         reload_init=reload_init, referenced_envs=referenced_envs)


@global_compiler_lock  # numba's, held around every compile: two threads calling it first make one
def materialize(dispatcher, args: tuple):
    """Machine code for a link-only kernel Python calls: its linked module emitted on its own (its symbols weak,
    as linked copies are), the Python-callable wrapper that numba's compile would have made, and the
    dispatcher's overload and call table updated to it."""
    cres = dispatcher.overloads[args]
    if not isinstance(cres.entry_point, LinkOnly):  # another thread was first
        return cres.entry_point
    codegen = cres.library.codegen
    library = codegen.create_library(cres.library.name)
    library._final_module = ll.parse_bitcode(cres.library._get_module_for_linking().as_bitcode())
    library._finalize_final_module()
    cfunc = dispatcher.targetctx.get_executable(library, cres.fndesc, cres.environment)
    dispatcher.targetctx.insert_user_function(cfunc, cres.fndesc, [cres.library])
    dispatcher.overloads[args] = cres._replace(entry_point=cfunc)  # callers go on linking the bitcode
    dispatcher._insert([a._code for a in args], cfunc, cres.objectmode)
    return cfunc
