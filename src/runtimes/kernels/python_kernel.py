"""sandboxd Python kernel (see docs/kernel-protocol.md).

Run as: /usr/bin/python3 -I python_kernel.py once|repl|zygote
fd 3 is the control socket (newline-delimited JSON); fd 1/2 carry guest output.
Only the standard library; keep the imports before "ready" minimal.
"""
import ast
import json
import os
import sys

CTL_FD = 3
SANDBOX_FILE = "<sandbox>"
DEFAULT_RESULT_LIMIT = 65536
CODE_CACHE_MAX = 256  # compiled cells kept (a cell run again is not compiled again)
WORKSPACE_ROOT = os.environ.get("SANDBOX_WORKSPACE_ROOT") or "/workspace"
if len(WORKSPACE_ROOT) > 1:
    WORKSPACE_ROOT = WORKSPACE_ROOT.rstrip("/")


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# Made once: json.dumps with options builds a new encoder on every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _send(obj):
    line = _ENCODER.encode(obj)
    # Lone surrogates (from surrogateescape'd data) cannot be encoded: replace them.
    _write_all(CTL_FD, line.encode("utf-8", "replace") + b"\n")


def _flush_guest_streams():
    last = None
    for name in ("stdout", "__stdout__", "stderr", "__stderr__"):
        stream = getattr(sys, name, None)
        if stream is None or stream is last:  # sys.__stdout__ is usually sys.stdout
            continue
        last = stream
        try:
            stream.flush()
        except Exception:
            pass


def _utf8_len(s):
    return len(s.encode("utf-8", "surrogatepass"))


def _limit_text(limit):
    if limit % 1024 == 0:
        return "%d KiB" % (limit // 1024)
    return "%d bytes" % limit


def _apply_env(env):
    """os.environ becomes exactly env (a key or value that cannot be set is
    skipped), changing only what differs from the last cell's: an unchanged
    env costs no putenv/unsetenv."""
    want = {}
    for key, val in env.items():
        try:
            want[str(key)] = str(val)
        except Exception:
            pass
    cur = os.environ
    for key in [k for k in cur if k not in want]:
        del cur[key]
    for key, val in want.items():
        if cur.get(key) != val:
            try:
                cur[key] = val
            except Exception:
                pass


class _FreshImports:
    """First on sys.meta_path (repl): the first import search of a cell
    forgets the import system's directory caches, since files may have
    changed since the last cell. Done there, not before every cell: most
    cells import nothing new, and a module already in sys.modules never
    gets here."""
    stale = False

    def find_spec(self, name, path=None, target=None):
        if _FreshImports.stale:
            _FreshImports.stale = False
            try:
                import importlib
                importlib.invalidate_caches()
            except Exception:
                pass
        return None


def _confined_cwd():
    try:
        cwd = os.getcwd()
    except OSError:
        return WORKSPACE_ROOT
    if cwd == WORKSPACE_ROOT or cwd.startswith(WORKSPACE_ROOT.rstrip("/") + "/"):
        return cwd
    return WORKSPACE_ROOT


def _map_result(value):
    """Returns ((kind, encoded), utf8_size), or (None, 0) for no result."""
    if value is None:
        return None, 0
    if isinstance(value, (dict, list)):
        try:
            payload = json.dumps(value, allow_nan=False, ensure_ascii=False,
                                 separators=(",", ":"))
        except Exception:
            payload = None
        if payload is not None:
            return ("json", payload), _utf8_len(payload)
    text = repr(value)
    return ("text", text), _utf8_len(text)


def _format_error(exc):
    # Drop the kernel's own frames (and stdlib frames it called, e.g. ast.parse):
    # the traceback starts at the first guest frame.
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != SANDBOX_FILE:
        tb = tb.tb_next
    try:
        import traceback
        te = traceback.TracebackException(type(exc), exc, tb)
        lines = "".join(te.format()).rstrip("\n").split("\n")
    except Exception:
        lines = ["%s: %s" % (type(exc).__name__, exc)]
    if not lines or lines[0] != "Traceback (most recent call last):":
        lines.insert(0, "Traceback (most recent call last):")
    try:
        message = str(exc)
    except Exception:
        message = "<unprintable %s object>" % type(exc).__name__
    return {"name": type(exc).__name__, "message": message, "traceback": lines}


# ---- interrupts (docs/kernel-protocol.md "Interrupts") ----

class _Cell:
    """Whether a guest cell runs now: SIGINT stops only that."""
    running = False


def _on_sigint(signum, frame):
    if _Cell.running:
        _Cell.running = False
        raise KeyboardInterrupt


# ---- rich display (docs/kernel-protocol.md "Display") ----

INLINE_BACKEND = "_sandboxd_inline"


class _Display:
    """MIME bundles of one cell: figures shown (plt.show() or left open at
    the end of the cell, as Jupyter's inline backend does) and the last
    expression's. Within a byte budget: past it an image is left out."""

    def __init__(self, budget):
        self.items = []
        self.budget = budget
        self.used = 0

    def _fit(self, bundle):
        size = sum(_utf8_len(v) if isinstance(v, str) else _utf8_len(json.dumps(v))
                   for v in bundle.values())
        if self.used + size <= self.budget:
            self.used += size
            return bundle
        note = "%s (display omitted: over the display limit of %s)" % (
            bundle.get("text/plain", ""), _limit_text(self.budget))
        self.used += _utf8_len(note)
        return {"text/plain": note}

    def add(self, bundle):
        self.items.append(self._fit(bundle))


def _png_b64(fig):
    import base64
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _figure_bundle(fig):
    return {"text/plain": repr(fig), "image/png": _png_b64(fig)}


def _flush_figures(display, skip=None):
    """Renders every open pyplot figure (but skip) into display, then closes
    them all: nothing shown twice, nothing left for the next cell."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        from matplotlib import _pylab_helpers
        for manager in _pylab_helpers.Gcf.get_all_fig_managers():
            fig = manager.canvas.figure
            if display is not None and fig is not skip:
                display.add(_figure_bundle(fig))
        plt.close("all")
    except Exception as exc:
        sys.stderr.write("display: cannot render a figure: %s\n" % exc)


class _InlineBackend:
    """matplotlib's backend "module://_sandboxd_inline", made on import (a
    finder on sys.meta_path: no file in the guest's path): Agg drawing, and
    plt.show() puts the open figures into the cell's display."""
    current = None  # the running cell's _Display

    def find_spec(self, name, path=None, target=None):
        if name != INLINE_BACKEND:
            return None
        import importlib.util
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        module.FigureCanvas = FigureCanvasAgg

        def show(*args, **kwargs):
            _flush_figures(_InlineBackend.current)
        module.show = show


def _result_bundle(value):
    """The last expression's MIME bundle: text/plain always, then
    application/json, text/html (_repr_html_, e.g. a pandas frame) and
    image/png (a Figure, or _repr_png_) where the value has them."""
    bundle = {"text/plain": repr(value)}
    if isinstance(value, (dict, list)):
        try:
            bundle["application/json"] = json.loads(json.dumps(value, allow_nan=False))
        except Exception:
            pass
    for mime, method in (("text/html", "_repr_html_"), ("image/png", "_repr_png_")):
        fn = getattr(type(value), method, None)
        if fn is None:
            continue
        try:
            data = fn(value)
        except Exception:
            continue
        if isinstance(data, bytes):
            import base64
            data = base64.b64encode(data).decode("ascii")
        if isinstance(data, str):
            bundle[mime] = data
    fig_mod = sys.modules.get("matplotlib.figure")
    if fig_mod is not None and isinstance(value, fig_mod.Figure):
        try:
            bundle["image/png"] = _png_b64(value)
        except Exception:
            pass
    return bundle


class Kernel:
    def __init__(self, mode):
        self.mode = mode
        # The guest gets its own __main__ module; the kernel's globals stay out of it.
        self.kernel_module = sys.modules.get("__main__")
        self.guest_module = type(sys)("__main__")
        self.guest_module.__dict__.update({
            "__builtins__": __builtins__, "__doc__": None,
            "__package__": None, "__spec__": None,
        })
        self.ns = self.guest_module.__dict__
        sys.modules["__main__"] = self.guest_module
        sys.path.insert(0, WORKSPACE_ROOT)
        self.pid = os.getpid()
        self.seeded_after_fork = False  # by a pool member's warm-up
        self.compiled = {}  # cell source -> (statements, last expression)

    def adopt_process(self):
        """A template's executor is a fork the interpreter never saw (the
        fork-server shim forks below Python): take the new pid as ours, for
        the "a guest's forked child never answers" check. (The daemon asks
        such executors to reseed with "reseed".)"""
        self.pid = os.getpid()

    def _register_source(self, code):
        try:
            linecache = sys.modules.get("linecache")
            if linecache is None:
                import linecache
            linecache.cache[SANDBOX_FILE] = (len(code), None,
                                             code.splitlines(True), SANDBOX_FILE)
        except Exception:
            pass

    def _compile(self, code):
        """(statements, last expression) of a cell as code objects, either
        None: the last expression is compiled apart for its value."""
        tree = ast.parse(code, SANDBOX_FILE, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = compile(ast.Expression(tree.body.pop().value), SANDBOX_FILE, "eval")
        return (compile(tree, SANDBOX_FILE, "exec") if tree.body else None), last

    def _compiled(self, code):
        """_compile, kept by source text: a cell run again (a loop of
        requests) is not parsed and compiled again. One whose compiling
        warned (a SyntaxWarning) is not kept, so it warns every time, as
        it did when every cell was compiled."""
        hit = self.compiled.get(code)
        if hit is not None:
            return hit
        # Seen through showwarning, not catch_warnings: that would reset
        # every warning registry (a "once" warning of the guest's shown
        # again after each new cell).
        import warnings
        caught = []
        show = warnings.showwarning
        warnings.showwarning = lambda *args: caught.append(args)
        try:
            pair = self._compile(code)
        finally:
            warnings.showwarning = show
            for args in caught:  # shown as they would have been
                show(*args)
        if not caught:
            if len(self.compiled) >= CODE_CACHE_MAX:
                self.compiled.clear()
            self.compiled[code] = pair
        return pair

    def _run_code(self, code):
        """Executes code in the guest namespace; returns the last expression's value."""
        self._register_source(code)
        body, last = self._compiled(code)
        if body is not None:
            exec(body, self.ns)
        if last is not None:
            return eval(last, self.ns)
        return None

    def _display_env(self, env):
        """The inline backend and a writable config dir for matplotlib,
        unless the guest chose its own."""
        if "MPLBACKEND" not in env:
            os.environ["MPLBACKEND"] = "module://" + INLINE_BACKEND
        if "MPLCONFIGDIR" not in env:
            os.environ["MPLCONFIGDIR"] = "/tmp/.matplotlib"
        if "XDG_CACHE_HOME" not in env and "HOME" not in env:  # fontconfig's cache
            os.environ["XDG_CACHE_HOME"] = "/tmp/.cache"

    def _reseed(self, req):
        """A pool member's warm-up runs after its fork (docs/kernel-protocol.md):
        seeding there already gave this process its own sequence, so the real
        request's reseed is skipped (2.5 KB of getrandom and a generator
        init, ~12 us in a member). A template never gets a warm-up."""
        warmup = req.get("warmup") is True
        if self.seeded_after_fork or not (warmup or req.get("reseed")):
            return
        rnd = sys.modules.get("random")
        if rnd is not None:
            rnd.seed()
        self.seeded_after_fork = warmup

    def handle(self, req):
        self._reseed(req)
        env = req.get("env") or {}
        _apply_env(env)
        limit = req.get("resultLimit")
        if not isinstance(limit, int) or limit <= 0:
            limit = DEFAULT_RESULT_LIMIT
        results = []
        error = None
        child_status = 0
        rich = self.mode == "repl" and req.get("display") is True
        display = _Display(limit * 4) if rich else None
        data = shown = None
        if rich:
            self._display_env(env)
            # Every displaying cell closes its figures: one still open was
            # drawn by a replayed cell (a restore), shown long ago.
            _flush_figures(None)
        _InlineBackend.current = display
        try:
            cwd = req.get("cwd")
            if cwd:
                os.chdir(cwd)
            if self.mode == "repl":  # files may have changed since the last cell
                _FreshImports.stale = True
            _Cell.running = self.mode == "repl"
            value = self._run_code(req.get("code") or "")
            _Cell.running = False
            entry, size = _map_result(value)
            if entry is not None:
                if size > limit:
                    error = {"name": "ExecutionLimitError",
                             "message": "Result limit exceeded (%s)" % _limit_text(limit),
                             "traceback": []}
                elif entry[0] == "json":
                    results = [{"json": json.loads(entry[1])}]
                else:
                    results = [{"text": entry[1]}]
                if display is not None and error is None:
                    data = display._fit(_result_bundle(value))
                    shown = value  # a Figure result is not shown twice
            value = entry = None
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included
            _Cell.running = False
            child_status = 1
            if isinstance(exc, SystemExit):
                child_status = exc.code if isinstance(exc.code, int) else (exc.code is not None)
            if os.getpid() == self.pid:
                error = _format_error(exc)
            exc = None
        _flush_guest_streams()
        if os.getpid() != self.pid:  # a forked guest child must never answer on fd 3
            os._exit(int(child_status) & 0xFF)
        if rich:  # as Jupyter's inline backend after every cell, failed ones too
            _flush_figures(display, skip=shown)
        shown = None
        _InlineBackend.current = None
        resp = {"results": results, "error": error, "cwd": _confined_cwd()}
        if display is not None:
            resp["display"] = display.items
            resp["data"] = data
        return resp


def _serve(mode, kernel, announce):
    ctl = open(CTL_FD, "rb", buffering=65536, closefd=False)
    if announce:
        _send({"ready": True})
    while True:
        line = ctl.readline()
        if not line:
            break
        if not line.strip():
            continue
        try:
            # The daemon writes UTF-8 (json.loads would first guess it).
            req = json.loads(line.decode("utf-8", "surrogatepass"))
            if not isinstance(req, dict):
                raise ValueError("request must be an object")
        except Exception as exc:
            _send({"results": [], "cwd": _confined_cwd(),
                   "error": {"name": "EngineError", "message": "bad request: %s" % exc,
                             "traceback": []}})
            if mode == "once":
                break
            continue
        if mode == "once":  # a repl kernel is never forked below Python
            kernel.adopt_process()
        try:
            resp = kernel.handle(req)
        except KeyboardInterrupt:  # SIGINT just as a cell ended
            _Cell.running = False
            resp = {"results": [], "cwd": _confined_cwd(),
                    "error": {"name": "KeyboardInterrupt", "message": "", "traceback": []}}
        _send(resp)
        if req.get("warmup") is True and mode == "once":
            # A template's pool member serves one request of the daemon's
            # before it is published, so the copy-on-write faults of the
            # request path happen off that path. It does not count. Its
            # objects go now: alive while the next request is decoded, they
            # made that request take fresh pymalloc pools, i.e. pages still
            # shared with the template (2-3 faults per request; none since).
            line = req = resp = None
            continue
        if mode == "once":
            break
    _flush_guest_streams()
    if mode == "once":
        _linger(ctl)
    os._exit(0)


def _linger(ctl):
    """A once-mode kernel waits after its answer for the daemon's kill (or
    EOF): exiting by itself, it freed its memory right when the daemon woke
    to read the answer, on the same CPU (docs/kernel-protocol.md)."""
    try:
        while ctl.read1(65536):
            pass
    except OSError:
        pass


def _main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "once"
    if mode not in ("once", "repl", "zygote"):
        sys.stderr.write("usage: python_kernel.py once|repl|zygote\n")
        os._exit(2)
    os.set_inheritable(CTL_FD, False)
    try:
        sys.stdout.reconfigure(line_buffering=True)
    except Exception:
        pass
    if mode == "repl":
        import signal
        signal.signal(signal.SIGINT, _on_sigint)
        sys.meta_path.insert(0, _FreshImports())
        sys.meta_path.append(_InlineBackend())
    kernel = Kernel(mode)
    # Warm up: one trivial cell through the real path loads the lazily
    # imported machinery, so the first real request pays none of it.
    kernel.handle({"code": "1+1", "env": dict(os.environ)})
    if mode == "zygote":
        # A template (docs/kernel-protocol.md): a once-mode kernel whose
        # first read of fd 3 becomes the fork server (libsandboxd-forkserver
        # is preloaded). Everything allocated so far is shared with every
        # executor: keep the collector from walking (and copying) it.
        import gc
        gc.collect()
        gc.freeze()
        mode = sys.argv[1] = "once"  # the guest sees a once-mode kernel's argv
    _serve(mode, kernel, announce=True)


if __name__ == "__main__":
    _main()
