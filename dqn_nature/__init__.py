"""dqn_nature: DeepMind's DQN 3.0 (Nature 2015) ported to PyTorch and ale-py."""
import importlib

__version__ = "0.1.0"

# Imported on first use (PEP 562), so that the commands' --help and usage errors do not wait
# seconds for torch.
_EXPORTS = {"GameEnvironment": "environment", "NeuralQLearner": "neural_q_learner",
            "TransitionTable": "transition_table", "load_history": "history"}
__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
