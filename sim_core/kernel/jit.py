"""How sim_core compiles. Every kernel is numba-compiled in nopython mode and cached on disk; each also runs as
plain Python under NUMBA_DISABLE_JIT=1. Several flavours, because compile time is mostly a fixed cost per compiled
function (~0.25 s each on a laptop core), and because numba's reference counting (NRT) is costly in the step
loop: with it, every array a function reads out of a record, or is passed, costs two calls to an atomic
reference-count update (~150 arrays a step, more time than the step's own work on a small batch):

  kernel             a function compiled on its own, that other kernels call: numba links its code into each
                     caller's, so only its callers' code runs; it skips the module-level LLVM passes, which its
                     entry runs once over everything linked in (_LinkedInto below), and gets machine code of
                     its own only if Python calls it (link_only.py). Compiled without NRT: it
                     allocates nothing and borrows what it reads from the records that own it (record_type.py),
                     which live as long as the engine
  allocating_kernel  a kernel that builds arrays or records, or replaces a record's field (growing a log): NRT on
  entry              a kernel Python calls (`entry_nogil`: one that releases the GIL); fully optimized; NRT on
  numeric_entry      an entry that takes arrays and numbers and returns numbers (the cost model, which the step
                     calls): NRT off
  inline             a few lines: numba inlines it into each caller, so it is not compiled on its own and not
                     called at run time. Loops that run per request per step call no other kind. A kernel may
                     inline another's body rather than call it (engine.run_to_end inlines the step): a kernel's
                     compile emits code for everything linked into it, and its caller emits all of it again.
numba's flavours inherit NRT from the function whose compile typed them unless they set it, so every flavour
sets it. A kernel that calls an allocating one must not hold a field it may replace across the call.
No fastmath, no globals that change, random numbers drawn outside the kernels: results are bit-identical across
runs and processes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path


def _import_numba_without_yaml() -> None:
    """numba's config imports PyYAML at import (~13 ms of a ~0.55 s CLI run) to read a .numba_config.yaml in the
    working directory, which is rarely there. Without one, numba is imported with PyYAML hidden, then handed a
    stand-in that imports it if such a file appears later (numba rereads its config before each compile)."""
    if "numba" in sys.modules or "yaml" in sys.modules or os.path.isfile(".numba_config.yaml"):
        return
    import importlib.util

    installed = importlib.util.find_spec("yaml") is not None
    sys.modules["yaml"] = None  # `import yaml` fails at once
    try:
        from numba.core import config as numba_config
    finally:
        del sys.modules["yaml"]
    if installed:
        numba_config.yaml, numba_config._HAVE_YAML = _YamlOnUse(), True


class _YamlOnUse:
    def __getattr__(self, name):
        import yaml

        return getattr(yaml, name)


_import_numba_without_yaml()

import llvmlite.binding as ll  # noqa: E402
from numba import config, njit, types  # noqa: E402
from numba.core import environment  # noqa: E402
from numba.core.caching import CompileResultCacheImpl, FunctionCache, NullCache, UserProvidedCacheLocator  # noqa: E402
from numba.core.codegen import JITCodeLibrary  # noqa: E402
from numba.core.compiler import Compiler  # noqa: E402
from numba.core.registry import CPUDispatcher  # noqa: E402
from numba.core.runtime import rtsys  # noqa: E402

from . import link_only  # noqa: E402


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def _copy_kernels(source: Path, dest: Path) -> int:
    """Copy numba's cache files (index .nbi, code .nbc, in a folder per source directory) that `dest` lacks; how
    many were copied. Modification times are kept: numba's index compares them."""
    copied = 0
    try:
        for f in source.rglob("*"):
            target = dest / f.relative_to(source)
            if f.suffix in (".nbi", ".nbc") and f.is_file() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, target)
                copied += 1
    except OSError:  # unreadable too, or gone: start cold
        pass
    return copied


# Free space a cache directory needs to hold every kernel (a full cache is ~35 MB): with less, the temporary
# directory below is used from the start, as for a read-only one (a cache filling up later: cache_write_failed).
MIN_FREE_BYTES = 64 << 20


def _has_room(path: Path) -> bool:
    try:
        return shutil.disk_usage(path).free >= MIN_FREE_BYTES
    except OSError:
        return True  # cannot tell: try, and fall back when a write fails


def _cache_dirs() -> tuple[str | None, str | None]:
    """(where compiled kernels are cached, the temporary directory to cache them in if writing there fails).
    numba keys each cached function on its own file only, so after an edit to one module the kernels of another
    that inline or call it would be stale: by default the directory is named after a hash of all of sim_core's
    sources. NUMBA_CACHE_DIR, if set and writable, wins. If neither is writable (a read-only deployment) or has
    room, a per-user temporary directory; if not even that, None: no caching."""
    sources = sorted(Path(__file__).resolve().parent.parent.rglob("*.py"))  # all of sim_core
    digest = hashlib.sha1(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    home_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sched-sim" / "numba" / digest
    wanted = Path(os.environ["NUMBA_CACHE_DIR"]) if os.environ.get("NUMBA_CACHE_DIR") else home_cache
    fallback = Path(tempfile.gettempdir()) / f"sched-sim-numba-{os.getuid() if hasattr(os, 'getuid') else 0}" / digest
    if _writable(wanted) and (wanted == fallback or _has_room(wanted)
                              or not (_writable(fallback) and _has_room(fallback))):  # no better place
        return str(wanted), str(fallback)
    if _writable(fallback):
        # numba loads only from a directory it can write to; a read-only one that holds kernels (a warm cache
        # baked into an image) is copied, so the first start does not compile again.
        copied = _copy_kernels(wanted, fallback)
        why = "is not writable" if not _writable(wanted) else f"has less than {MIN_FREE_BYTES >> 20} MB free"
        print(f"sched-sim: {wanted} {why}; caching compiled kernels in {fallback}"
              + (f" (starting from its {copied} cached files)" if copied else ""), file=sys.stderr)
        return str(fallback), str(fallback)
    print(f"sched-sim: no writable cache directory ({wanted}, {fallback}); kernels compile on every start",
          file=sys.stderr)
    return None, None


def _cache_dir() -> str | None:
    return _cache_dirs()[0]


CACHE_DIR, FALLBACK_DIR = _cache_dirs()
if CACHE_DIR is not None:
    config.CACHE_DIR = CACHE_DIR  # read when each function below is decorated; numba writes nowhere else


class OneSignature(CPUDispatcher):
    """A kernel compiled once per argument types, however its callers spell their constants. numba types a
    constant argument passed from jitted code as a literal (`f(eng, 0)` as Literal[int](0), `f(eng, n)` as int64)
    and compiles a version per literal value: `step_cost` was compiled four times, `_admit` and five others twice.
    Widening literals to their plain types before the overload is looked up compiles (and caches) one; results
    are the same, the literal versions only folded a constant."""

    def get_call_template(self, args, kws):
        return super().get_call_template(tuple(types.unliteral(a) for a in args),
                                         {k: types.unliteral(v) for k, v in kws.items()})

    def add_overload(self, cres):
        """numba's, but a link-only kernel (link_only.py) stays out of the C-level call table: a Python call
        then comes to _compile_for_args, which gives it machine code."""
        if isinstance(cres.entry_point, link_only.LinkOnly):
            self.overloads[tuple(cres.signature.args)] = cres
        else:
            super().add_overload(cres)

    def _compile_for_args(self, *args, **kws):
        found = super()._compile_for_args(*args, **kws)
        if isinstance(found, link_only.LinkOnly):
            key = next(k for k, cres in self.overloads.items() if cres.entry_point is found)
            found = link_only.materialize(self, key)
        return found

    @property
    def _cache(self):
        """numba's on-disk cache of this kernel, opened on first use: opening one checks that its directory is
        writable by creating a temporary file there, for each of ~130 kernels at import, while a warm run loads
        one or two."""
        cache = self.__dict__["_cache"]
        if cache is _OPEN_ON_USE:
            cache = NullCache()
            for _ in range(2):  # CACHE_DIR, then FALLBACK_DIR
                if CACHE_WRITE_ERROR is not None:
                    break
                try:
                    cache = LoadWithoutRefresh(self.py_func)
                    break
                except OSError as e:  # numba checks the directory by creating a file there
                    cache_write_failed(e)
                except RuntimeError:  # no locator: a function without a source file (defined in exec'd code)
                    break
            self.__dict__["_cache"] = cache
        return cache

    @_cache.setter
    def _cache(self, value):
        self.__dict__["_cache"] = value


_OPEN_ON_USE = object()


# Why compiled kernels could not be written to CACHE_DIR nor FALLBACK_DIR (full or read-only disks, discovered when
# numba writes): from then on this process compiles without saving, and says so once on stderr. None while
# writes work.
CACHE_WRITE_ERROR: str | None = None
# Set in warm.py's helper process, whose only use is filling the cache: it stops when nothing can be saved.
EXIT_ON_CACHE_WRITE_FAILURE = False


def cache_write_failed(err: Exception) -> None:
    """A write to the kernel cache failed: numba would raise it out of the compile (a full disk made every run,
    and the server's warm-up, fail with `OSError: [Errno 28]`). The first time, CACHE_DIR moves to the temporary
    FALLBACK_DIR (another process that fails alike moves to the same one, so warm.py's helper still shares its
    work); if that fails too, kernels compile as before, only unsaved."""
    global CACHE_DIR, CACHE_WRITE_ERROR
    reason = getattr(err, "strerror", None) or str(err)
    if FALLBACK_DIR is not None and CACHE_DIR != FALLBACK_DIR and _writable(Path(FALLBACK_DIR)):
        print(f"sched-sim: cannot save compiled kernels in {CACHE_DIR} ({reason}); caching them in "
              f"{FALLBACK_DIR}", file=sys.stderr)
        CACHE_DIR = config.CACHE_DIR = FALLBACK_DIR
        return
    if EXIT_ON_CACHE_WRITE_FAILURE:
        os._exit(3)
    if CACHE_WRITE_ERROR is None:
        CACHE_WRITE_ERROR = reason
        print(f"sched-sim: cannot save compiled kernels in {CACHE_DIR} ({reason}); compiling without the cache, "
              f"so each start compiles again until it has room (or set NUMBA_CACHE_DIR)", file=sys.stderr)


class _CacheDirLocator(UserProvidedCacheLocator):
    """numba's locator of CACHE_DIR, but one that raises why the directory is unusable (an OSError: numba checks it by
    creating a file there) instead of answering None, after which numba would try other places."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if not config.CACHE_DIR or not os.path.exists(py_file):
            return None
        self = cls(py_func, py_file)
        self.ensure_cache_path()
        return self


class _InCacheDirOnly(CompileResultCacheImpl):
    """numba's cache locators, but for CACHE_DIR's: when that directory is unusable, numba would fall back to the
    source tree's __pycache__ or the user's home, caches keyed on one source file each, which go stale after an
    edit to a module that a kernel inlines (see _cache_dir). A link-only kernel loads without machine code."""

    _locator_classes = [_CacheDirLocator]

    def rebuild(self, target_context, payload):
        if payload[0][1] == link_only.LINK_ONLY:
            return link_only.rebuild(target_context, payload)
        return super().rebuild(target_context, payload)


class LoadWithoutRefresh(FunctionCache):
    """numba refreshes its typing and target contexts (imports and registers every builtin and numpy typing and
    lowering implementation: ~0.2 s of a CLI run's ~1 s) before it loads a cached kernel. Loading compiled code
    needs only numba's runtime (NRT: allocation, reference counts), and a compile refreshes both contexts itself
    (numba.core.compiler's CompilerBase), so a cache hit starts the runtime and skips the rest. Two more costs of
    a load are put off until something needs them (_LoadedLibrary, _environment_of)."""

    def load_overload(self, sig, target_context):
        rtsys.initialize(target_context)  # what refresh() does first; idempotent
        codegen = target_context.codegen()
        # Under numba's compiler lock (held around every load and compile): no other thread sees these swaps.
        codegen._library_class, rebuild_env = _LoadedLibrary, environment._rebuild_env
        environment._rebuild_env = _environment_of
        try:
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
        finally:
            del codegen._library_class  # back to the class's own, JITCodeLibrary
            environment._rebuild_env = rebuild_env

    _impl_class = _InCacheDirOnly

    def save_overload(self, sig, data):
        """numba's save, but a failed write (ENOSPC, EDQUOT, EROFS, EIO...) moves the cache to FALLBACK_DIR, or
        leaves the kernel compiled and unsaved, rather than failing the compile; numba writes each file under a
        temporary name and removes it on failure, so nothing half-written is left to load."""
        for _ in range(2):  # CACHE_DIR, then FALLBACK_DIR
            if CACHE_WRITE_ERROR is not None:
                return
            try:
                if Path(self._cache_path).parent != Path(CACHE_DIR):  # opened before CACHE_DIR moved
                    self.__init__(self._py_func)
                super().save_overload(sig, data)
                return
            except OSError as e:
                cache_write_failed(e)


class _LoadedLibrary(JITCodeLibrary):
    """Compiled code loaded from the cache. numba also parses the LLVM bitcode stored beside the machine code
    (what a caller compiled later links in) and lists every symbol it defines: ~35 ms of a warm CLI run, for a
    simulate whose code nothing links. Here the bitcode is parsed when a caller first links it, and the one
    symbol looked up at load (the Python wrapper's address) is checked against the machine code's own symbols."""

    @classmethod
    def _unserialize(cls, codegen, state):
        name, kind, data = state
        if kind != "object":
            return super()._unserialize(codegen, state)
        self = codegen.create_library(name)
        object_code, self._shared_bitcode = data
        self._object_code = object_code  # numba lets go of its own copy once the engine has loaded it
        self.enable_object_caching()
        self._set_compiled_object(object_code)
        self._finalize_final_module()
        return self

    def _get_module_for_linking(self):
        if self._shared_module is None and getattr(self, "_shared_bitcode", None) is not None:
            self._shared_module = ll.parse_bitcode(self._shared_bitcode)
            self._codegen._engine._load_defined_symbols(self._shared_module)
            self._shared_bitcode = None
        return super()._get_module_for_linking()

    def get_pointer_to_function(self, name):
        engine = self._codegen._engine
        if not engine.is_symbol_defined(name):
            if name.encode() in getattr(self, "_object_code", b""):  # in the object's symbol table
                engine._defined_symbols.add(name)
            else:
                self._get_module_for_linking()  # numba's way: every symbol the bitcode defines
        return super().get_pointer_to_function(name)


def _environment_of(modname, consts, env_name):
    """numba.core.environment._rebuild_env without importing `modname`: a cached function's environment holds its
    module's globals, which only object-mode code reads (none here), and the modules of numba's own array
    helpers in simulate (numba.np.arrayobj, arraymath with linalg and numpy.ma, ...) cost ~35 ms to import."""
    env = environment.lookup_environment(env_name)
    if env is None:
        module = sys.modules.get(modname)
        env = environment.Environment(module.__dict__ if module is not None else {"__name__": modname})
        env.consts[:] = consts
        env.env_name = env_name
        environment.Environment._memo[env_name] = env
    return env


def _one_signature(cache: bool, **options):
    jit = njit(**options)

    def decorate(func):
        disp = jit(func)
        if isinstance(disp, CPUDispatcher):  # not under NUMBA_DISABLE_JIT, where njit hands back func itself
            disp.__class__ = OneSignature
            if cache:
                disp._cache = _OPEN_ON_USE
        return disp
    return decorate


class _LinkedInto(link_only.LinkedLibrary):
    """The compiled code of a kernel that entries call. numba links a callee's LLVM module into each caller's
    and optimizes the whole at every level, so a helper three calls below `simulate` was optimized three times
    over, with everything below it: 7.7 of a cold warm-up's 36 CPU-seconds went to such module-level passes.
    Only entries run them now, once, over everything they link in (1.8 CPU-s); a kernel keeps numba's
    per-function optimization. It gets no machine code of its own until Python calls it (link_only.py), so an
    entry's calls that LLVM did not inline bind to the entry's own copy, as in a process that loaded it."""

    def _optimize_final_module(self):
        pass


class _KernelCompiler(Compiler):
    """Compiles a kernel to LLVM IR that callers link, without machine code of its own (link_only.py)."""

    def compile_extra(self, func):
        if self.state.library is None:  # what numba's lowering would create, of the class above
            library = self.state.targetctx.codegen().create_library(func.__qualname__)
            if type(library) is JITCodeLibrary:
                library.__class__ = _LinkedInto
            library.enable_object_caching()
            self.state.library = library
        self.state.flags.no_compile = True
        return link_only.placeholder(super().compile_extra(func), self.state.targetctx)


_CACHE = CACHE_DIR is not None
# No C-callable wrapper (numba makes one per function for cfunc-style use, which nothing here makes).
kernel = _one_signature(cache=_CACHE, pipeline_class=_KernelCompiler, no_cfunc_wrapper=True, _nrt=False)
allocating_kernel = _one_signature(cache=_CACHE, pipeline_class=_KernelCompiler, no_cfunc_wrapper=True, _nrt=True)
entry = _one_signature(cache=_CACHE, no_cfunc_wrapper=True, _nrt=True)
entry_nogil = _one_signature(cache=_CACHE, nogil=True, no_cfunc_wrapper=True, _nrt=True)  # releases the GIL: web runs in threads
numeric_entry = _one_signature(cache=_CACHE, no_cfunc_wrapper=True, _nrt=False)
inline = _one_signature(cache=_CACHE, inline="always", no_cfunc_wrapper=True)  # cached only if Python calls it
