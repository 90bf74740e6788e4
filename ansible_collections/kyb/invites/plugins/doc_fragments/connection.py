# Copyright: invite-reconciler maintainers
# MIT License (see the repository's pyproject.toml)
"""The platform connection options every module of this collection takes."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  base_url:
    description:
      - The platform API's base URL, C(https://); C(http://) only for a loopback host.
      - Falls back to E(RECONCILER_BASE_URL), then to C(base_url) in O(config).
    type: str
  client_id:
    description:
      - The OAuth client id.
      - Falls back to E(RECONCILER_CLIENT_ID), then to C(client_id) in O(config).
    type: str
  client_secret:
    description:
      - The OAuth client secret. Never logged, never shown (it is a no-log value, and
        the library redacts it, in every encoding it is sent in, from what a server says).
      - Falls back to E(RECONCILER_CLIENT_SECRET); E(RECONCILER_CLIENT_SECRET_FILE) names a
        file holding it instead. Never in O(config).
    type: str
  token_auth_method:
    description:
      - How the client authenticates at the token endpoint.
      - Falls back to E(RECONCILER_TOKEN_AUTH_METHOD).
    type: str
    choices: [client_secret_post, client_secret_basic]
  config:
    description:
      - A C(reconciler.yaml) to read settings from, as C(reconcile --config FILE) does
        (on the host the task runs on). Without it, C(reconciler.yaml) in the task's
        working directory is read if there is one.
      - Every other E(RECONCILER_*) variable of the task's environment is read too, with the
        same checks as the C(reconcile) command.
    type: path
requirements:
  - invite-reconciler >= 0.1.0 (the library, on the host the task runs on)
notes:
  - Settings are loaded by the library itself (options, then environment, then
    O(config), then defaults), so every check of the C(reconcile) command holds.
  - Every access token obtained during the task is added to the module's no-log values,
    besides being redacted by the library from anything a server says.
"""
