"""Logs that follow a training run while it goes: one record per evaluation, appended to a
CSV file (``--csv-log``) or written as TensorBoard scalars (``--tensorboard``)."""
from __future__ import annotations

import csv
import glob
import os

from .files import append_csv_row, atomic_path, standard_stream, written_in_place
from .history import LUA_HISTORIES

TENSORBOARD_MISSING = "--tensorboard needs the tensorboard package: pip install 'dqn-nature[tensorboard]'"
CSV_COLUMNS = ("step", "frames", *LUA_HISTORIES, "epsilon", "lr", "train_fps", "eval_fps")


def _read_back(path: str) -> bool:
    """Whether the log ``path`` is a file its rows can be read back from: an existing regular
    file, not one written in place or through stdout or stderr (``files.append_csv_row``)."""
    return os.path.isfile(path) and not written_in_place(path) and standard_stream(path) is None


def csv_log_problem(path: str) -> str | None:
    """Why the existing file ``path`` cannot take this trainer's rows (not text, or a header
    other than ``CSV_COLUMNS``, or neither a regular file nor stdout or stderr), or None when
    it can (or does not exist). No Lua counterpart (DQN 3.0 logged to stdout only)."""
    if os.path.exists(path) and not os.path.isfile(path) and standard_stream(path) is None:
        return "it is not a regular file"  # a device such as /dev/full would be read without end
    if not _read_back(path):
        return None
    try:
        with open(path, newline="") as fh:
            header = fh.readline().rstrip("\r\n")
            fh.read()  # all of it text: rows are read back when a resume or --overwrite drops some
    except UnicodeDecodeError:
        return "it is not a text file"
    if header and header != ",".join(CSV_COLUMNS):
        return "its columns are not a dqn-train evaluation log's"
    return None


def earlier_records(csv_path: str | None, tensorboard_dir: str | None) -> str | None:
    """Which of the logs ``csv_path`` (``--csv-log``, a file ``csv_log_problem`` accepts) and
    ``tensorboard_dir`` (``--tensorboard``) already holds records, as the option naming it
    (e.g. ``"--csv-log 'log.csv'"``), or None when neither does: a CSV row after the header,
    or a TensorBoard event file. No Lua counterpart (DQN 3.0 logged to stdout only)."""
    if csv_path and _read_back(csv_path):
        with open(csv_path, newline="") as fh:
            if sum(1 for line in fh if line.strip()) > 1:
                return f"--csv-log {csv_path!r}"
    if tensorboard_dir and glob.glob(os.path.join(glob.escape(tensorboard_dir), "events.out.tfevents.*")):
        return f"--tensorboard {tensorboard_dir!r}"
    return None


def _drop_rows_after(path: str, step: int) -> None:
    """Rewrite the CSV log ``path`` without its rows of steps after ``step``, if it has any."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    kept = [row for row in rows if not (row and row[0].isdigit() and int(row[0]) > step)]
    if len(kept) < len(rows):
        with atomic_path(path) as tmp, open(tmp, "w", newline="") as fh:
            csv.writer(fh).writerows(kept)


class EvaluationLogs:
    """The logs a run's options ask for: a CSV file to which each record is appended as a row
    (``csv_path``, ``--csv-log``), TensorBoard event files in the folder ``tensorboard_dir``
    (``--tensorboard``; the records' fields as scalars against agent steps, the run's
    ``arguments``, ``Config.as_dict()``, once as text). Records after ``start_step``, the agent
    step the run starts from, are dropped from both logs (a killed run's after its checkpoint,
    or an earlier run's that a fresh run replaces with ``--overwrite``).

    Raises:
        ImportError: ``tensorboard_dir`` without the tensorboard package (``dqn-train``
            checks first, see ``TENSORBOARD_MISSING``).
        OSError: the CSV file cannot be rewritten, or the TensorBoard folder created.
    """

    def __init__(self, csv_path: str | None, tensorboard_dir: str | None, arguments: dict,
                 start_step: int = 0):
        self.csv_path, self.writer, self.rows = csv_path, None, 0
        if csv_path and _read_back(csv_path):
            _drop_rows_after(csv_path, start_step)
        if tensorboard_dir:
            from torch.utils.tensorboard import SummaryWriter  # the optional extra; imported only when used
            self.writer = SummaryWriter(tensorboard_dir, purge_step=start_step + 1)
            self.writer.add_text("arguments", "\n".join(f"    {k} = {v!r}" for k, v in arguments.items()))

    def write(self, trainer, evaluation) -> None:
        """Log ``evaluation`` (a ``train.Evaluation``) of ``trainer`` (a ``train.Trainer``), flushed at
        once so the run can be followed while it goes. Its record: Python scalars in the order of
        ``CSV_COLUMNS``: ``step`` (agent steps), ``frames``, every history field's newest value
        (``time_history`` in seconds), the training ``epsilon``, ``lr``, and ``train_fps``/``eval_fps``
        in frames/s; the figures ``train_agent.lua`` prints after each evaluation.

        Raises:
            OSError: the CSV file or the TensorBoard folder cannot be written.
        """
        values = {k: trainer.history[k][-1] for k in LUA_HISTORIES}
        values.update(step=evaluation.step, frames=evaluation.frames, epsilon=trainer.agent.train_epsilon(),
                      lr=evaluation.lr, train_fps=evaluation.train_fps, eval_fps=evaluation.eval_fps)
        row = {key: values[key] for key in CSV_COLUMNS}
        if self.csv_path:
            append_csv_row(self.csv_path, row, first=not self.rows)
            self.rows += 1
        if self.writer:
            for key, value in row.items():
                if key not in ("step", "frames"):
                    self.writer.add_scalar(key, value, global_step=row["step"])
            self.writer.flush()

    def close(self) -> None:
        """Close the TensorBoard event file."""
        if self.writer:
            self.writer.close()
