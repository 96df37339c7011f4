"""The presets of dqn-train (``--args NAME``): TOML files of options, shipped as the package
``dqn_nature.args`` and found with ``importlib.resources``."""
