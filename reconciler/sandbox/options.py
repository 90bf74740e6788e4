"""The knobs a test or a benchmark turns on the sandbox: the trouble a real network
and a real gateway give (latency, a pool of workers, errors, dropped connections,
rate limits), and how long its tokens live."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SandboxOptions:
    """Test knobs. Shares are between 0 and 1; times are in seconds."""

    latency: float = 0.0  # added to every answer
    # Requests worked on at once (None: all); the others queue, so latency rises
    # with load as on a server with a fixed pool of workers.
    workers: int | None = None
    error_rate: float = 0.0  # share answered 503 with an envelope
    html_error_rate: float = 0.0  # share answered 502 with a gateway's HTML page
    drop_rate: float = 0.0  # share whose connection is closed with no answer
    slow_rate: float = 0.0  # share answered only after slow_seconds
    slow_seconds: float = 0.0
    rate_limit: float | None = None  # requests per second, then 429 + Retry-After
    # A gateway's limit, as nginx's `limit_req` (no burst) enforces it: a request is let
    # through only 1/gateway_rate seconds after the last one let through; the others are
    # answered gateway_status, with no envelope and no Retry-After unless asked for.
    gateway_rate: float | None = None
    gateway_status: int = 429
    gateway_retry_after: bool = False
    token_ttl: float = 86400.0
    # What the token answer says expires_in is, when it lies (0.001, 0): the token
    # still lives token_ttl. None: token_ttl, rounded up to whole seconds.
    token_expires_in: float | None = None
    seed: int | None = None
    # How a real platform treats what it is sent (issue 33): `normalize` stores e-mails
    # lower-cased and text with its spaces trimmed and collapsed; `ignore` names fields
    # a PATCH leaves as they were, answered 200 all the same; `etags` sends an ETag with
    # each invite and refuses a PATCH whose If-Match is not it (412); `patch_data` False
    # answers a PATCH with no `data` (the client verifies with a GET).
    normalize: bool = False
    ignore: tuple[str, ...] = ()
    etags: bool = False
    patch_data: bool = True
