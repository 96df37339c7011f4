"""Minibatch updates computed on a second thread while the agent acts (``--overlap-updates``).

No Lua counterpart: DQN 3.0 computes each update inside ``perceive``, after choosing the
step's action. The update of step t + 4 needs only the weights after the update of step t
and its minibatch, which the prefetch buffer fixes in advance (15 updates in 16 with the
paper's ``bufferSize`` 512 and minibatch 32). So a worker thread starts it as soon as the
previous update ends, while the agent plays steps t + 1 to t + 4; the weights change only
after the action of step t + 4 is chosen, as in the Lua. Inside the update the two threads
split the work (in fp32, or in bf16 on the networks' bfloat16 copies, as the serial update
computes): the worker runs the online network's forward pass and the backward chain
through the layers' inputs; the agent's thread computes the target network's Q-values (a
minibatch ahead where it can) and the weight gradients of fc1 and conv3; each applies
RMSProp to its share of the parameters.

Every operation runs on one torch thread, on either thread, and is the operator autograd
would call (``aten.convolution_backward`` with a split output mask, the matrix products of
``AddmmBackward``), so the weights equal those of serial updates with ``--threads 1`` bit
for bit.
"""
from __future__ import annotations

import queue
import threading
import weakref

import torch
import torch.nn.functional as F

_aten = torch.ops.aten
_POLL = 0.05  # seconds between the worker's checks, while it waits, that its agent still exists


def forward_saved(net, x: torch.Tensor):
    """``net``'s forward pass keeping what its backward pass needs.

    x: float32 (N, C, 84, 84) channels-last. Returns (Q-values float32 (N, n_actions),
    (x, a1, a2, a3, f, a4): the input, the three convolutions' ReLU outputs, conv3's output
    flattened (N, 3136) and fc1's ReLU output (N, 512)). The values of ``net(x)``.
    """
    c1, c2, c3, l1, l2 = net.layers()
    a1 = torch.relu_(F.conv2d(x, c1.weight, c1.bias, c1.stride, c1.padding))
    a2 = torch.relu_(F.conv2d(a1, c2.weight, c2.bias, c2.stride, c2.padding))
    a3 = torch.relu_(F.conv2d(a2, c3.weight, c3.bias, c3.stride, c3.padding))
    f = a3.flatten(1)
    a4 = torch.relu_(F.linear(f, l1.weight, l1.bias))
    return F.linear(a4, l2.weight, l2.bias), (x, a1, a2, a3, f, a4)


def _conv_grad(conv, grad: torch.Tensor, inp: torch.Tensor, weights: bool):
    """``conv``'s (weight, bias) gradients, or its input's gradient, as autograd computes them."""
    mask = [False, True, True] if weights else [True, False, False]
    out = _aten.convolution_backward(grad, inp, conv.weight, [conv.out_channels], conv.stride, conv.padding,
                                     conv.dilation, False, [0, 0], 1, mask)
    return out[1:] if weights else out[0]


def _linear_grad(grad: torch.Tensor, inp: torch.Tensor):
    """A linear layer's (weight, bias) gradients, as ``AddmmBackward`` computes them."""
    return grad.t().mm(inp), grad.sum(0)


def _relu_grad(grad: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The gradient through a ReLU whose output was ``out``, as ``ReluBackward`` computes it."""
    return _aten.threshold_backward(grad, out, 0)


class _Closed(Exception):
    """The agent that owned the worker is gone."""


class _Job:
    """One update in flight: its minibatch and key, the versions of the weights it started
    from, the tensors the two threads hand each other and the events that say they are ready."""

    def __init__(self, agent, key, minibatch):
        self.agent = weakref.ref(agent)  # the worker must not keep a dropped agent alive
        self.key, self.minibatch = key, minibatch
        # The online network's module that computes: itself, or with bf16 its bfloat16 copy
        # (refreshed here, on the agent's thread, which also reads it to act).
        self.copy = None if agent._bf16_copies is None else agent._bf16_copy(agent.network)
        self.net = agent.network if self.copy is None else self.copy.model
        self.versions, self.r_max = _versions(agent.network), agent.r_max
        self.q2_max = self.q2_versions = None  # target Q-values computed ahead, and their weights' versions
        self.saved = self.g4 = self.g3 = self.error = None
        self.grads = {}  # layer index -> (weight, bias) gradients
        self.float_grads = {}  # with bf16: parameter -> the float32 gradient its step used, or None
        self.aborted = False
        for name in _EVENTS:
            setattr(self, name, threading.Event())

    def abort(self) -> None:
        """Let the worker drop this job, and wait until it has."""
        self.aborted = True
        self.q2_ready.set()
        self.acted.set()
        self.done.wait()

    def step(self, agent, which, rows: slice = slice(None)) -> None:
        """RMSProp on ``which``: (layer index, 0 for the weight or 1 for the bias) pairs."""
        parts = [(_parameter(agent.network, i, k), self.grads[i][k],
                  None if self.copy is None else _parameter(self.net, i, k)) for i, k in which]
        self.float_grads.update(agent.optimizer.step_part(parts, rows))

    def keep_gradients(self, agent) -> None:
        """Leave the update's gradients where the serial update leaves them, for ``report()``:
        float32 ``dw`` in the parameters' ``grad``; with bf16, ``dw`` in the copy's, or
        ``dw - wc w`` in the parameters' where there is a weight cost. Marks the copy fresh."""
        for i in range(5):
            for k in (0, 1):
                p = _parameter(agent.network, i, k)
                if self.copy is None:
                    p.grad = self.grads[i][k]
                    continue
                p.grad = self.float_grads[p]
                _parameter(self.net, i, k).grad = None if p.grad is not None else self.grads[i][k]
        if self.copy is not None:
            self.copy.refreshed()

    def fail(self, error: BaseException) -> None:
        """Hand the worker's ``error`` to the agent's thread, which raises it."""
        self.error = error
        for name in _EVENTS:
            getattr(self, name).set()


# q2_ready: target Q-values given; acted: the step's action is chosen, the weights may change;
# g4/g3/g2_ready: the gradients at fc1's, conv3's and conv2's outputs; fc1_ready: fc1's
# weight gradients (the agent's thread); done: the worker has finished the job.
_EVENTS = ("q2_ready", "acted", "g4_ready", "g3_ready", "g2_ready", "fc1_ready", "done")


def _parameter(net, layer: int, k: int) -> torch.Tensor:
    """The weight (``k`` 0) or the bias (1) of ``net``'s layer ``layer`` (0 to 4, input first)."""
    module = net.layers()[layer]
    return module.bias if k else module.weight


def _versions(net) -> tuple:
    """The version counters of ``net``'s parameters: each in-place change bumps one."""
    return tuple(p._version for p in net.parameters())


class OverlappedUpdates:
    """The worker thread and the updates it computes for a CPU ``NeuralQLearner`` (fp32 or bf16).

    The agent calls ``update(minibatch)`` in place of its serial update, after the step's
    action is chosen, and ``start_next()`` at the end of a ``perceive`` that updated. Both
    run on the agent's thread, which must use one torch thread (``Trainer`` sets it). An
    update whose minibatch, weights, target Q-values or ``r_max`` changed since it started
    is dropped and computed again. The worker ends when the agent is collected, or at exit.

    Args:
        agent: the ``NeuralQLearner``.
    """

    def __init__(self, agent):
        self.agent = agent
        self.job = None
        self.ahead = None  # (key, target weights' versions, q2_max) of the next minibatch
        jobs, closed = queue.SimpleQueue(), threading.Event()
        self._jobs = jobs
        worker = threading.Thread(target=_work, args=(jobs, closed), name="dqn-update", daemon=True)
        worker.start()
        weakref.finalize(self, _close, jobs, closed, worker)

    def _target(self):
        a = self.agent
        return a.target_network if a.target_q else a.network

    def _next(self):
        """(key, minibatch) that the next ``sample`` will return, or None if it refills."""
        t, n = self.agent.transitions, self.agent.minibatch_size
        if t.buf_ind is None or t.buf_ind + n > t.buffer_size:
            return None
        sl = slice(t.buf_ind, t.buf_ind + n)
        return (t.fills, sl.stop), (t.buf_s[sl], t.buf_a[sl], t.buf_r[sl], t.buf_s2[sl], t.buf_term[sl])

    def start_next(self) -> None:
        """Start the next update on the worker if its minibatch is known already."""
        if self.job is None and (upcoming := self._next()) is not None:
            self.job = self._submit(*upcoming)

    def _submit(self, key, minibatch) -> _Job:
        job = _Job(self.agent, key, minibatch)
        ahead, self.ahead = self.ahead, None
        if ahead is not None and ahead[:2] == (key, _versions(self._target())):
            job.q2_versions, job.q2_max = ahead[1:]
            job.q2_ready.set()
        self._jobs.put(job)
        return job

    def update(self, minibatch) -> None:
        """One update (``qLearnMinibatch`` after its ``sample``) on ``minibatch``, the
        transitions ``sample`` returned, at the learning rate already set."""
        a = self.agent
        key = (a.transitions.fills, a.transitions.buf_ind)
        job, self.job = self.job, None
        if job is not None and ((job.key, job.versions, job.r_max) != (key, _versions(a.network), a.r_max)
                                or job.q2_versions not in (None, _versions(self._target()))):
            job.abort()
            job = None
        if job is None:
            job = self._submit(key, minibatch)
        c1, c2, c3, l1, l2 = job.net.layers()
        with torch.no_grad():
            if not job.q2_ready.is_set():
                job.q2_max = self._q2_max(minibatch[3])
                job.q2_ready.set()
            job.acted.set()
            upcoming = self._next()
            if upcoming is not None and a.target_q:  # without a target network, these weights are changing
                next_key, (_, _, _, s2, _) = upcoming
                self.ahead = (next_key, _versions(a.target_network), self._q2_max(s2))
            _wait(job, job.g4_ready)
            job.grads[3] = _linear_grad(job.g4, job.saved[4])
            job.fc1_ready.set()
            _wait(job, job.g3_ready)
            job.grads[2] = _conv_grad(c3, job.g3, job.saved[2], weights=True)
            _wait(job, job.g2_ready)  # the worker has read conv3's weights: they may change now
            job.step(a, [(2, 0), (2, 1), (3, 1)])
            job.step(a, [(3, 0)], rows=slice(l1.out_features // 2, None))  # fc1's weights in halves
        _wait(job, job.done)
        job.keep_gradients(a)

    def _q2_max(self, s2) -> torch.Tensor:
        """max_a target(s2, a), float32 (N,), as ``get_q_update`` computes it."""
        a = self.agent
        return a._q_values(a._inference(self._target()), s2).float().max(1).values


def _wait(job: _Job, event: threading.Event) -> None:
    """Wait on the agent's thread for ``event``; raise the worker's error if it failed."""
    event.wait()
    if job.error is not None:
        raise job.error


def _close(jobs: queue.SimpleQueue, closed: threading.Event, worker: threading.Thread) -> None:
    """Stop the worker (its agent was collected, or the program ends) and wait for it: a
    daemon thread still inside torch when the interpreter exits aborts the process."""
    closed.set()
    jobs.put(None)
    if worker is not threading.current_thread():  # the worker's own allocation can trigger the collection
        worker.join()


def _work(jobs: queue.SimpleQueue, closed: threading.Event) -> None:
    """The worker thread: compute its share of each job until ``None`` comes."""
    torch.set_num_threads(1)
    while (job := jobs.get()) is not None:
        try:
            with torch.no_grad():
                _compute(job, closed)
        except _Closed:
            pass
        except BaseException as e:
            job.fail(e)
        job.done.set()


def _agent(job: _Job):
    agent = job.agent()
    if agent is None:
        raise _Closed
    return agent


def _await(job: _Job, event: threading.Event, closed: threading.Event) -> None:
    """Wait on the worker for ``event``; raise ``_Closed`` if the job was dropped or the
    agent is gone."""
    while not event.wait(_POLL):
        if closed.is_set():
            raise _Closed
    if job.aborted:
        raise _Closed


def _compute(job: _Job, closed: threading.Event) -> None:
    """The worker's share of ``job``: the online forward pass, the TD errors, the backward
    chain, conv1's and conv2's weight gradients, then RMSProp on conv1, conv2, fc2 and the
    first half of fc1's weights once the step's action is chosen."""
    s, a, r, _, term = job.minibatch
    agent = _agent(job)
    c1, c2, c3, l1, l2 = job.net.layers()
    q_all, job.saved = forward_saved(job.net, agent._to_input(s))
    x, a1, a2, a3, f, a4 = job.saved
    del agent  # not held while waiting
    _await(job, job.q2_ready, closed)
    targets = _agent(job).td_targets(q_all.float(), job.q2_max, a, r, term)[0].to(q_all.dtype)
    job.grads[4] = _linear_grad(targets, a4)
    job.g4 = _relu_grad(targets.mm(l2.weight), a4)
    job.g4_ready.set()
    job.g3 = _relu_grad(job.g4.mm(l1.weight).view(a3.shape), a3)
    job.g3_ready.set()
    g2 = _relu_grad(_conv_grad(c3, job.g3, a2, weights=False), a2)
    job.g2_ready.set()
    g1 = _relu_grad(_conv_grad(c2, g2, a1, weights=False), a1)
    job.grads[1] = _conv_grad(c2, g2, a1, weights=True)
    job.grads[0] = _conv_grad(c1, g1, x, weights=True)
    _await(job, job.acted, closed)
    _await(job, job.fc1_ready, closed)
    agent = _agent(job)
    job.step(agent, [(3, 0)], rows=slice(None, l1.out_features // 2))
    job.step(agent, [(i, k) for i in (0, 1, 4) for k in (0, 1)])
