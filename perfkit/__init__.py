"""perfkit: profiling and A/B benchmarking for sequence-parallel diffusion transformers."""


def __getattr__(name: str):
    # The version is read from the installed metadata only when asked for: importlib.metadata costs
    # tens of milliseconds on every start of the command line otherwise.
    if name != "__version__":
        raise AttributeError(f"module 'perfkit' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version  # see above

    try:
        return version("perfkit")
    except PackageNotFoundError:  # running from a source tree that was not installed
        return "0.0.0+unknown"
