"""What speed-ups of the learning step must not break.

- A short fixed-seed float32 CPU run gives the same histories and network weights, bit for
  bit, as the golden records in ``tests/data/golden_pong.json``. Floating-point results depend
  on the torch build, the CPU's vector unit and vendor and the thread count, so the run uses
  one thread, the file holds one record per platform and the test is skipped on a platform
  it lacks. To add this platform's record from the current tree (or replace it)::

      python tests/test_golden.py
- Vectorised replay sampling draws the same transitions, with the same random-number use,
  as ``sample_one`` one at a time.
- ``--precision bf16`` trains with finite Q-values and TD errors.
"""
import hashlib
import json
import math
import platform
import sys
from pathlib import Path

import numpy as np
import pytest
import threadpoolctl
import torch

from dqn_nature.config import resolve
from dqn_nature.train import Trainer
from dqn_nature.transition_table import TransitionTable

GOLDEN = Path(__file__).parent / "data" / "golden_pong.json"
# 500 learning steps: 125 updates, 10 target copies, epsilon down to 0.1 (greedy forwards),
# evaluations at steps 750 and 1000 (validation statistics, best network).
RUN = dict(game="pong", steps=1100, learn_start=600, replay_memory=2000, eval_freq=250, eval_steps=100,
           target_q=50, ep_endt=250, seed=3, threads=1)


def cpu_vendor() -> str:
    """/proc/cpuinfo's ``vendor_id`` ("GenuineIntel", "AuthenticAMD"), or "" without it: with
    the same vector unit, MKL and oneDNN still compute in another order on another vendor's CPU."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("vendor_id")), "")
    except OSError:
        return ""


def platform_signature() -> dict:
    """What the float32 results depend on besides the code."""
    return dict(torch=torch.__version__, numpy=np.__version__, machine=platform.machine(),
                cpu_capability=torch.backends.cpu.get_cpu_capability(), vendor=cpu_vendor())


def weights_sha256(state_dict) -> str:
    """SHA-256 of the float32 bytes of a state_dict's tensors, in order."""
    h = hashlib.sha256()
    for value in state_dict.values():
        h.update(value.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()


def train(tmp_path, **overrides) -> Trainer:
    """A finished run of ``RUN`` on one torch and one BLAS thread (the thread count changes
    the floating-point results)."""
    config = resolve(dict(RUN, name=str(tmp_path / "golden"), **overrides))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpoolctl.threadpool_limits(1, user_api="blas"):
            trainer = Trainer(config)
            for _ in trainer.run():
                pass
    finally:
        torch.set_num_threads(threads)
    return trainer


def record(trainer: Trainer) -> dict:
    """The golden record of a finished run: histories (training times left out) and weight hashes."""
    history = {k: v for k, v in trainer.history.items() if k != "time_history"}
    return dict(platform=platform_signature(), history=history,
                model_sha256=weights_sha256(trainer.agent.network.state_dict()),
                best_model_sha256=weights_sha256(trainer.best_network))


def test_fp32_run_matches_golden(tmp_path):
    golden = json.loads(GOLDEN.read_text())
    assert golden["run"] == RUN
    here = platform_signature()
    golden = next((r for r in golden["records"] if r["platform"] == here), None)
    if golden is None:
        pytest.skip(f"no golden record for {here}")
    got = record(train(tmp_path))
    assert got["history"]["step_history"] == [750, 1000]
    assert got["history"] == golden["history"]
    assert got["model_sha256"] == golden["model_sha256"]
    assert got["best_model_sha256"] == golden["best_model_sha256"]


def _table(seed: int) -> TransitionTable:
    """A wrapped-around table of random frames with frequent terminals (redraws and zeroing)."""
    data = np.random.default_rng(0)
    table = TransitionTable(state_dim=16, num_actions=6, hist_len=4, max_size=300, buffer_size=64,
                            rng=np.random.default_rng(seed))
    for _ in range(450):
        table.add(data.integers(0, 256, 16, dtype=np.uint8), int(data.integers(6)),
                  float(data.normal()), bool(data.random() < 0.15))
    return table


def test_vectorised_sampling_draws_as_sample_one():
    vectorised, sequential = _table(7), _table(7)
    for _ in range(3):  # several refills: the generator must stay in step
        vectorised.fill_buffer()
        one_by_one = [sequential.sample_one() for _ in range(vectorised.buffer_size)]
        s, a, r, s2, term = (np.array(x) for x in zip(*one_by_one))
        np.testing.assert_array_equal(vectorised.buf_s, s)
        np.testing.assert_array_equal(vectorised.buf_s2, s2)
        np.testing.assert_array_equal(vectorised.buf_a, a)
        np.testing.assert_array_equal(vectorised.buf_r, r)
        np.testing.assert_array_equal(vectorised.buf_term, term.astype(np.float32))
        assert (vectorised.buf_s == 0).any() and term.any()  # zeroing and terminals exercised
    assert vectorised.rng.random() == sequential.rng.random()


def test_bf16_trains_with_finite_values(tmp_path):
    trainer = train(tmp_path, precision="bf16", steps=620, eval_freq=620, valid_size=100)  # 5 updates
    agent = trainer.agent
    initial = Trainer(resolve(dict(RUN, name=str(tmp_path / "init")))).agent.network.state_dict()
    changed = [not torch.equal(initial[k], v) for k, v in agent.network.state_dict().items()]
    assert all(changed)
    assert all(torch.isfinite(v).all() for v in agent.network.state_dict().values())
    targets, delta, q2_max, q_all = agent.get_q_update(*agent.valid)
    for t in (delta, q2_max, q_all):
        assert t.dtype == torch.float32 and torch.isfinite(t).all()
    assert delta.abs().max() > 0
    assert math.isfinite(trainer.history["td_history"][-1]) and math.isfinite(trainer.history["v_history"][-1])


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        new = record(train(Path(folder)))
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else dict(run=RUN, records=[])
    if golden["run"] != RUN:
        sys.exit(f"{GOLDEN} records another run; move it away to start afresh")
    records = golden["records"]
    i = next((i for i, r in enumerate(records) if r["platform"] == new["platform"]), len(records))
    records[i:i + 1] = [new]
    GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote the record of {Path(sys.modules['dqn_nature'].__file__).parent} "
          f"for {new['platform']} to {GOLDEN}")
