"""Model requests in a child process: litellm is imported, and called, beside the run's own work.

A CPython process runs Python on one thread at a time (the GIL), so litellm's import (seconds of
CPU) on a thread beside pytest's collection only took turns with it: the first request of a live
run left after collection *and* the import.  A run that makes model turns starts one child per
process at configure time (:class:`TurnProcess`); the child imports litellm at once, on the
machine's other core, and then makes the requests the process's :class:`~.model_turn.TurnPool`
sends it.  The parent keeps everything else of a turn (the concurrency slots, the rate limit,
retries and their backoff, the cache, the record), and never imports litellm for it.

One request, here or in the child, is :func:`answer_once`: litellm's ``acompletion`` bounded on
the wall clock, its failure mapped to a :class:`~.provider_errors.ProviderError` (with the
provider's ``Retry-After``, read from the exception, carried along), its answer as JSON with its
tokens and price.  Frames on the two pipes are pickles sent by the standard library's
:class:`multiprocessing.connection.Connection` (``(id, op, args)`` to the child,
``(id, ok, payload)`` back); the child's stdout and stderr are a nameless temporary file, so nothing litellm
prints can reach the protocol or pytest's capture.  The child exits when its input pipe closes
(the parent closed it, or died).

A process that runs pytest more than once (``pytest.main`` called again, pytester in-process)
keeps an idle, living child from one run for the next when the environment its import read is
the same (:func:`_park`): the next run sends it its own environment and pays no import.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

from pytest_tooleffect.compat import snapshot_logger_registry
from pytest_tooleffect.decide.answer_shape import body_problem, parts_read
from pytest_tooleffect.decide.pricing import price_answer
from pytest_tooleffect.decide.provider_errors import (
    BAD_USAGE,
    ProviderError,
    exception_chain,
    provider_error,
    retry_after_s,
)
from pytest_tooleffect.decide.reported_usage import RawAnswer, reported_counts
from pytest_tooleffect.formats import Price
from pytest_tooleffect.util.bounds import usage_problem
from pytest_tooleffect.util.exceptions import described

__all__ = ["PRELOAD_THREAD", "TurnProcess", "answer_once", "count_tokens", "end_parked", "finish_preload",
           "import_litellm", "keys_in_environment", "preload_litellm", "serve"]

_LITELLM: Any = None
_IMPORT_LOCK = threading.Lock()
_PRELOAD: threading.Thread | None = None
PRELOAD_THREAD = "tooleffect-litellm-import"

#: seconds the child is given to exit once terminated, before it is killed
EXIT_GRACE_S = 5.0


def import_litellm() -> Any:
    """Import litellm once, with the local cost map and its debug output off.

    Safe from any thread: a caller while the import runs (on the preload thread) waits for it.

    Raises:
        ImportError: litellm cannot be imported.
    """
    global _LITELLM
    with _IMPORT_LOCK:
        if _LITELLM is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm as module

            litellm: Any = module
            litellm.suppress_debug_info = True
            litellm.set_verbose = False
            litellm.drop_params = True
            _LITELLM = litellm
    return _LITELLM


def preload_litellm() -> threading.Thread:
    """Start importing litellm on a daemon thread (once per process) and return that thread.

    The import takes seconds; started at configure time it runs while pytest collects, and the
    first model turn's :func:`import_litellm` waits only for the rest of it.  An import error is
    not raised here: the first turn's own :func:`import_litellm` raises it.

    Returns:
        The thread doing (or that did) the import; :func:`finish_preload` joins it.
    """
    global _PRELOAD
    with _IMPORT_LOCK:
        if _PRELOAD is None:
            snapshot_logger_registry()
            _PRELOAD = threading.Thread(target=_preload, name=PRELOAD_THREAD, daemon=True)
            _PRELOAD.start()
        return _PRELOAD


def _preload() -> None:
    try:
        import_litellm()
    except Exception:  # noqa: S110 - the first turn imports again and reports the error where it belongs
        pass


def finish_preload() -> None:
    """Wait for a preload still importing (so the interpreter never exits in the middle of it)."""
    thread = _PRELOAD
    if thread is not None and thread is not threading.current_thread():
        thread.join()


async def answer_once(litellm: Any, kwargs: Mapping[str, Any], timeout_s: float, bound_s: float, model: str,
                      prices: Mapping[str, Price]) -> dict[str, Any]:
    """One request to the provider, bounded on the wall clock.

    Args:
        litellm: the imported litellm module.
        kwargs: ``litellm.acompletion``'s keyword arguments (model, messages, tools, key, base).
        timeout_s: the client's timeout per read, in seconds.
        bound_s: the request's bound on the wall clock, in seconds.
        model: the policy's litellm model name (for its price).
        prices: the user's price table (``--tooleffect-prices``).

    Returns:
        ``{"data": the response as JSON (litellm's ``model_dump``), "tokens": {"input_tokens",
        "output_tokens"} (``None`` each when the provider did not report it as a number: told from
        the body it sent, :func:`~.reported_usage.reported_counts`, since litellm fills an absent
        usage or count with 0), "cost_usd" (US dollars, or ``None``: so too when a count its price
        needs is unknown), "priced_by"}``.

    Raises:
        ProviderError: the request failed (its ``retry_after`` set from the provider's
            ``Retry-After`` header, ``None`` without one), its answer has no JSON form
            (``InvalidResponse``), or the usage it reports is no count of tokens from 0 to
            :data:`~pytest_tooleffect.util.bounds.MAX_TOKENS` (``BadUsage``: negative, fractional or
            absurd counts are not reported as spent, nor is the decision made of such an answer scored:
            the rule an agent's usage follows, ``AgentBadUsage``).
    """
    raw = RawAnswer()  # litellm's zero Usage() is all its response says of a body with no usage: the body tells
    call = litellm.acompletion(**kwargs, timeout=timeout_s, num_retries=0, max_retries=0, logger_fn=raw)
    t0 = time.perf_counter()
    try:
        response = await asyncio.wait_for(call, bound_s)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # every provider failure is an error outcome, never a verdict
        if isinstance(exc, TimeoutError) or (time.perf_counter() - t0 >= bound_s and not any(
                isinstance(e, ConnectionResetError) for e in exception_chain(exc))):
            raise ProviderError("Timeout", f"no complete answer within {timeout_s:g} s per attempt "
                                           f"({bound_s:g} s in all)") from None
        response = _read_refused(litellm, raw.body, exc)
    try:
        data = response.model_dump()
    except Exception as exc:
        raise ProviderError("InvalidResponse", f"the response has no JSON form: {described(exc)}") from exc
    usage = data.get("usage") or {}
    tokens = {"input_tokens": usage.get("prompt_tokens"), "output_tokens": usage.get("completion_tokens")}
    known = reported_counts(raw.body)  # litellm writes 0 for a count the provider left out: the body tells
    if not usage or known == (False, False):  # a provider that reports no usage: unknown, not zero
        tokens = {"input_tokens": None, "output_tokens": None}
    elif known is not None:  # each count on its own: one left out (or null) is unknown, not zero
        tokens = {k: v if said else None for (k, v), said in zip(tokens.items(), known)}
    problem = usage_problem(tokens["input_tokens"], tokens["output_tokens"], None)
    if problem is None:
        cost_usd, priced_by = price_answer(litellm, model, response, prices, tokens)
        problem = usage_problem(None, None, cost_usd)
    if problem is not None:  # never a figure a report would add up: the decision is not made of it either
        said = problem.replace("None when unknown", "absent")
        raise ProviderError(BAD_USAGE, f"the provider's usage is not a count: {said}")
    return {"data": data, "tokens": tokens, "cost_usd": cost_usd, "priced_by": priced_by}


def _read_refused(litellm: Any, body: Any, exc: Exception) -> Any:
    """The answer litellm refused, read from its body when it is a content list of text parts; else the
    fault the body shows, by field (``InvalidResponse``, :mod:`.answer_shape`), else litellm's error.
    """
    if body is not None:
        problem = body_problem(body)
        if problem is not None:
            raise ProviderError("InvalidResponse", problem) from exc
        read = parts_read(body)
        if read is not None:
            return litellm.ModelResponse(**read)
    error = provider_error(exc)
    error.retry_after = retry_after_s(exc)
    raise error from exc


def count_tokens(litellm: Any, kwargs: Mapping[str, Any]) -> int:
    """The request's input tokens by litellm's counter (the model's tokenizer, else tiktoken's);
    a rough count of its characters when the counter cannot read it.
    """
    try:
        return int(litellm.token_counter(model=kwargs["model"], messages=kwargs["messages"],
                                         tools=kwargs.get("tools")))
    except Exception:
        return len(json.dumps(kwargs["messages"], default=str)) // 4 + 1


def keys_in_environment(litellm: Any, model: str, api_base: str) -> bool:
    """Whether litellm's ``validate_environment`` finds the provider's key variable set (``False`` for a
    provider it cannot tell: a local server, which takes any key).
    """
    try:
        return bool(litellm.validate_environment(model=model, api_base=api_base).get("keys_in_environment"))
    except Exception:
        return False


# ------------------------------------------------------------------------------ frames


def _write(conn: Connection, frame: Any) -> None:
    conn.send(frame)


def _read(conn: Connection) -> Any:
    """The next frame, or ``None`` at the end of the stream (a cut frame counts as the end)."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None


# ------------------------------------------------------------------------------ the parent's side


class _Child:
    """One started child: its process, its input stream, the calls it has not answered, and the
    part of its environment its litellm import read (:func:`_import_key`).
    """

    def __init__(self, proc: subprocess.Popen[bytes], to_child: Connection, log: IO[bytes],
                 key: tuple[tuple[str, str], ...]) -> None:
        self.proc = proc
        self.to_child = to_child
        self.log = log
        self.key = key
        self.lock = threading.Lock()  # guards pending and ended (the reader thread's and the callers')
        self.write_lock = threading.Lock()  # one frame at a time on its input
        self.pending: dict[int, concurrent.futures.Future[Any]] = {}
        self.ended = False  # its reader saw its output end: its calls are all failed

    def alive(self) -> bool:
        with self.lock:
            return not self.ended and self.proc.poll() is None

    def idle(self) -> bool:
        """Alive, with no call left unanswered."""
        with self.lock:
            return not self.ended and self.proc.poll() is None and all(f.done() for f in self.pending.values())

    def send(self, frame: Any) -> None:
        """Write one frame (an ``OSError``/``ValueError`` when its input is closed)."""
        with self.write_lock:
            _write(self.to_child, frame)

    def end(self) -> None:
        """Close its input, terminate it if it still runs, and wait for it (killed after :data:`EXIT_GRACE_S`)."""
        try:
            with self.write_lock:
                self.to_child.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()  # it may still be importing litellm, and read its closed input only after
        try:
            self.proc.wait(EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


#: environment variables read when litellm is imported or its HTTP clients are made: a child kept
#: from an earlier run (:func:`_park`) is taken by a later one only when these are the same
_IMPORT_ENV_PREFIXES = ("LITELLM", "PYTHON")
_IMPORT_ENV_NAMES = frozenset({"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
                               "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "AIOHTTP_NO_EXTENSIONS"})
#: request ids, unique in the process: a child kept from one run never sees an id again in the next
_IDS = itertools.count(1)
_PARKED: _Child | None = None
_PARK_LOCK = threading.Lock()
_ATEXIT_SET = False


def _import_key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """What of ``env`` (and the interpreter) a child's litellm import and HTTP clients depend on."""
    kept = {k: v for k, v in env.items()
            if k.upper().startswith(_IMPORT_ENV_PREFIXES) or k.upper() in _IMPORT_ENV_NAMES}
    return (("", sys.executable), *sorted(kept.items()))


def _park(child: _Child) -> bool:
    """Keep an idle child for the next run in this process (``pytest.main`` called again, pytester
    in-process): litellm's import, seconds of CPU, is then paid once per process, not once per run.

    At most one child is kept; the one kept before is ended.  It ends when this process exits
    (its input closes; and :func:`end_parked` at exit waits for it).
    """
    global _PARKED, _ATEXIT_SET
    if not child.idle():
        return False
    with _PARK_LOCK:
        previous, _PARKED = _PARKED, child
        if not _ATEXIT_SET:
            atexit.register(end_parked)
            _ATEXIT_SET = True
    if previous is not None:
        previous.end()
    return True


def _unpark(key: tuple[tuple[str, str], ...]) -> _Child | None:
    """The kept child, when it is alive and was started with the same import environment; else
    ``None`` (a kept child that does not fit is ended).
    """
    global _PARKED
    with _PARK_LOCK:
        child, _PARKED = _PARKED, None
    if child is None:
        return None
    if child.key == key and child.alive():
        return child
    child.end()
    return None


def end_parked() -> None:
    """End the child kept for a next run, if any (registered at exit)."""
    global _PARKED
    with _PARK_LOCK:
        child, _PARKED = _PARKED, None
    if child is not None:
        child.end()


class TurnProcess:
    """The child process that makes one process's model requests (started at most once at a time).

    Each call returns a :class:`concurrent.futures.Future`; a reader thread per child resolves it
    with the child's answer, or fails it with a :class:`~.provider_errors.ProviderError` (the
    child's own, or ``TurnProcessExited`` when that child ended before answering: its log's last
    lines in the message).  Every call belongs to the child it was sent to, so a child that ends
    fails exactly its own calls, whatever was started since.  A call after the child ended starts
    a new one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._child: _Child | None = None

    @property
    def _proc(self) -> subprocess.Popen[bytes] | None:
        """The running child's process, if one was started."""
        child = self._child
        return child.proc if child is not None else None

    def start(self) -> None:
        """Start the child (it imports litellm at once) unless one is running."""
        with self._lock:
            self._start()

    def _start(self) -> _Child:
        child = self._child
        if child is not None and child.alive():
            return child
        if child is not None:  # ended: its reader fails its calls; its input goes
            try:
                with child.write_lock:
                    child.to_child.close()
            except OSError:
                pass
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True")}
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        key = _import_key(env)
        kept = _unpark(key)
        if kept is not None:
            try:  # this run's environment (provider keys, a changed HOME) replaces the earlier run's
                kept.send((next(_IDS), "environ", env))
            except (OSError, ValueError):
                kept.end()
            else:
                self._child = kept
                return kept
        down_r, down_w = os.pipe()  # parent → child
        up_r, up_w = os.pipe()  # child → parent
        log = tempfile.TemporaryFile(prefix="tooleffect-turns-")  # nameless: nothing is left behind, however it ends
        code = ("import sys; from pytest_tooleffect.decide.turn_process import serve; "
                "serve(int(sys.argv[1]), int(sys.argv[2]))")
        try:
            proc = subprocess.Popen([sys.executable, "-c", code, str(down_r), str(up_w)], pass_fds=(down_r, up_w),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, close_fds=True)
        except BaseException:
            log.close()
            raise
        finally:
            os.close(down_r)
            os.close(up_w)
        child = self._child = _Child(proc, Connection(down_w, readable=False), log, key)
        threading.Thread(target=_reader, args=(child, Connection(up_r, writable=False)),
                         name="tooleffect-turns-reader",
                         daemon=True).start()
        return child

    def call(self, op: str, args: Mapping[str, Any]) -> tuple[int, concurrent.futures.Future[Any]]:
        """Send one request to the child: ``(its id, its future)``.

        ``op`` is ``answer`` (:func:`answer_once`'s arguments but ``litellm``), ``count``
        (``kwargs``: :func:`count_tokens`) or ``keys`` (``model``, ``api_base``:
        :func:`keys_in_environment`).
        """
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        request_id = next(_IDS)
        with self._lock:
            child = self._start()
            with child.lock:
                child.pending[request_id] = future
        try:
            child.send((request_id, op, dict(args)))
        except (OSError, ValueError):  # that child is gone: its reader fails its pending calls
            pass
        return request_id, future

    def cancel(self, request_id: int) -> None:
        """Ask the child to drop one request (its future is failed when the child confirms)."""
        child = self._child
        if child is None:
            return
        try:
            child.send((request_id, "cancel", {}))
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        """Release the child: kept for the next run in this process when it is idle and alive
        (:func:`_park`), else ended (its input closed, then terminated) and waited for.
        """
        with self._lock:
            child, self._child = self._child, None
        if child is None or _park(child):
            return
        child.end()


def _reader(child: _Child, stream: Connection) -> None:
    """Resolve ``child``'s futures from its output; when it ends, fail the calls it left (``TurnProcessExited``)."""
    with stream:
        while (frame := _read(stream)) is not None:
            request_id, ok, payload = frame
            with child.lock:
                future = child.pending.pop(request_id, None)
            if future is None or future.done():
                continue
            if ok:
                future.set_result(payload)
            elif payload is None:
                future.cancel()
            else:
                kind, message, status, after = payload
                error = ProviderError(kind, message, status)
                error.retry_after = after
                future.set_exception(error)
    code = child.proc.wait()
    with child.lock:
        child.ended = True
        pending = [f for f in child.pending.values() if not f.done()]
        child.pending.clear()
    if pending:
        why = ProviderError("TurnProcessExited", f"the model-turn process exited (code {code}) before it "
                                                 f"answered{_log_tail(child.log)}")
        for future in pending:
            future.set_exception(why)
    child.log.close()


def _log_tail(log: IO[bytes], most: int = 65536) -> str:
    try:  # pread: the file's offset is the child's too
        size = os.fstat(log.fileno()).st_size
        text = os.pread(log.fileno(), min(size, most), max(0, size - most)).decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = text.strip().splitlines()
    return f"; its log ends: {' | '.join(lines[-3:])[-600:]}" if lines else ""


# ------------------------------------------------------------------------------ the child's side


def _exit_if_orphaned(read_fd: int, imported: threading.Event) -> None:
    """While litellm imports, nothing reads the input pipe: exit at once if it hangs up (the parent
    closed it, or died), instead of seconds later when the import is over.
    """
    import select

    poller = select.poll()
    poller.register(read_fd, 0)  # no event asked: poll reports only a hang-up or an error
    while not imported.is_set():
        if poller.poll(100):
            os._exit(0)


def serve(read_fd: int, write_fd: int) -> None:
    """The child's main: import litellm, then answer frames from ``read_fd`` on ``write_fd`` until
    the input ends.  Requests run concurrently on one event loop (the parent bounds how many).

    Ctrl-C is the parent's to handle (it cancels the turns, and the records say so): the terminal's
    SIGINT, which reaches the whole process group, is ignored here.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    imported = threading.Event()
    threading.Thread(target=_exit_if_orphaned, args=(read_fd, imported), name="tooleffect-turns-orphan",
                     daemon=True).start()
    litellm = import_litellm()
    imported.set()
    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    loop = asyncio.new_event_loop()
    tasks: dict[int, asyncio.Task[None]] = {}

    def reply(request_id: int, ok: bool, payload: Any) -> None:
        try:
            _write(outbox, (request_id, ok, payload))
        except (OSError, ValueError):  # the parent is gone
            loop.stop()

    async def run(request_id: int, op: str, args: dict[str, Any]) -> None:
        try:
            if op == "answer":
                result: Any = await answer_once(litellm, **args)
            elif op == "count":
                result = count_tokens(litellm, args["kwargs"])
            elif op == "keys":
                result = keys_in_environment(litellm, args["model"], args["api_base"])
            else:
                raise ValueError(f"unknown request {op!r}")
        except asyncio.CancelledError:
            reply(request_id, False, None)
        except ProviderError as exc:
            reply(request_id, False, (exc.kind, exc.message, exc.status, exc.retry_after))
        except Exception as exc:  # the child's own fault: an error outcome of the item, never a verdict
            reply(request_id, False, ("TurnProcessError", described(exc), None, None))
        else:
            reply(request_id, True, result)
        finally:
            tasks.pop(request_id, None)

    def receive(frame: Any) -> None:
        if frame is None:
            for each in list(tasks.values()):
                each.cancel()
            loop.call_later(0.2, loop.stop)
            return
        request_id, op, args = frame
        if op == "environ":  # a run that took this child from an earlier one: its environment from now on
            os.environ.clear()
            os.environ.update(args)
            return
        if op == "cancel":
            running = tasks.get(request_id)
            if running is not None:
                running.cancel()
            return
        tasks[request_id] = loop.create_task(run(request_id, op, args))

    def read_all() -> None:
        while True:
            frame = _read(inbox)
            loop.call_soon_threadsafe(receive, frame)
            if frame is None:
                return

    threading.Thread(target=read_all, name="tooleffect-turns-inbox", daemon=True).start()
    try:
        loop.run_forever()
    finally:
        try:
            outbox.close()
        except OSError:  # the parent is gone
            pass
