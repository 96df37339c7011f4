"""dqn_nature: DeepMind's DQN 3.0 (Nature 2015) ported to PyTorch and ale-py."""
__version__ = "0.1.0"

from .environment import GameEnvironment  # noqa: E402
from .history import load_history  # noqa: E402
from .neural_q_learner import NeuralQLearner  # noqa: E402
from .transition_table import TransitionTable  # noqa: E402

__all__ = ["GameEnvironment", "NeuralQLearner", "TransitionTable", "load_history", "__version__"]
