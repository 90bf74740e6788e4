"""x: what one GET of an invite costs the client's CPU, layer by layer (context).

The same GET, repeated on one keep-alive connection to the sandbox, through each
layer of the stack the CLI uses: ``ApiClient.get_invite`` (pacing, deadline,
retry policy, answer and value checks) over a ``requests`` session over a
``urllib3`` pool over ``http.client``. Each layer parses the JSON answer, so the
differences are the layers' own cost. The layers run in a child process (this
module as a script) and time themselves with ``time.process_time``: every thread
of the client counts (ApiClient's deadline watchdog too), the sandbox, serving
from this process, does not.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import requests
import urllib3
from support.estate import SEED
from support.helpers import REPO, clean_env

from benchmarks.measure import RunFailed
from benchmarks.scenarios.common import Context, dataset
from benchmarks.targets import Row
from reconciler.api.client import ApiClient
from reconciler.sandbox import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, Sandbox, SandboxOptions
from reconciler.settings.config import Settings
from reconciler.settings.contract import INVITE_PATH

_WARM_UP = 20  # GETs per layer before timing: connection made, caches filled


def run(context: Context) -> list[Row]:
    data = dataset(context, "http-layer", 10, changed=0)
    invite_id = data.server[0]["id"]
    gets = context.sizes.http_gets
    with Sandbox(data.server, options=SandboxOptions(seed=SEED)) as sandbox:
        costs = _measure_in_child(sandbox.url, invite_id, gets)
    name = f"x GET cost by layer, {gets:,} GETs each"
    rows = [Row(name, f"{layer} CPU per GET", ms, "ms") for layer, ms in costs.items()]
    floor = costs.pop("http.client")
    ratios = ", ".join(f"{layer} {ms / floor:.1f}×" for layer, ms in costs.items())
    context.notes.append(f"{name}: CPU per GET against http.client's: {ratios}")
    return rows


def _measure_in_child(base_url: str, invite_id: str, gets: int) -> dict[str, float]:
    script = [sys.executable, "-m", "benchmarks.scenarios.http_layer"]
    done = subprocess.run(
        [*script, base_url, invite_id, str(gets)],
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RunFailed(f"http-layer: the measuring process failed: {done.stderr[-500:]}")
    costs: dict[str, float] = json.loads(done.stdout)
    return costs


def _layers(base_url: str, invite_id: str) -> dict[str, Callable[[], object]]:
    settings = Settings(
        base_url=base_url, client_id=SANDBOX_CLIENT_ID, client_secret=SANDBOX_CLIENT_SECRET
    )
    client = ApiClient(settings)
    path = INVITE_PATH.replace("{inviteId}", invite_id)
    headers = {"Authorization": f"Bearer {_token(base_url, settings.contract.scope)}"}
    session = requests.Session()
    where = urlsplit(base_url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    pool = urllib3.HTTPConnectionPool(host, port, maxsize=1)
    connection = http.client.HTTPConnection(host, port)

    def bare() -> object:
        connection.request("GET", path, headers=headers)
        return json.loads(connection.getresponse().read())

    return {
        "ApiClient.get_invite": lambda: client.get_invite(invite_id),
        "requests.Session.get": lambda: session.get(base_url + path, headers=headers).json(),
        "urllib3 pool.request": lambda: json.loads(pool.request("GET", path, headers=headers).data),
        "http.client": bare,
    }


def _token(base_url: str, scope: str) -> str:
    form = {
        "grant_type": "client_credentials",
        "client_id": SANDBOX_CLIENT_ID,
        "client_secret": SANDBOX_CLIENT_SECRET,
        "scope": scope,
    }
    answer = requests.post(base_url + "/oauth/token", data=form, timeout=10).json()
    token: str = answer["data"]["access_token"]
    return token


def _cpu_per_call(get: Callable[[], object], calls: int) -> float:
    """Milliseconds of this process's CPU per call, after a warm-up."""
    for _ in range(_WARM_UP):
        get()
    started = time.process_time()
    for _ in range(calls):
        get()
    return (time.process_time() - started) / calls * 1000


if __name__ == "__main__":  # the child: BASE_URL INVITE_ID GETS -> {layer: ms per GET}
    url, invite, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    measured = {name: _cpu_per_call(get, count) for name, get in _layers(url, invite).items()}
    print(json.dumps(measured))
