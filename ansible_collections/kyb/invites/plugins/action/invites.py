# Copyright: invite-reconciler maintainers
# MIT License (see the repository's pyproject.toml)
"""Reads ``src:`` on the controller, then runs the module with the files' text.

Files are found and read with the library's own rules (``find_files``: recursive,
sorted, no symbolic link out of the repository or the directory given, no FIFO or
device; at most 256 MiB a file), so that the module reports a problem as
``path:line:column`` of the controller's file, as ``reconcile validate`` does.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

try:
    from reconciler.desired.files import find_files
    from reconciler.desired.state import MAX_FILE_BYTES
    from reconciler.files import TooLarge, read_regular
    from reconciler.yamlload.source import decode_source
except ImportError:
    HAS_LIBRARY = False
else:
    HAS_LIBRARY = True

MODULE = "kyb.invites.invites"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        src = args.get("src")
        if src is not None:
            if not HAS_LIBRARY:
                result.update(
                    failed=True,
                    msg="src: is read on the controller, which needs the invite-reconciler "
                    "library in the Python running Ansible (pip install . from a checkout)",
                )
                return result
            paths = [src] if isinstance(src, str) else list(src)
            try:
                sources, problems = self._read(paths)
            except AnsibleError as error:
                result.update(failed=True, msg=str(error))
                return result
            if problems:
                result.update(failed=True, msg="\n".join(str(p) for p in problems))
                return result
            args["src"] = [dict(path=path, text=text) for path, text in sources]
        module_result = self._execute_module(
            module_name=MODULE, module_args=args, task_vars=task_vars
        )
        _shorten_invocation(module_result)
        result.update(module_result)
        return result

    def _read(self, paths):
        """(path shown, text) of each file found under ``paths``, and the problems."""
        found, problems = find_files([self._find_needle("files", p) for p in paths])
        base = self._loader.get_basedir()
        sources = []
        for file in found:
            shown = _shown_path(str(file), base)
            try:
                data = read_regular(file, MAX_FILE_BYTES)
            except OSError as error:
                raise AnsibleError(f"{shown}: cannot read: {error.strerror}") from None
            except TooLarge:
                raise AnsibleError(
                    f"{shown}: larger than {MAX_FILE_BYTES // 2**20} MiB; "
                    "split it into several files"
                ) from None
            text, file_problems = decode_source(data, shown)
            problems.extend(file_problems)
            if text is not None:
                sources.append((shown, text))
        return sources, problems


def _shown_path(path, base):
    """A file under the playbook's directory by its path from there, as a reviewer knows it."""
    relative = os.path.relpath(path, base)
    return path if relative.startswith(os.pardir) else relative


def _shorten_invocation(module_result):
    """The files' text is not echoed back with -v: their paths stand for them."""
    args = module_result.get("invocation", {}).get("module_args")
    if isinstance(args, dict) and isinstance(args.get("src"), list):
        args["src"] = [read.get("path") if isinstance(read, dict) else read for read in args["src"]]
