"""How the Python client scripts report a scenario to the Go side: one JSON
line on stdout, {"client","model","scenario","ok","detail"}."""

import json
import traceback


def report(client, model, name, fn, *args):
    """Runs fn(*args) and prints its line: not ok with the traceback when
    it raised, else ok with what it returned, if a string (a skip's
    reason)."""
    ok, detail = True, ""
    try:
        out = fn(*args)
        if isinstance(out, str):
            detail = out
    except Exception:  # noqa: BLE001 — every failure is reported, the script goes on
        ok, detail = False, traceback.format_exc()[-2000:]
    print(json.dumps({"client": client, "model": model, "scenario": name, "ok": ok, "detail": detail}), flush=True)
