"""perfkit: profiling and A/B benchmarking for sequence-parallel diffusion transformers."""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("perfkit")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"
