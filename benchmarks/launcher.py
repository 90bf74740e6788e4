"""Run a command as the child of this small process and write the child's own figures.

Why not fork the CLI straight from the benchmark process: Linux carries a process's
peak RSS across exec, so a child forked (or vforked) from a process holding the
in-process sandbox's state would report that memory as its own peak. Forked from
this launcher (a few MB, no site-packages), the peak is the CLI's.

    python -S launcher.py RESULT_FILE COMMAND [ARG...]

RESULT_FILE receives JSON: started (time.monotonic() just before the fork), wall,
cpu (user + sys) and maxrss_kib of the command. The exit status is the command's.
"""

import json
import os
import sys
import time


def main() -> int:
    result_file, command = sys.argv[1], sys.argv[2:]
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(command[0], command)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    figures = {
        "started": started,
        "wall": time.monotonic() - started,
        "cpu": usage.ru_utime + usage.ru_stime,
        "maxrss_kib": usage.ru_maxrss,
    }
    with open(result_file, "w", encoding="utf-8") as out:
        json.dump(figures, out)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
