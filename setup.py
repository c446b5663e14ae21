"""The wheel carries the images' build files (docker/ and requirements.txt) inside its package,
as harness/image/, so a project that installs cuda-matrix builds the same images (with the same
content tags) as this repository; and this repository's matrix.yaml as harness/starter/, which
`cuda-matrix init` writes into a new project. Everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

IMAGE_FILES = ("docker/Dockerfile", "docker/entrypoint.sh", "requirements.txt")
STARTER_FILES = ("matrix.yaml",)  # what `cuda-matrix init` writes besides its example kernel


class BuildWithImageFiles(build_py):
    def run(self) -> None:
        super().run()
        for folder, files in (("image", IMAGE_FILES), ("starter", STARTER_FILES)):
            for relative in files:
                copy = Path(self.build_lib) / "harness" / folder / relative
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(Path(__file__).parent / relative, copy)


setup(cmdclass={"build_py": BuildWithImageFiles})
