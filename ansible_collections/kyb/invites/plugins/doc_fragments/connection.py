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
      - >-
        The OAuth client secret. Never logged, never shown (it is a no-log value, and
        the library redacts it, in every encoding it is sent in, from what a server says).
        Give it from Ansible Vault (C(client_secret: "{{ vault_reconciler_secret }}")),
        never with the task's C(environment) keyword, whose values C(-vvv) shows in the
        C(EXEC) line.
      - Falls back to E(RECONCILER_CLIENT_SECRET); E(RECONCILER_CLIENT_SECRET_FILE) names a
        file holding it instead (both read on the host the task runs on). Never in
        O(config).
    type: str
  token_auth_method:
    description:
      - How the client authenticates at the token endpoint.
      - Falls back to E(RECONCILER_TOKEN_AUTH_METHOD).
    type: str
    choices: [client_secret_post, client_secret_basic]
  ca_path:
    description:
      - A PEM file of the CA certificates to trust, or a directory of them hashed with
        C(openssl rehash), for a platform whose certificate a private CA issued. Checked
        before any request.
      - Without it, the file or directory E(REQUESTS_CA_BUNDLE) (or E(CURL_CA_BUNDLE))
        names, else the bundle of the Python C(certifi) package.
    type: path
  validate_certs:
    description:
      - Whether the server's TLS certificate is checked. V(false) is refused for a host
        that is not a loopback host (as C(http://) is), since anyone on the path could
        then take the client secret; for a loopback host (a tunnel, a local gateway) it
        is allowed with a warning, and the task then sends through no proxy whatever
        E(HTTPS_PROXY) or E(ALL_PROXY) says (a proxy could answer with any certificate and
        read the client secret). Prefer O(ca_path).
    type: bool
    default: true
  timeout:
    description:
      - Seconds one request may take, whole answer included (more than 0, at most 3600).
      - Falls back to E(RECONCILER_TIMEOUT), then C(timeout) in O(config), then 30.
    type: float
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
