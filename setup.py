"""Packaging of latentcode; the metadata and dependencies live in setup.cfg.

This file adds one thing setup.cfg cannot say: the shipped checkpoints. The repository keeps them in
`checkpoints/<name>/` (scripts, docs and trainings use that path), and the wheel carries them as the data package
`latentcode._checkpoints`, mapped from that folder at build time. A shipped checkpoint is a folder holding
`shipped.json`; `checkpoints/in-progress/` (resume state of unfinished trainings) has none and stays out.
"""

from pathlib import Path

from setuptools import find_packages, setup

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"


def shipped_files() -> list[str]:
    """Every file of every shipped checkpoint, relative to `checkpoints/`."""
    if not CHECKPOINTS.is_dir():
        return []
    return sorted(
        f"{folder.name}/{item.name}"
        for folder in CHECKPOINTS.iterdir()
        if (folder / "shipped.json").is_file() and (folder / "config.json").is_file()
        for item in folder.iterdir()
        if item.is_file()
    )


setup(
    packages=[*find_packages(include=["latentcode", "latentcode.*", "probes", "probes.*"]), "latentcode._checkpoints"],
    package_dir={"latentcode._checkpoints": "checkpoints"},
    package_data={"latentcode._checkpoints": shipped_files(), "latentcode.explore": ["*.js"]},
    exclude_package_data={"latentcode._checkpoints": ["in-progress/*", "in-progress/**/*"]},
    include_package_data=False,
)
