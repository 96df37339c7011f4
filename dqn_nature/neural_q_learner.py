"""The DQN agent (ports ``dqn/NeuralQLearner.lua``).

Action indices are 0-based positions in the action set (Lua index - 1).
"""
from __future__ import annotations

import contextlib
import copy
import json

import numpy as np
import torch

from .config import FIELDS, Config, lua_name
from .convnet import INPUT_SIDE, convnet_atari3
from .cuda_graph import CudaGraph
from .optim import DeepMindRMSProp
from .preprocess import preprocess
from .transition_table import TransitionTable

# States per convolution pass of a large batch without gradient: the default minibatch's size,
# so the same convolution shapes as an update's, and a lower peak memory than larger chunks.
TRUNK_CHUNK = 32


class NeuralQLearner:
    """Deep Q-learning agent of the Nature paper (``NeuralQLearner``).

    Args:
        actions: the game's action set (ALE ids); its length is the network's output size.
        **agent_params: NeuralQLearner parameters under their Lua names (``lr``, ``bufferSize``...) or
            Python ones (``buffer_size``), defaulting to the paper's run_gpu values (``config.Config``);
            ``network`` must be ``convnet_atari3``; plus ``gpu`` (CUDA device, -1 for the CPU),
            ``precision`` (``"fp32"``; ``"bf16"``: forward and backward passes under bfloat16 autocast,
            weights and RMSProp in float32; ``"tf32"``: TF32 convolutions and matrix products on CUDA,
            fp32 on the CPU) and ``seed`` (of the agent's random generator, which also drives replay
            sampling, as the Lua's global RNG).

    Raises:
        ValueError: unknown parameter, or a ``network``/``preproc`` other than DQN 3.0's.
    """

    def __init__(self, actions, **agent_params):
        gpu = int(agent_params.pop("gpu", -1))
        precision = agent_params.pop("precision", "fp32")
        seed = agent_params.pop("seed", None)
        if agent_params.pop("network", "convnet_atari3") != "convnet_atari3":
            raise ValueError("network must be 'convnet_atari3' (load pretrained weights into agent.network)")
        p = Config().agent_params()  # run_gpu's agent_params, under their Lua names
        python_names = {f.name: lua_name(f) for f in FIELDS if f.metadata["agent"]}
        for key, value in agent_params.items():
            key = python_names.get(key, key)
            if key not in p:
                raise ValueError(f"unknown agent parameter {key!r}")
            p[key] = value
        if p["preproc"] != "net_downsample_2x_full_y":
            raise ValueError(f"preproc must be 'net_downsample_2x_full_y', not {p['preproc']!r}")
        self.actions = list(actions)
        self.n_actions = len(self.actions)
        self.lr_start = self.lr = float(p["lr"])
        self.lr_end = self.lr_start if p["lr_end"] is None else float(p["lr_end"])
        self.lr_endt = p["lr_endt"]
        self.ep_start = self.ep = float(p["ep"])
        self.ep_end, self.ep_endt = float(p["ep_end"]), p["ep_endt"]
        self.discount, self.hist_len = float(p["discount"]), int(p["hist_len"])
        self.learn_start, self.update_freq, self.n_replay = p["learn_start"], p["update_freq"], p["n_replay"]
        self.minibatch_size, self.valid_size = p["minibatch_size"], p["valid_size"]
        self.rescale_r, self.clip_delta, self.target_q = bool(p["rescale_r"]), p["clip_delta"], p["target_q"]
        self.min_reward, self.max_reward = p["min_reward"], p["max_reward"]
        self.state_dim = p["state_dim"]

        self.device = torch.device("cpu" if gpu < 0 else f"cuda:{gpu}")
        self.precision = precision
        if self.device.type == "cuda":
            # PyTorch lets cuDNN convolutions run in TF32 unless told not to; DQN 3.0 computed in float32.
            torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        self.rng = np.random.default_rng(None if seed is None else (seed, 1))
        self.num_steps = 0
        self.last_state = self.last_action = None
        self.last_terminal = False
        self.v_avg = self.tderr_avg = None
        self.q_max = 1  # never updated in DQN 3.0
        self.r_max = 1
        self.bestq = 0.0
        self.valid = None  # the validation transitions (s, a, r, s2, term)
        # num_steps at which a checkpoint without replay memory was resumed: learning waits
        # learn_start more steps while the empty memory refills, as at the start of a run.
        self.replay_restart = 0

        # Channels-last: the layout in which these convolutions run fastest on the CPU; the only one used.
        self.network = convnet_atari3(self.n_actions, self.hist_len, p["ncols"]).to(
            self.device, memory_format=torch.channels_last)
        self.target_network = copy.deepcopy(self.network).requires_grad_(False)
        # Whether an update may have changed the network since the last target copy. True at first, so
        # that weights loaded into agent.network before step 1 reach the target, as DQN 3.0's copy does.
        self._target_stale = True
        self.optimizer = DeepMindRMSProp(self.network.parameters(), lr=self.lr, wc=float(p["wc"]))
        self.transitions = TransitionTable(self.state_dim, self.n_actions, self.hist_len,
                                           p["replay_memory"], p["bufferSize"], rng=self.rng)
        if self.device.type == "cuda":
            self._forward_graph = CudaGraph(self._greedy_q, self.device)
            self._update_graph = CudaGraph(self._learn, self.device)

    # -- schedules -------------------------------------------------------------------
    def train_epsilon(self) -> float:
        """Exploration rate of training at ``num_steps``: linear from ``ep`` to ``ep_end``
        over ``ep_endt`` steps after ``learn_start`` (the schedule in ``eGreedy``)."""
        t = max(0, self.num_steps - self.learn_start)
        return self.ep_end + max(0.0, (self.ep_start - self.ep_end) * (self.ep_endt - t) / self.ep_endt)

    def learning_rate(self) -> float:
        """Learning rate at ``num_steps``: linear from ``lr`` to ``lr_end`` over ``lr_endt`` steps
        after ``learn_start``, then ``lr_end`` (the annealing in ``qLearnMinibatch``)."""
        t = max(0, self.num_steps - self.learn_start)
        lr = (self.lr_start - self.lr_end) * (self.lr_endt - t) / self.lr_endt + self.lr_end
        return max(lr, self.lr_end)

    # -- acting ------------------------------------------------------------------------
    def _autocast(self):
        """The context of every forward pass: bfloat16 autocast with ``--precision bf16``, else
        one that does nothing. No Lua counterpart."""
        if self.precision != "bf16":
            return contextlib.nullcontext()
        # A cast weight cached across calls would be stale inside a replayed CUDA graph.
        return torch.autocast(self.device.type, dtype=torch.bfloat16, cache_enabled=self.device.type == "cpu")

    def _to_input(self, frames) -> torch.Tensor:
        """uint8 (N, hist_len, state_dim) stored frames (which become k / 255) or float32 ones
        in [0, 1] (NumPy arrays, or tensors on the device) -> float32 (N, C, 84, 84)
        channels-last tensor on the device."""
        x = frames if isinstance(frames, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(frames))
        x = x.to(self.device).reshape(len(x), -1, INPUT_SIDE, INPUT_SIDE)
        # Reordered and converted in one copy per channel: faster than
        # .contiguous(memory_format=torch.channels_last), and no second float copy.
        nhwc = torch.empty(x.shape[:1] + x.shape[2:] + x.shape[1:2], dtype=torch.float32, device=x.device)
        for c in range(x.shape[1]):
            nhwc[..., c] = x[:, c]
        return nhwc.permute(0, 3, 1, 2).div_(255) if x.dtype == torch.uint8 else nhwc.permute(0, 3, 1, 2)

    def _greedy_q(self, states) -> torch.Tensor:
        """Q-values float32 (N, n_actions) of uint8 or float32 states (N, hist_len, state_dim)."""
        with torch.inference_mode(), self._autocast():
            return self.network(self._to_input(states)).float()

    def greedy(self, state: np.ndarray) -> int:
        """The action index of max Q(state, .), ``state`` float32 (hist_len, state_dim) in [0, 1], ties
        broken uniformly at random; the max is kept in ``bestq`` (``greedy``)."""
        states = state[None]
        q = (self._forward_graph(None, states) if self.device.type == "cuda" else self._greedy_q(states))
        # The Lua loop on a Python list: fewer calls than NumPy's, slow right after the forward pass
        # has flushed the caches. A NaN never wins or ties; a NaN first value keeps the first action.
        q = q[0].tolist()
        best, self.bestq = [0], q[0]
        for a in range(1, len(q)):
            if q[a] > self.bestq:
                best, self.bestq = [a], q[a]
            elif q[a] == self.bestq:
                best.append(a)
        return best[self.rng.integers(len(best))]

    def e_greedy(self, state: np.ndarray, testing_ep: float | None = None) -> int:
        """A random action index with probability ``ep`` (``testing_ep`` when given, else
        ``train_epsilon()``; kept in ``self.ep``), else ``greedy(state)`` (``eGreedy``)."""
        self.ep = self.train_epsilon() if testing_ep is None else testing_ep
        if self.rng.random() < self.ep:
            return int(self.rng.integers(self.n_actions))
        return self.greedy(state)

    def perceive(self, reward: float, rawstate: np.ndarray, terminal: bool,
                 testing: bool = False, testing_ep: float | None = None) -> int | None:
        """Observe a step's outcome, store and learn, and return the next action index (0-based), or
        None when ``terminal`` (``perceive``).

        Args:
            reward: reward of the last agent step (unclipped).
            rawstate: pooled screen, float32 (210, 160, 3) in [0, 1].
            terminal: whether that screen ends an episode.
            testing: evaluation mode: no storing, learning or step counting.
            testing_ep: exploration rate to use instead of the training schedule.
        """
        state = preprocess(rawstate)
        reward = min(reward, self.max_reward) if self.max_reward is not None else reward
        reward = max(reward, self.min_reward) if self.min_reward is not None else reward
        if self.rescale_r:
            self.r_max = max(self.r_max, reward)
        self.transitions.add_recent_state(state, terminal)
        if self.last_state is not None and not testing:
            self.transitions.add(self.last_state, self.last_action, reward, self.last_terminal)
        if self.num_steps == self.learn_start + self.replay_restart + 1 and not testing and self.valid is None:
            self.sample_validation_data()
        action = 0
        if not terminal:
            action = self.e_greedy(self.transitions.get_recent(), testing_ep)
        self.transitions.add_recent_action(action)
        if (self.num_steps > self.learn_start + self.replay_restart and not testing
                and self.num_steps % self.update_freq == 0):
            for _ in range(self.n_replay):
                self.q_learn_minibatch()
        if not testing:
            self.num_steps += 1
        self.last_state, self.last_action, self.last_terminal = state, action, terminal
        if self.target_q and self.num_steps % self.target_q == 1 and self._target_stale:
            self.target_network.load_state_dict(self.network.state_dict())
            self._target_stale = False
        return None if terminal else action

    # -- learning ----------------------------------------------------------------------
    def get_q_update(self, s, a, r, s2, term, need_grad: bool = False):
        """TD errors of a batch of transitions (``getQUpdate``).

        Args:
            s, s2: uint8 (N, hist_len, state_dim) or float32 in [0, 1].
            a: int64 (N,) action indices; r: float (N,) clipped rewards;
            term: float (N,), 1 where s2 is terminal.
            need_grad: keep the graph of Q(s, .) for ``backward``.

        Returns:
            (targets float32 (N, n_actions) holding delta at the taken action and 0 elsewhere,
            delta float32 (N,) = r (/ r_max with rescale_r) + discount (1 - term) max_a
            target(s2, a) - Q(s, a), clipped to ±clip_delta unless it is 0, q2_max float32 (N,),
            Q(s, .) float32 (N, n_actions)), torch tensors on the agent's device.
        """
        target_net = self.target_network if self.target_q else self.network
        with torch.no_grad(), self._autocast():
            q2_max = self._q_values(target_net, s2).float().max(1).values
        with torch.set_grad_enabled(need_grad), self._autocast():
            q_all = (self.network(self._to_input(s)) if need_grad else self._q_values(self.network, s)).float()
        a = torch.as_tensor(a, device=self.device)
        r = torch.as_tensor(r, dtype=torch.float32, device=self.device)
        term = torch.as_tensor(term, dtype=torch.float32, device=self.device)
        q = q_all.detach().gather(1, a[:, None])[:, 0]
        delta = r / self.r_max if self.rescale_r else r
        delta = delta + self.discount * (1 - term) * q2_max - q
        if self.clip_delta:
            delta = delta.clamp(-self.clip_delta, self.clip_delta)
        targets = torch.zeros_like(q_all).scatter_(1, a[:, None], delta[:, None])
        return targets, delta, q2_max, q_all

    def _q_values(self, network, frames) -> torch.Tensor:
        """Q-values of a large batch without gradient, the convolutional trunk in chunks of ``TRUNK_CHUNK``
        states (identical results: each row depends on its own input only), so that the validation
        set's activations never exist all at once."""
        features = [network.features(self._to_input(frames[i:i + TRUNK_CHUNK]))
                    for i in range(0, len(frames), TRUNK_CHUNK)]
        return network.head(torch.cat(features))

    def q_learn_minibatch(self) -> None:
        """One minibatch update (``qLearnMinibatch``): ``dw = sum_i delta_i dQ(s_i, a_i)/dw``
        (summed, not averaged) applied by ``DeepMindRMSProp`` at the annealed learning rate.
        On CUDA it replays a ``CudaGraph`` of ``_learn``, keyed by the learning rate and r_max."""
        minibatch = self.transitions.sample(self.minibatch_size)
        self.lr = self.learning_rate()
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr
        if self.device.type == "cuda":
            self._update_graph((self.lr, self.r_max), *minibatch)
        else:
            self._learn(*minibatch)
        self._target_stale = True

    def _learn(self, s, a, r, s2, term) -> None:
        """The update proper on a minibatch as ``get_q_update`` takes it (NumPy arrays, or
        CUDA tensors inside a ``CudaGraph``), at the learning rate already set."""
        targets, _, _, q_all = self.get_q_update(s, a, r, s2, term, need_grad=True)
        self.optimizer.zero_grad()
        q_all.backward(targets)  # the Lua's network:backward(s, targets)
        self.optimizer.step()

    # -- validation ----------------------------------------------------------------------
    def sample_validation_data(self) -> None:
        """Draw ``valid_size`` transitions kept for the whole run as ``valid``, copies of
        ``TransitionTable.sample``'s (s, a, r, s2, term) (``sample_validation_data``)."""
        self.valid = tuple(np.array(x) for x in self.transitions.sample(self.valid_size))

    def compute_validation_statistics(self) -> None:
        """Set ``v_avg`` (q_max * mean max_a target(s2, a)) and ``tderr_avg`` (mean |delta|)
        on the validation set (``compute_validation_statistics``); no-op before it exists."""
        if self.valid is None:
            return
        _, delta, q2_max, _ = self.get_q_update(*self.valid)
        self.v_avg = self.q_max * float(q2_max.double().mean())
        self.tderr_avg = float(delta.double().abs().mean())

    def report(self) -> str:
        """Mean and maximum absolute value of each layer's weights and of their last gradients,
        printed as ``report`` prints them (``get_weight_norms``, ``get_grad_norms`` of
        ``nnutils.lua``: four lines, each after its heading; numbers as Lua's ``%.14g``)."""
        layers = self.network.layers()
        names = [f"nn.{'Linear' if isinstance(layer, torch.nn.Linear) else 'SpatialConvolution'}" for layer in layers]
        grads = [layer.weight.grad for layer in layers]
        lines = []
        for heading, tensors in (("Weight", [layer.weight for layer in layers]), ("Weight grad", grads)):
            absolute = [torch.zeros(1) if t is None else t.detach().double().abs() for t in tensors]
            for stat, function in (("norms", torch.mean), ("max", torch.max)):
                modules = " ".join(f"{name}: {float(function(t)):.14g}" for name, t in zip(names, absolute))
                lines += [f"{heading} {stat}:", f"nn.Sequential: [{modules}]"]
        return "\n".join(lines)

    # -- checkpoints ----------------------------------------------------------------------
    _SCALARS = ("num_steps", "ep", "lr", "r_max", "v_avg", "tderr_avg", "bestq", "last_action",
                "last_terminal", "_target_stale", "replay_restart")
    _TABLE = ("recent_s", "recent_t", "recent_a", "buf_s", "buf_s2", "buf_a", "buf_r", "buf_term")

    def get_state(self) -> dict:
        """Everything but the replay memory's contents needed to continue exactly (counters, schedules,
        networks, RMSProp buffers, random generator, last state, validation set, recent queue, prefetch
        buffer), None values omitted. No Lua counterpart (DQN 3.0 could not resume).

        As in ``state_dict()``, tensors and arrays are the agent's own, not copies: write the state out
        (``checkpoint.save_checkpoint``) or ``copy.deepcopy`` it before the agent goes on, else it
        follows the agent's weights while its counters stay behind."""
        t = self.transitions
        state = {k: getattr(self, k) for k in self._SCALARS if getattr(self, k) is not None}
        state.update(
            rng=json.dumps(self.rng.bit_generator.state), last_state=self.last_state,
            network=self.network.state_dict(), target_network=self.target_network.state_dict(),
            optimizer={str(i): dict(self.optimizer.state[p]) for i, p in enumerate(self.network.parameters())
                       if self.optimizer.state[p]},
            valid=None if self.valid is None else dict(zip(("s", "a", "r", "s2", "term"), self.valid)),
            transitions=dict({k: getattr(t, k) for k in self._TABLE}, num_entries=t.num_entries,
                             insert_index=t.insert_index, buf_ind=-1 if t.buf_ind is None else t.buf_ind))
        return state

    def set_state(self, state: dict, replay_restored: bool) -> None:
        """Continue from ``get_state()``. Without ``replay_restored`` the replay memory starts
        empty and learning resumes after ``learn_start`` more steps. No Lua counterpart."""
        for k in self._SCALARS:
            setattr(self, k, state.get(k))
        self.last_terminal, self._target_stale = bool(self.last_terminal), bool(self._target_stale)
        self.replay_restart = self.replay_restart or 0
        self.rng.bit_generator.state = json.loads(state["rng"])
        self.last_state = state.get("last_state")
        self.network.load_state_dict({k: torch.as_tensor(v) for k, v in state["network"].items()})
        self.target_network.load_state_dict({k: torch.as_tensor(v) for k, v in state["target_network"].items()})
        for i, p in enumerate(self.network.parameters()):
            buffers = state["optimizer"].get(str(i))
            if buffers:
                # empty_like keeps the parameter's device and channels-last layout, as at the start
                self.optimizer.state[p] = {k: torch.empty_like(p).copy_(torch.as_tensor(v)) for k, v in buffers.items()}
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr
        valid = state.get("valid")
        self.valid = None if valid is None else tuple(valid[k] for k in ("s", "a", "r", "s2", "term"))
        t, ts = self.transitions, state["transitions"]
        for k in self._TABLE:
            getattr(t, k)[:] = ts[k]
        if replay_restored:
            t.num_entries, t.insert_index = int(ts["num_entries"]), int(ts["insert_index"])
            t.buf_ind = None if ts["buf_ind"] < 0 else int(ts["buf_ind"])
        else:
            t.reset()
            t.buf_ind = None
            self.replay_restart = self.num_steps
        if self.device.type == "cuda":
            self._update_graph.reset()  # the optimiser's buffers are new tensors

