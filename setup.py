"""perfkit's one compiled module, the protobuf wire loops of the xplane reader (perfkit/trace/_wire.pyx); the rest
of the build is pyproject.toml's."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(ext_modules=cythonize([Extension("perfkit.trace._wire", ["perfkit/trace/_wire.pyx"])]))
