"""The spawner helper: starts the sandbox's pipelines outside the Node worker (lib/sandbox/spawner/README.md).

Node's `spawn` forks the whole worker and waits for the child's exec on the event loop; under load that wait
is the loop's (seconds of lag). This small, long-lived process does the fork/exec and the pipe wiring instead,
and relays each pipeline's output to the worker over its stdout. One helper per worker process; it exits,
killing every process group it started, as soon as its stdin closes (the worker died or let it go).

Frames, both ways: u32 length (of what follows), u8 type, u32 request id, body; integers big-endian.
Worker -> helper:
  'S' start: u32 stderr cap, str cwd, u32 n, n x str env entry (K=V), u32 stages, per stage u32 n, n x str argv
      (argv[0] is the absolute program path); str = u32 length + bytes.
  'K' kill: SIGKILL every process group of the request that has not been reaped.
Helper -> worker:
  'p' started: u16 stage, u32 pid          'e' spawn error: u16 stage, utf-8 message (later stages are not started)
  'o' last stage's stdout bytes            'r' stderr bytes: u16 stage, bytes (at most the cap per stage)
  'x' exit: u16 stage, i32 exit code (-1 when signalled), u8 signal number (0 when it exited)
  'd' done: every started process of the request has exited and its pipes are closed.
"""

import errno
import os
import selectors
import signal
import struct
import subprocess
import sys

HEADER = struct.Struct(">IBI")
MAX_FRAME_BYTES = 16 * 1024 * 1024
READ_BYTES = 64 * 1024
# Stop reading the programs' stdout while this much output waits for the worker (the worker's loop is
# behind): the programs then block on their full pipes instead of this process growing without bound.
OUTPUT_HIGH_WATER = 8 * 1024 * 1024
OUTPUT_LOW_WATER = 1024 * 1024
# Most processes alive at once (`--max-processes N` overrides); a request past it is answered with a spawn
# error. The worker's own limit (the sandbox's Semaphore(64), CodeGrep App. A.1) keeps it far below this.
DEFAULT_MAX_LIVE_PROCESSES = 1024


class Stage:
    __slots__ = ("index", "process", "open_pipes", "returncode", "reported", "stderr_left")

    def __init__(self, index, stderr_cap):
        self.index = index
        self.process = None
        self.open_pipes = 0
        self.returncode = None
        self.reported = False
        self.stderr_left = stderr_cap


class Request:
    __slots__ = ("id", "stages")

    def __init__(self, request_id):
        self.id = request_id
        self.stages = []


class Helper:
    def __init__(self, max_live_processes):
        self.max_live_processes = max_live_processes
        self.selector = selectors.DefaultSelector()
        self.requests = {}
        self.pipes = {}  # fd -> (request, stage, is_stdout)
        self.stdout_pipes = set()
        self.reading_stdout = True
        self.live = 0
        self.inbox = bytearray()
        self.outbox = bytearray()
        self.writing = False
        self.wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
        # Every SIGCHLD writes a byte to the wakeup pipe; each wake polls every live child, so signals that
        # coalesce lose no exit.
        signal.signal(signal.SIGCHLD, lambda *_: None)
        # The helper shares the worker's process group: a terminal's SIGINT is the worker's to act on (it
        # then closes our stdin); SIGTERM sent to the group stops us as the worker stops. A handler, not
        # SIG_IGN, so the programs started here get the default disposition at exec.
        signal.signal(signal.SIGINT, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self.shutdown())
        os.set_blocking(0, False)
        os.set_blocking(1, False)
        self.selector.register(0, selectors.EVENT_READ, "stdin")
        self.selector.register(self.wake_read, selectors.EVENT_READ, "wake")

    # -- output to the worker ------------------------------------------------------------------------------
    def send(self, kind, request_id, body=b""):
        self.outbox += HEADER.pack(5 + len(body), kind, request_id)
        self.outbox += body
        self.flush()

    def flush(self):
        while self.outbox:
            try:
                written = os.write(1, self.outbox)
            except BlockingIOError:
                break
            except (BrokenPipeError, OSError):
                self.shutdown()  # the worker is gone
            del self.outbox[:written]
        want_write = bool(self.outbox)
        if want_write != self.writing:
            self.writing = want_write
            if want_write:
                self.selector.register(1, selectors.EVENT_WRITE, "stdout")
            else:
                self.selector.unregister(1)
        self.apply_backpressure()

    def apply_backpressure(self):
        backlog = len(self.outbox)
        if self.reading_stdout and backlog > OUTPUT_HIGH_WATER:
            self.reading_stdout = False
            for fd in self.stdout_pipes:
                self.selector.unregister(fd)
        elif not self.reading_stdout and backlog < OUTPUT_LOW_WATER:
            self.reading_stdout = True
            for fd in self.stdout_pipes:
                self.selector.register(fd, selectors.EVENT_READ, "pipe")

    # -- requests --------------------------------------------------------------------------------------------
    def on_stdin(self):
        try:
            data = os.read(0, READ_BYTES)
        except BlockingIOError:
            return
        if not data:
            self.shutdown()
        self.inbox += data
        while len(self.inbox) >= 4:
            (length,) = struct.unpack_from(">I", self.inbox, 0)
            if length < 5 or length > MAX_FRAME_BYTES:
                sys.stderr.write(f"spawner helper: bad frame length {length}\n")
                self.shutdown(2)
            if len(self.inbox) < 4 + length:
                break
            _, kind, request_id = HEADER.unpack_from(self.inbox, 0)
            body = bytes(self.inbox[HEADER.size : 4 + length])
            del self.inbox[: 4 + length]
            if kind == ord("S"):
                self.start(request_id, body)
            elif kind == ord("K"):
                self.kill(request_id)
            else:
                sys.stderr.write(f"spawner helper: unknown frame type {kind}\n")
                self.shutdown(2)

    def start(self, request_id, body):
        reader = Reader(body)
        stderr_cap = reader.u32()
        cwd = reader.string()
        env = {}
        for _ in range(reader.u32()):
            key, _, value = reader.string().partition(b"=")
            env[key] = value
        argvs = [[reader.string() for _ in range(reader.u32())] for _ in range(reader.u32())]
        request = Request(request_id)
        request.stages = [Stage(i, stderr_cap) for i in range(len(argvs))]
        self.requests[request_id] = request
        if self.live + len(argvs) > self.max_live_processes:
            message = f"the spawner is at its limit of {self.max_live_processes} processes"
            self.fail_from(request, 0, message)
            self.check_done(request)
            return
        previous_stdout = None
        for stage, argv in zip(request.stages, argvs):
            last = stage.index == len(argvs) - 1
            pipes = []
            try:
                out_read, out_write = os.pipe2(os.O_CLOEXEC)
                pipes += [out_read, out_write]
                err_read, err_write = os.pipe2(os.O_CLOEXEC)
                pipes += [err_read, err_write]
                # start_new_session: each stage leads its own process group (and session), killed whole;
                # restore_signals gives the program default SIGPIPE, as a shell would.
                stage.process = subprocess.Popen(
                    argv,
                    executable=argv[0],
                    stdin=subprocess.DEVNULL if previous_stdout is None else previous_stdout,
                    stdout=out_write,
                    stderr=err_write,
                    cwd=cwd,
                    env=env,
                    close_fds=True,
                    start_new_session=True,
                    restore_signals=True,
                )
            except Exception as error:  # OSError mostly (ENOENT, EACCES, EMFILE); any failure is this stage's
                for fd in pipes:
                    os.close(fd)
                if previous_stdout is not None:
                    os.close(previous_stdout)
                self.fail_from(request, stage.index, describe_spawn_error(argv[0], error))
                self.kill(request_id)
                break
            self.live += 1
            os.close(out_write)
            os.close(err_write)
            if previous_stdout is not None:
                os.close(previous_stdout)
            self.send(ord("p"), request_id, struct.pack(">HI", stage.index, stage.process.pid))
            self.watch(err_read, request, stage, False)
            if last:
                self.watch(out_read, request, stage, True)
                previous_stdout = None
            else:
                previous_stdout = out_read
        # A child may have exited before its pid was known to the SIGCHLD poll.
        self.reap()
        self.check_done(request)

    def fail_from(self, request, index, message):
        self.send(ord("e"), request.id, struct.pack(">H", index) + message.encode("utf-8", "replace"))
        for stage in request.stages[index:]:
            stage.reported = True  # never started: nothing to wait for

    def watch(self, fd, request, stage, is_stdout):
        os.set_blocking(fd, False)
        self.pipes[fd] = (request, stage, is_stdout)
        stage.open_pipes += 1
        if is_stdout:
            self.stdout_pipes.add(fd)
            if not self.reading_stdout:
                return
        self.selector.register(fd, selectors.EVENT_READ, "pipe")

    def kill(self, request_id):
        request = self.requests.get(request_id)
        if request is None:
            return
        for stage in request.stages:
            if stage.process is not None and stage.returncode is None:
                kill_group(stage.process.pid)

    # -- children --------------------------------------------------------------------------------------------
    def on_pipe(self, fd):
        request, stage, is_stdout = self.pipes[fd]
        try:
            data = os.read(fd, READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close_pipe(fd)
            self.check_done(request)
            return
        if is_stdout:
            self.send(ord("o"), request.id, data)
        elif stage.stderr_left > 0:
            piece = data[: stage.stderr_left]
            stage.stderr_left -= len(piece)
            self.send(ord("r"), request.id, struct.pack(">H", stage.index) + piece)

    def close_pipe(self, fd):
        _, stage, is_stdout = self.pipes.pop(fd)
        if is_stdout:
            self.stdout_pipes.discard(fd)
        try:
            self.selector.unregister(fd)
        except KeyError:
            pass
        os.close(fd)
        stage.open_pipes -= 1

    def reap(self):
        for request in list(self.requests.values()):
            for stage in request.stages:
                if stage.process is not None and stage.returncode is None:
                    code = stage.process.poll()
                    if code is not None:
                        stage.returncode = code
                        self.live -= 1
            self.check_done(request)

    def check_done(self, request):
        for stage in request.stages:
            if stage.reported or stage.returncode is None or stage.open_pipes > 0:
                continue
            stage.reported = True
            code = stage.returncode
            body = struct.pack(">HiB", stage.index, -1, -code) if code < 0 else struct.pack(">HiB", stage.index, code, 0)
            self.send(ord("x"), request.id, body)
        if request.id in self.requests and all(stage.reported for stage in request.stages):
            del self.requests[request.id]
            self.send(ord("d"), request.id)

    # -- life cycle ------------------------------------------------------------------------------------------
    def shutdown(self, status=0):
        """The worker is gone (or broke the protocol): kill every group this helper started, reap, exit."""
        processes = [s.process for r in self.requests.values() for s in r.stages if s.process is not None and s.returncode is None]
        for process in processes:
            kill_group(process.pid)
        for process in processes:
            try:
                process.wait(timeout=5)
            except (subprocess.TimeoutExpired, OSError):
                pass
        os._exit(status)

    def run(self):
        while True:
            ready = self.selector.select(timeout=1.0)
            if not ready and self.live:
                self.reap()  # a second without events: poll anyway, so no exit can be missed for long
            for key, _ in ready:
                if key.data == "stdin":
                    self.on_stdin()
                elif key.data == "stdout":
                    self.flush()
                elif key.data == "wake":
                    drain(self.wake_read)
                    self.reap()
                elif key.fileobj in self.pipes:
                    self.on_pipe(key.fileobj)


class Reader:
    def __init__(self, body):
        self.body = body
        self.at = 0

    def u32(self):
        (value,) = struct.unpack_from(">I", self.body, self.at)
        self.at += 4
        return value

    def string(self):
        length = self.u32()
        value = self.body[self.at : self.at + length]
        self.at += length
        return value


def describe_spawn_error(program, error):
    """Node's wording (`spawn /usr/bin/rg ENOENT`), so a message reads the same whichever path started it."""
    if not isinstance(error, OSError):
        return f"spawn {os.fsdecode(program)} failed: {error}"
    code = errno.errorcode.get(error.errno or 0, "EUNKNOWN")
    return f"spawn {os.fsdecode(program)} {code}"


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    except PermissionError:
        pass


def drain(fd):
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def parse_max_processes(argv):
    if len(argv) == 0:
        return DEFAULT_MAX_LIVE_PROCESSES
    if len(argv) == 2 and argv[0] == "--max-processes" and argv[1].isdigit() and int(argv[1]) > 0:
        return int(argv[1])
    sys.stderr.write(f"usage: helper.py [--max-processes N] (N a positive integer), got {argv}\n")
    sys.exit(2)


if __name__ == "__main__":
    Helper(parse_max_processes(sys.argv[1:])).run()
