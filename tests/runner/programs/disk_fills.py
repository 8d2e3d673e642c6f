"""perfkit's command line on a disk that fills up: after FULL_AFTER trial records (argv[1]), the next
write to trials.jsonl stores half of its line, then fails with ENOSPC, as a full disk does."""

import errno
import io
import sys

from perfkit.cli import main
from perfkit.rundata import rundir

full_after = int(sys.argv.pop(1))
appended = []


class FillingFile(io.FileIO):
    def write(self, data):
        if len(appended) >= full_after:
            super().write(bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        appended.append(len(data))
        return super().write(data)


def filling_open(path, mode="r", *args, **kw):
    if str(path).endswith("trials.jsonl") and "a" in mode:
        return FillingFile(path, "a+")
    return open(path, mode, *args, **kw)


rundir.open = filling_open  # only the run directory's appends see the full disk
main()
