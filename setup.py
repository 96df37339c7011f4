from setuptools import find_packages, setup

setup(
    name="dqn-nature",
    version="0.1.0",
    description="DeepMind's DQN 3.0 (Nature 2015) ported to PyTorch and ale-py, behaviour for behaviour",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11",
    # The presets in the top-level args/ folder ship as the package dqn_nature.args, found with
    # importlib.resources; so does the reference data in dqn_nature/reference/.
    packages=[*find_packages(include=["dqn_nature", "dqn_nature.*"]), "dqn_nature.args", "dqn_nature.reference"],
    package_dir={"dqn_nature.args": "args"},
    package_data={"dqn_nature.args": ["*.toml"], "dqn_nature.reference": ["*.csv", "*.md"]},
    install_requires=[
        "torch>=2.1",
        "ale-py>=0.9",
        "numpy>=1.24",
        "click>=8.1",
        "h5py>=3.8",
        "tqdm>=4.60",
        "threadpoolctl>=3.1",
        "filelock>=3.0",
        "matplotlib>=3.7",
        "pillow>=9.5",
    ],
    extras_require={
        "test": ["pytest>=7", "pytest-xdist>=3.2", "opencv-python-headless>=4.8", "torchfile>=0.1",
                 "ray[client]>=2.9", "tensorboard>=2.12", "imageio>=2.28", "imageio-ffmpeg>=0.4",
                 "rliable>=1.2", "pandas<3"],
        "legacy": ["torchfile>=0.1"],
        # rliable 1.2 needs arch < 8, and arch 7 fails to import under pandas 3.
        "rliable": ["rliable>=1.2", "pandas<3"],
        "ray": ["ray[client]>=2.9"],
        "tensorboard": ["tensorboard>=2.12"],
    },
    entry_points={"console_scripts": [
        "dqn-train=dqn_nature.commands:train",
        "dqn-test=dqn_nature.commands:test",
        "dqn-convert=dqn_nature.commands:convert",
        "dqn-plot=dqn_nature.commands:plot",
        "dqn-report=dqn_nature.commands:report",
        "dqn-sweep=dqn_nature.commands:sweep",
        "dqn-slim=dqn_nature.commands:slim",
    ]},
)
