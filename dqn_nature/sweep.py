"""Sweeps: one ``dqn-train`` run per (game, seed) as Ray tasks, on this machine or a cluster (the
work of ``dqn-sweep``, ``commands/sweep.py``).

Each run is ``dqn-train --game G --seed K --name OUT/G/seed<K>/NAME [options]`` in a subprocess
(isolated torch threads and signals, the real command-line validation), with its output in
``OUT/G/seed<K>/train.log``; the sweep's record is ``OUT/sweep.json``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import click
from tqdm import tqdm


POLL_SECONDS = 3.0
CONNECT_SECONDS = 10.0  # for a Ray cluster given by --address host:port
MAX_SEEDS = 1000
FORMAT = "dqn_nature.sweep"
FORMAT_VERSION = 1
# dqn-train's progress line ("Steps: 300 (frames: 1200), 52.1 steps/s, ...") and evaluation
# line ("Steps: 300 (frames: 1200), reward: -21.00, ...").
_LOG_LINE = re.compile(r"Steps: (\d+) \(frames: \d+\), (?:reward: ([^,\s]+)|([\d.]+) steps/s)")


def now() -> str:
    """The local time with its UTC offset, to the second (ISO 8601), as sweep.json records it."""
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def train_run(arguments: list[str], checkpoint: str, log: str, cwd: str) -> dict:
    """Run one ``dqn-train`` to its end, in a Ray worker (pickled by value, so the worker does
    not import torch itself): with ``arguments`` (its options for a run from scratch) after
    ``--resume <checkpoint>`` where the ``<name>.ckpt`` ``checkpoint`` exists (dqn-train refuses a
    changed algorithm option, and takes a new ``--steps``, ``--threads`` or ``--gpu``), else after
    ``--overwrite``; stdout and stderr appended to ``log``, a header line per attempt; in ``cwd``,
    the sweep's working folder, where it exists on the worker's machine.

    Returns:
        ``exit_code`` (negative: killed by that signal; 127: dqn-train could not start),
        ``error`` (None on success; else "killed by signal N", the last ``dqn-train: error:``
        line, the last line of stderr, or "exit status N"),
        ``resumed``, ``host``, ``started``, ``finished`` (ISO times), ``seconds``.
    Raises:
        KeyboardInterrupt: the task was cancelled (after dqn-train got SIGTERM and exited).
    """
    # ray.cancel raises KeyboardInterrupt here through SIGINT's handler: none where the worker
    # inherited SIGINT ignored (a cluster or sweep started in the background).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    exe = os.path.join(os.path.dirname(sys.executable), "dqn-train")
    exe = exe if os.path.exists(exe) else shutil.which("dqn-train") or "dqn-train"
    resumed = os.path.exists(checkpoint)
    command = [exe, *(["--resume", checkpoint] if resumed else ["--overwrite"]), *arguments]
    os.makedirs(os.path.dirname(log), exist_ok=True)
    started, t0, stderr = now(), time.monotonic(), {}
    with open(log, "a") as out:
        out.write(f"# dqn-sweep on {socket.gethostname()} at {started}: {shlex.join(command)}\n")
        out.flush()
        try:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, text=True,
                                    cwd=cwd if os.path.isdir(cwd) else None,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
        except OSError as e:
            code, stderr = 127, {"error": f"cannot start dqn-train: {e}"}
        else:
            copier = threading.Thread(target=_copy_lines, args=(proc.stderr, out, stderr), daemon=True)
            copier.start()
            try:
                # Sleep rather than block in wait(): ray.cancel's KeyboardInterrupt can only
                # arrive while Python code runs.
                while proc.poll() is None:
                    time.sleep(0.5)
            except KeyboardInterrupt:  # ray.cancel: let dqn-train save its files and exit
                proc.terminate()
                proc.wait()
                raise
            code = proc.returncode
            copier.join()
    error = (None if code == 0 else f"killed by signal {-code}" if code < 0
             else stderr.get("error") or stderr.get("last") or f"exit status {code}")
    return dict(exit_code=code, error=error, resumed=resumed, host=socket.gethostname(), started=started,
                finished=now(), seconds=round(time.monotonic() - t0, 1))


def _copy_lines(stream, out, seen: dict) -> None:
    """Copy ``stream`` line by line to the file ``out``; keep in ``seen`` its ``last`` non-blank
    line and its last ``error`` line (``dqn-train: error: ...``, whose message may go on)."""
    for line in stream:
        out.write(line)
        out.flush()
        if line.strip():
            seen["last"] = line.strip()
            if line.startswith("dqn-train: error:"):
                seen["error"] = line.strip()


def parse_seeds(text: str) -> list[int]:
    """Seeds from ``1-5``, ``1,3,7`` or both (``1-3,10``), in order, without repeats. No Lua counterpart.

    Raises:
        click.BadParameter: not of that form, a range whose end is below its start, a seed
            dqn-train refuses (2^31 or more), or more than ``MAX_SEEDS`` seeds.
    """
    from .config import SEED_LIMIT

    seeds = {}
    for part in text.split(","):
        m = re.fullmatch(r"\s*0*(\d{1,19})\s*(?:-\s*0*(\d{1,19})\s*)?", part)  # not int() of 5,000 digits
        if not m or (m[2] and int(m[2]) < int(m[1])):
            raise click.BadParameter(f"{part.strip()!r} is not a seed or a range like 1-5", param_hint="--seeds")
        first, last = int(m[1]), int(m[2] or m[1])
        # A seed given twice counts once; of a longer range, MAX_SEEDS + 1 seeds are enough to refuse it.
        seeds.update(dict.fromkeys(range(first, min(last, first + MAX_SEEDS) + 1)))
        if last >= SEED_LIMIT or len(seeds) > MAX_SEEDS:
            raise click.BadParameter(f"{part.strip()!r}: seeds are below 2^31, at most {MAX_SEEDS} of them",
                                     param_hint="--seeds")
    return list(seeds)


@dataclasses.dataclass
class Run:
    """One (game, seed) of the sweep, its files and what is known of it."""

    game: str
    seed: int
    folder: str
    history: str
    checkpoint: str
    log: str
    csv_log: str | None = None
    tensorboard: str | None = None
    state: str = "pending"  # pending, running, finished, failed or skipped
    exit_code: int | None = None
    error: str | None = None
    resumed: bool = False
    host: str | None = None
    started: str | None = None
    finished: str | None = None
    seconds: float | None = None
    steps: int = 0
    reward: float | None = None
    rate: float | None = None
    log_size: int = dataclasses.field(default=0, repr=False)  # at submission: what follows is this attempt's

    @property
    def label(self) -> str:
        """``<game>/seed<k>``, the run's name in the table."""
        return f"{self.game}/seed{self.seed}"

    def record(self) -> dict:
        """The run as stored in sweep.json."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("log_size", "rate")}

    def poll(self) -> None:
        """Update state, steps, last evaluation reward and steps/s from ``train.log`` and
        ``read_files``; a missing or half-written file is taken as no news."""
        try:
            size = os.path.getsize(self.log)
            with open(self.log, "rb") as fh:
                fh.seek(max(self.log_size, size - 16384))
                tail = fh.read().decode(errors="replace")
        except OSError:
            size, tail = 0, ""
        if self.state == "pending" and size > self.log_size:
            self.state = "running"
        for m in _LOG_LINE.finditer(tail):
            self.steps = max(self.steps, int(m[1]))
            if m[2]:
                self.reward = float(m[2])
            else:
                self.rate = float(m[3])
        self.read_files()

    def read_files(self) -> None:
        """Update steps and the last evaluation reward from the history, else (none yet, or
        ``--save-versions``' ``<name>_<k>.h5``) steps from the checkpoint, where they can be read."""
        from .checkpoint import CheckpointError, read_header
        from .history import HistoryError, load_history

        try:
            history = load_history(self.history)
        except HistoryError:
            with contextlib.suppress(CheckpointError):
                self.steps = max(self.steps, read_header(self.checkpoint)[1])
            return
        self.steps = max(self.steps, history.steps)
        if self.reward is None and len(history.reward_history):
            self.reward = float(history.reward_history[-1])


class Table:
    """The live table: redrawn in place on a terminal, else a line whenever a run changes state
    or reports a new evaluation."""

    HEADER = f"{'run':<24} {'state':<9} {'steps':>21} {'eval':>8} {'steps/s':>8}"

    def __init__(self, runs: list[Run], steps: int):
        self.runs, self.steps, self.start = runs, steps, time.monotonic()
        self.tty = sys.stdout.isatty()
        self.drawn, self.seen = 0, {}

    def row(self, r: Run) -> str:
        """The table line of run ``r``."""
        reward = "" if r.reward is None else f"{r.reward:.2f}"
        rate = f"{r.rate:.0f}" if r.rate is not None and r.state == "running" else ""
        return f"{r.label:<24} {r.state:<9} {f'{r.steps}/{self.steps}':>21} {reward:>8} {rate:>8}"

    def counts(self) -> str:
        """How many runs are in each state, and the time elapsed since the table was made."""
        states = [r.state for r in self.runs]
        parts = [f"{states.count(s)} {s}" for s in ("running", "pending", "finished", "failed", "skipped")
                 if s in states]
        return f"{', '.join(parts)} ({tqdm.format_interval(time.monotonic() - self.start)})"

    def show(self, final: bool = False) -> None:
        """Redraw the table in place on a terminal (only running and failed runs when it is
        taller than the terminal); else print the whole table when ``final``, or a line per
        run whose state or reward changed."""
        if self.tty:
            rows = self.runs
            if len(rows) + 3 > shutil.get_terminal_size().lines:
                rows = [r for r in rows if r.state in ("running", "failed")]
            lines = [self.counts(), self.HEADER, *map(self.row, rows)]
            sys.stdout.write((f"\x1b[{self.drawn}F\x1b[J" if self.drawn else "") + "\n".join(lines) + "\n")
            sys.stdout.flush()
            self.drawn = len(lines)
            return
        if final:
            click.echo("\n".join([self.HEADER, *map(self.row, self.runs)]))
            return
        for r in self.runs:
            key = (r.state, r.reward)
            if self.seen.get(r.label) != key:
                self.seen[r.label] = key
                click.echo(f"{r.label}: {r.state}, {r.steps}/{self.steps} steps"
                           + (f", eval reward {r.reward:.2f}" if r.reward is not None else "")
                           + (f", {r.rate:.0f} steps/s" if r.rate is not None and r.state == "running" else "")
                           + (f": {r.error}" if r.state == "failed" else ""))


def train_arguments(extra: list[str], game: str, preset: str | None, cpus_per_run: float, gpus_per_run: float):
    """Check the options for ``dqn-train`` with its own parser and resolver; return them as
    forwarded (``--threads`` from ``--cpus-per-run`` and ``--gpu -1`` without GPUs, unless
    given) and the resolved ``Config`` of a run of ``game``.

    Raises:
        click.ClickException, ConfigError: a bad option or value.
    """
    from .commands.train import explicit_options, train
    from .config import ConfigError, find_preset, resolve

    ctx = train.make_context("dqn-train", list(extra))
    explicit = explicit_options(ctx, ctx.params)
    for name in ("game", "seed", "name"):
        if name in explicit:
            raise ConfigError(f"--{name} is set by the sweep (use --games, --seeds, --name)")
    if ctx.params.get("resume"):
        raise ConfigError("--resume is the sweep's to give: run the same dqn-sweep command again instead")
    preset_path = os.path.abspath(find_preset(preset)) if preset else None
    config = resolve({**explicit, "game": game}, preset_path, ctx.params["agent_params"], ctx.params["pool_frms"])
    forwarded = (["--args", preset_path] if preset_path else []) + list(extra)
    if "threads" not in explicit:
        forwarded += ["--threads", str(max(1, int(cpus_per_run)))]
    if "gpu" not in explicit and gpus_per_run == 0:
        forwarded += ["--gpu", "-1"]
    return forwarded, config


def run_logs(config, game: str, seed: int) -> tuple[str | None, str | None]:
    """``--csv-log`` and ``--tensorboard`` of run (game, seed), or None where not asked for:
    ``<game>/seed<k>`` goes before the CSV file's name and under the TensorBoard folder, so
    that runs neither interleave rows in one file nor merge into one TensorBoard run."""
    sub = os.path.join(game, f"seed{seed}")
    head, tail = os.path.split(config.csv_log or "")
    return (os.path.join(head, sub, tail) if config.csv_log else None,
            os.path.join(config.tensorboard, sub) if config.tensorboard else None)


def write_record(path: str, arguments: dict, runs: list[Run], started: str, finished: str | None) -> None:
    """Write sweep.json atomically. Raises OSError."""
    from .files import atomic_path

    record = dict(format=FORMAT, format_version=FORMAT_VERSION, command=sys.argv, arguments=arguments,
                  started=started, finished=finished, runs=[r.record() for r in runs])
    with atomic_path(path) as tmp, open(tmp, "w") as fh:
        json.dump(record, fh, indent=1)


def fixed_options(config) -> dict:
    """The options of ``config`` that a resumed run may not change (``resume=False`` in
    ``config.Config``), game and seed aside: what makes the runs of a sweep one experiment."""
    from .config import FIELDS

    return {f.name: getattr(config, f.name) for f in FIELDS
            if not f.metadata["resume"] and f.name not in ("game", "seed")}


def check_same_experiment(path: str, options: dict) -> None:
    """Raise ConfigError when the sweep.json at ``path`` was written with other
    ``fixed_options``: its runs could be neither skipped nor resumed under these. A missing or
    unreadable record, or one from before options were recorded, passes."""
    from .config import ConfigError

    before = {}
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        with open(path) as fh:
            before = json.load(fh)["arguments"]["options"]
    k = next((k for k in options if k in before and before[k] != options[k]), None)
    if k is not None:
        raise ConfigError(f"{path} is a sweep with {k}={before[k]!r}, not {options[k]!r}: "
                          "train other options under another --out")


def previous_finished(path: str, arguments: dict) -> set[tuple[str, int]]:
    """(game, seed) of the runs that a previous sweep.json with the same ``--name`` and
    training arguments records as finished; an unreadable record counts as none. No Lua
    counterpart (DQN 3.0 had no sweeps)."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        with open(path) as fh:
            record = json.load(fh)
        before = record["arguments"]
        if (before["name"], before["train_args"]) == (arguments["name"], arguments["train_args"]):
            return {(r["game"], r["seed"]) for r in record["runs"] if r["state"] in ("finished", "skipped")}
    return set()


def reach_hint() -> str:
    """How to reach a cluster that refused this process, most often for want of its token:
    Ray 2.59 and later turn token authentication on for a cluster whose head node holds a token
    (``~/.ray/auth_token``, made by any earlier local ``ray.init``), and a client sends its token
    for an explicit address only with ``RAY_AUTH_MODE=token`` (``auto`` finds the local token)."""
    token = "its token, which `ray get-auth-token` prints on its head node, in RAY_AUTH_TOKEN or ~/.ray/auth_token"
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return f"a cluster with token authentication needs {token}"
    return f"on a node of the cluster use --address auto; elsewhere set RAY_AUTH_MODE=token and put {token}"


def start_ray(address: str | None):
    """``ray.init`` on a local embedded instance (all CPUs of this machine) or at ``address``.
    Raises ConnectionError at once where ``address`` is a ``host:port`` (or ``ray://host:port``) that
    accepts no connection within ``CONNECT_SECONDS`` (Ray would retry for minutes, printing warnings),
    and with ``reach_hint()`` where Ray cannot connect to an address other than ``auto``."""
    import logging

    host, colon, port = (address or "").removeprefix("ray://").rpartition(":")
    if colon and port.isdigit():
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
        except OSError as e:  # not os_reason: a resolver error's errno is no errno of the system
            raise ConnectionError(e.strerror or str(e)) from e

    import ray

    options = dict(log_to_driver=False, logging_level=logging.WARNING)
    if address:
        try:
            ray.init(address=address, **options)
        except Exception as e:  # ConnectionError, RuntimeError, AuthenticationError: each version differs
            if address == "auto":
                raise
            raise ConnectionError(f"{e}; {reach_hint()}") from e
    else:
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, **options)
    return ray


def run_all(ray, todo: list[Run], table: Table, forwarded: list[str], max_concurrent: int, cpus: float,
             gpus: float, save) -> None:
    """Submit the runs (at most ``max_concurrent`` at a time) and poll them until all have ended
    or Ctrl-C (or SIGTERM) interrupts the sweep, calling ``save()`` on each change of state."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    task = ray.remote(train_run).options(num_cpus=cpus, num_gpus=gpus)
    cwd, queue, in_flight = os.getcwd(), list(todo), {}

    def finish(ref, run):
        del in_flight[ref]
        run.poll()
        try:
            result = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            run.state, run.error = ("failed", "interrupted") if run.state == "running" else ("pending", None)
            return
        except ray.exceptions.RayError as e:
            run.state, run.error = "failed", str(e).strip().splitlines()[-1]
            return
        for key, value in result.items():
            setattr(run, key, value)
        run.state = "finished" if run.exit_code == 0 else "failed"

    try:
        while queue or in_flight:
            while queue and len(in_flight) < max_concurrent:
                run = queue.pop(0)
                run.log_size = os.path.getsize(run.log) if os.path.exists(run.log) else 0
                arguments = ["--game", run.game, "--seed", str(run.seed),
                             "--name", os.path.splitext(run.history)[0], *forwarded]
                # Given last, these override the forwarded (or preset) paths common to all runs.
                arguments += ["--csv-log", run.csv_log] if run.csv_log else []
                arguments += ["--tensorboard", run.tensorboard] if run.tensorboard else []
                in_flight[task.remote(arguments, run.checkpoint, run.log, cwd)] = run
            done, _ = ray.wait(list(in_flight), num_returns=1, timeout=POLL_SECONDS)
            states = [r.state for r in todo]
            for ref in done:
                finish(ref, in_flight[ref])
            for run in in_flight.values():
                run.poll()
            if states != [r.state for r in todo]:
                save()
            table.show()
    except KeyboardInterrupt:
        click.echo("Interrupted: stopping the runs (each dqn-train saves its files)...", err=True)
        for ref in in_flight:
            ray.cancel(ref)
        ended, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=120)
        for ref in ended:
            finish(ref, in_flight[ref])
        for run in in_flight.values():
            run.state, run.error = "failed", "interrupted; did not stop within 120 s"
        save()


def summary(runs: list[Run], out: str, table: Table) -> None:
    """Print the sweep's closing lines: the runs' counts by state, each failed run's error and
    log, where the files are, and the ``dqn-report`` command that compares them."""
    click.echo(f"Sweep: {table.counts()} of {len(runs)} runs")
    for r in runs:
        if r.state == "failed":
            click.echo(f"  {r.label} failed: {r.error} (log: {r.log})")
    click.echo(f"Histories: {out}/<game>/seed<k>/*.h5, logs: train.log beside them, record: {out}/sweep.json")
    click.echo(f"Compare the games over their seeds: dqn-report {out}")
    click.echo(f"Plot a game's seeds: dqn-plot {out}/<game> -o {out}/<game>.png "
               f"(e.g. dqn-plot {out}/{runs[0].game} -o {out}/{runs[0].game}.png)")
