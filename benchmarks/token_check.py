"""What checking a token adds to a request, in Corral and in upstream's keystonemiddleware.

Corral (in-process, an embedded SQLite identity database under a temporary
directory, keys loaded):

* ``authenticate``: the ``corral`` strategy's whole per-request work on a
  Falcon request (read ``X-Auth-Token``, look the token up among the ones
  already decrypted, check expiry and the revocation events, fill the
  request context), against ``noauth2``'s on the same request;
* the first sight of a token (Fernet decryption, no cache);
* one read of the revocation events (what a process pays at most once every
  ``[token] revocation_check_interval`` seconds, 0.5 by default).

Timing a whole request through an application instead drowns a few
microseconds in a millisecond of routing, policy and database work (and,
on a shared machine, in noise): the step is timed on its own.

Upstream (``--upstream-venv``, a virtualenv with keystone and
keystonemiddleware, and a Keystone answering at ``--keystone-url``):
keystonemiddleware's ``auth_token`` in front of an empty WSGI application,
with a token it has validated before (its in-process cache) and with a new
token (validation by Keystone over HTTP).

    python benchmarks/token_check.py
    python benchmarks/token_check.py --upstream-venv /work/venvs/keystone --keystone-url http://127.0.0.1:5000 \\
        --keystone-password secret
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import falcon.testing  # noqa: E402

from corral.core import auth as core_auth  # noqa: E402
from corral.core import config, migrations  # noqa: E402
from corral.core.db import create_engine  # noqa: E402
from corral.core.http import Request  # noqa: E402


def per_call_us(function: Callable[[], Any], calls: int, rounds: int = 9) -> float:
    """The best of ``rounds`` mean times of one call, in microseconds.

    The best round is the one least disturbed by other work on a shared
    machine; the median is printed too where it says more.
    """
    results = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        results.append((time.perf_counter() - start) / calls * 1e6)
    return min(results)


def corral_figures(calls: int) -> dict[str, float]:
    from corral.identity import bootstrap, keys
    from corral.identity import conf as identity_conf
    from corral.identity.api.app import build_state
    from corral.identity.auth import make_authenticator
    from corral.identity.db.schema import TREE
    from corral.identity.domain import tokens
    from corral.identity.domain.auth_request import NamedRef, AuthRequest
    from corral.identity.issuing import TokenIssuer
    from corral.identity.validator import TokenValidator, make_validator

    state_dir = tempfile.mkdtemp(prefix="corral-token-bench-")
    conf = config.make_conf(state_path=state_dir, overrides={"identity": {"password_hash_rounds": 4}})
    engine = create_engine(identity_conf.database_url(conf))
    migrations.upgrade(engine, TREE)
    engine.dispose()
    keys.setup(identity_conf.key_repository(conf))
    state = build_state(conf)
    bootstrap.bootstrap(state.db, state.hasher, password="pw")
    issuer = TokenIssuer(conf, state.db, state.hasher, state.validator)
    request = AuthRequest(methods=("password",), user=NamedRef(name="admin", domain_id="default"), password="pw",
                          scope="project", scope_ref=NamedRef(name="admin", domain_id="default"))
    token = tokens.encode(state.keys.fernet(), issuer.issue(request))

    figures: dict[str, float] = {}
    authenticate = make_authenticator(conf)
    environ = falcon.testing.create_environ(path="/resource_providers", headers={"X-Auth-Token": token})
    noauth_environ = falcon.testing.create_environ(path="/resource_providers", headers={"X-Auth-Token": "admin"})
    # One request object each, checked again and again: the check alone.
    corral_request, noauth_request = Request(environ), Request(noauth_environ)
    authenticate(corral_request)
    figures["corral: check a token seen before (whole authenticate step)"] = per_call_us(
        lambda: authenticate(corral_request), calls)
    figures["noauth2: the same step"] = per_call_us(lambda: core_auth.authenticate_noauth2(noauth_request), calls)

    checked = make_validator(conf)
    uncached = TokenValidator(checked.keys, checked.revocations, cache_size=0)  # every call decrypts
    uncached.validate(token)
    figures["corral: first sight of a token (decryption + checks)"] = per_call_us(
        lambda: uncached.validate(token), calls // 10)
    figures["corral: one read of the revocation events (at most every 0.5 s per process)"] = per_call_us(
        uncached.revocations.refresh, 200)

    return figures


UPSTREAM_SCRIPT = r'''
import json, statistics, sys, time, warnings
warnings.simplefilter("ignore")
import requests
from keystonemiddleware import auth_token

keystone, password, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])

def token():
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": "admin", "domain": {"id": "default"}, "password": password}}},
        "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}}
    return requests.post(keystone + "/v3/auth/tokens", json=body).headers["X-Subject-Token"]

def app(environ, start_response):
    start_response("200 OK", [("Content-Length", "0")])
    return [b""]

conf = {"auth_type": "password", "auth_url": keystone, "username": "admin", "password": password,
        "project_name": "admin", "user_domain_id": "default", "project_domain_id": "default",
        "www_authenticate_uri": keystone, "delay_auth_decision": "false", "interface": "public"}
protected = auth_token.AuthProtocol(app, conf)

def call(tok):
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "SERVER_NAME": "x", "SERVER_PORT": "80",
               "wsgi.url_scheme": "http", "HTTP_X_AUTH_TOKEN": tok, "wsgi.input": None}
    status = []
    protected(environ, lambda s, h, e=None: status.append(s))
    assert status[0].startswith("200"), status

def per_call(fn, n, rounds=9):
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t) / n * 1e6)
    return min(out)

cached = token()
call(cached)
empty = per_call(lambda: app({}, lambda s, h, e=None: None), calls)
figures = {"keystonemiddleware: check a token seen before (auth_token middleware)": per_call(lambda: call(cached), calls) - empty}
fresh = [token() for _ in range(30)]
figures["keystonemiddleware: first sight of a token (validated by Keystone over HTTP)"] = per_call(
    lambda: call(fresh.pop()), 10, rounds=3)
print(json.dumps(figures))
'''


def upstream_figures(venv: str, keystone: str, password: str, calls: int) -> dict[str, float]:
    result = subprocess.run([f"{venv}/bin/python", "-c", UPSTREAM_SCRIPT, keystone, password, str(calls)],
                            capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise SystemExit(f"upstream measurement failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000, help="Calls per timing round.")
    parser.add_argument("--upstream-venv", help="Virtualenv with keystonemiddleware.")
    parser.add_argument("--keystone-url", default="http://127.0.0.1:5000")
    parser.add_argument("--keystone-password", default="secret", help="Password of Keystone's admin.")
    args = parser.parse_args()
    figures = corral_figures(args.calls)
    if args.upstream_venv:
        figures.update(upstream_figures(args.upstream_venv, args.keystone_url, args.keystone_password,
                                        max(args.calls // 10, 500)))
    print("| measurement | per request |")
    print("| --- | ---: |")
    for name, value in figures.items():
        print(f"| {name} | {value:.1f} µs |")


if __name__ == "__main__":
    main()
