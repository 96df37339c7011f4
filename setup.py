from setuptools import find_packages, setup

setup(
    name="dqn-nature",
    version="0.1.0",
    description="DeepMind's DQN 3.0 (Nature 2015) ported to PyTorch and ale-py, behaviour for behaviour",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["dqn_nature", "dqn_nature.*"]),
    install_requires=[
        "torch>=2.1",
        "ale-py>=0.9",
        "numpy>=1.24",
        "click>=8.1",
        "h5py>=3.8",
        "tqdm>=4.60",
        "threadpoolctl>=3.1",
        "matplotlib>=3.7",
        "imageio>=2.28",
        "pillow>=9.5",
    ],
    extras_require={
        "test": ["pytest>=7", "opencv-python-headless>=4.8", "torchfile>=0.1", "ray[client]>=2.9"],
        "legacy": ["torchfile>=0.1"],
        "ray": ["ray[client]>=2.9"],
        "tensorboard": ["tensorboard>=2.12"],
    },
    entry_points={"console_scripts": [
        "dqn-train=dqn_nature.cli:main",
        "dqn-test=dqn_nature.test_agent:main",
        "dqn-convert=dqn_nature.convert:main",
        "dqn-plot=dqn_nature.plot:main",
        "dqn-report=dqn_nature.report:main",
        "dqn-sweep=dqn_nature.sweep:main",
        "dqn-slim=dqn_nature.slim:main",
    ]},
)
