"""The Python half of the Messages API client matrix: the `anthropic`
package, as its users call it, against `tollgate serve` (or, to prove the
matrix itself, straight against the mock of Anthropic's Messages API).

e2e/anthropic_clients_test.go runs it with
  TOLLGATE_BASE_URL  the API's base URL without /v1, as Anthropic's SDKs take it
  TOLLGATE_KEY       a key that may use every model of TOLLGATE_MODELS
  TOLLGATE_MODELS    comma-separated public models
  TOLLGATE_WANT_TEXT the text every model answers
  TOLLGATE_TARGET    "tollgate", or "provider" for a provider of the Messages
                     API itself: the scenarios of Tollgate's own (count_tokens
                     and models, which the mock does not serve, and errors,
                     which Tollgate's refusals raise) then report a skip
and, for the errors against Tollgate, TOLLGATE_KEY_FORBIDDEN (a key limited
to other models), TOLLGATE_KEY_LIMITED (a key of 1 request a minute) and
TOLLGATE_KEY_BROKE (a key of an account without money). It prints one JSON
line per scenario: {"client","model","scenario","ok","detail"}, every model's
scenarios in SCENARIOS, then the errors once, for the first model.
"""

import os
import sys

import anthropic
from scenario import report

BASE_URL = os.environ["TOLLGATE_BASE_URL"]
API_KEY = os.environ["TOLLGATE_KEY"]
MODELS = [m for m in os.environ.get("TOLLGATE_MODELS", "").split(",") if m]
WANT_TEXT = os.environ["TOLLGATE_WANT_TEXT"]
TOLLGATE = os.environ.get("TOLLGATE_TARGET", "tollgate") == "tollgate"
CLIENT = "python-anthropic"
NEEDS_TOLLGATE = "skipped: Tollgate's own (the provider mock serves no such path or refusal)"


def new_client(key):
    """A client as its users make one: the SDK sends the key as
    Authorization: Bearer (and anthropic-version 2026-10-21)."""
    return anthropic.Anthropic(base_url=BASE_URL, api_key=key, max_retries=0, timeout=30)


def x_api_key_client(key):
    """A client that sends the key in x-api-key alone, as Claude Code does
    and as the mock of Anthropic's API reads it."""
    return anthropic.Anthropic(base_url=BASE_URL, api_key=None, auth_token=None, default_headers={"X-Api-Key": key},
                               max_retries=0, timeout=30)


client = new_client(API_KEY) if TOLLGATE else x_api_key_client(API_KEY)

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather of a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME_TOOL = {"name": "get_time", "description": "The time now.", "input_schema": {"type": "object", "properties": {}}}
HELLO = [{"role": "user", "content": "Say hello."}]
WEATHER_AND_TIME = [{"role": "user", "content": "Weather and time in Paris?"}]
MAX_TOKENS = 256


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def text_of(message):
    return "".join(b.text for b in message.content if b.type == "text")


def expect_answer(message, model):
    check(message.type == "message" and message.role == "assistant", f"a message of the assistant, got {message.type} {message.role}")
    check(text_of(message) == WANT_TEXT, f"text {text_of(message)!r}")
    check(message.model == model, f"model {message.model}")
    check(message.stop_reason == "end_turn", f"stop_reason {message.stop_reason}")
    check(message.usage.input_tokens > 0 and message.usage.output_tokens > 0, f"usage {message.usage}")


def expect_calls(message):
    """The two calls the mock makes of the tools offered."""
    check(message.stop_reason == "tool_use", f"stop_reason {message.stop_reason}")
    calls = [b for b in message.content if b.type == "tool_use"]
    check(len(calls) == 2, f"2 tool_use blocks, got {message.content!r}")
    check(calls[0].name == "get_weather" and calls[0].input == {"city": "Paris"}, f"get_weather(Paris), got {calls[0]!r}")
    check(calls[1].name == "get_time" and calls[1].input == {}, f"get_time(), got {calls[1]!r}")
    check(all(c.id for c in calls) and calls[0].id != calls[1].id, f"distinct ids, got {[c.id for c in calls]}")
    return calls


def create(model):
    expect_answer(client.messages.create(model=model, max_tokens=MAX_TOKENS, messages=HELLO), model)


def create_x_api_key(model):
    expect_answer(x_api_key_client(API_KEY).messages.create(model=model, max_tokens=MAX_TOKENS, messages=HELLO), model)


def create_with_system(model):
    # The system prompt as Claude Code sends it: text blocks, one with
    # cache_control.
    r = client.messages.create(model=model, max_tokens=MAX_TOKENS, messages=HELLO, system=[
        {"type": "text", "text": "You are terse."},
        {"type": "text", "text": "Answer in English.", "cache_control": {"type": "ephemeral"}},
    ])
    expect_answer(r, model)


def stream(model):
    with client.messages.stream(model=model, max_tokens=MAX_TOKENS, messages=HELLO) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    check(text == WANT_TEXT, f"streamed text {text!r}")
    expect_answer(final, model)


def stream_raw(model):
    # stream=True: the events as they come, in Anthropic's order.
    kinds = [ev.type for ev in client.messages.create(model=model, max_tokens=MAX_TOKENS, messages=HELLO, stream=True)]
    check(kinds and kinds[0] == "message_start" and kinds[-1] == "message_stop", f"events {kinds}")
    check("content_block_delta" in kinds and "message_delta" in kinds, f"events {kinds}")


def tools(model):
    # The round trip: tool_use, the results sent back, the answer.
    first = client.messages.create(model=model, max_tokens=MAX_TOKENS, messages=WEATHER_AND_TIME, tools=[WEATHER_TOOL, TIME_TOOL])
    calls = expect_calls(first)
    results = [{"type": "tool_result", "tool_use_id": calls[0].id, "content": '{"temperature": 21}'},
               {"type": "tool_result", "tool_use_id": calls[1].id, "content": [{"type": "text", "text": "12:00"}]}]
    second = client.messages.create(model=model, max_tokens=MAX_TOKENS, tools=[WEATHER_TOOL, TIME_TOOL], messages=[
        *WEATHER_AND_TIME, {"role": "assistant", "content": first.content}, {"role": "user", "content": results}])
    expect_answer(second, model)


def tools_stream(model):
    # The SDK's own accumulator assembles the calls' input from the deltas.
    with client.messages.stream(model=model, max_tokens=MAX_TOKENS, messages=WEATHER_AND_TIME, tools=[WEATHER_TOOL, TIME_TOOL]) as s:
        final = s.get_final_message()
    expect_calls(final)


def beta(model):
    # POST /v1/messages?beta=true with anthropic-beta, as Claude Code calls it.
    r = client.beta.messages.create(model=model, max_tokens=MAX_TOKENS, messages=HELLO,
                                    betas=["interleaved-thinking-2025-05-14"])
    check("".join(b.text for b in r.content if b.type == "text") == WANT_TEXT, f"text {r.content!r}")
    check(r.model == model and r.usage.output_tokens > 0, f"model {r.model}, usage {r.usage}")


def count_tokens(model):
    if not TOLLGATE:
        return NEEDS_TOLLGATE
    r = client.messages.count_tokens(model=model, messages=HELLO, system="You are terse.")
    check(r.input_tokens > 0, f"input_tokens {r.input_tokens}")
    return None


def models_list(model):
    if not TOLLGATE:
        return NEEDS_TOLLGATE
    ids = [m.id for m in client.models.list()]
    check(model in ids, f"{model} in {ids}")
    return None


def expect_error(cls, status, kind, call, code=None):
    """call raises cls (the SDK's class for the status) with the status and
    Anthropic's error type; Tollgate's code, when given, leads the message."""
    try:
        call()
    except cls as e:
        check(e.status_code == status, f"{cls.__name__}: status {e.status_code}, want {status}")
        check(e.type == kind, f"{cls.__name__}: error.type {e.type!r}, want {kind!r} ({e.body})")
        check(code is None or (e.api_message or "").startswith(code), f"{cls.__name__}: message {e.api_message!r}, want it to lead with {code}")
        return
    except anthropic.APIStatusError as e:
        raise AssertionError(f"{type(e).__name__} {e.status_code} {e.body}, want {cls.__name__}") from e
    raise AssertionError(f"no {cls.__name__}: the call was answered")


def errors(model):
    if not TOLLGATE:
        return NEEDS_TOLLGATE
    ask = lambda c, m=model, **kw: lambda: c.messages.create(model=m, max_tokens=MAX_TOKENS, messages=HELLO, **kw)  # noqa: E731
    bad = new_client("tg_sk_" + "x" * 43)
    expect_error(anthropic.AuthenticationError, 401, "authentication_error", ask(bad), "invalid_api_key")
    expect_error(anthropic.AuthenticationError, 401, "authentication_error", ask(x_api_key_client("tg_sk_" + "x" * 43)), "invalid_api_key")
    expect_error(anthropic.AuthenticationError, 401, "authentication_error", lambda: list(ask(bad, stream=True)()))
    expect_error(anthropic.AuthenticationError, 401, "authentication_error",
                 lambda: bad.messages.count_tokens(model=model, messages=HELLO))
    expect_error(anthropic.PermissionDeniedError, 403, "permission_error",
                 ask(new_client(os.environ["TOLLGATE_KEY_FORBIDDEN"])), "model_not_allowed")
    expect_error(anthropic.PaymentRequiredError, 402, "billing_error",
                 ask(new_client(os.environ["TOLLGATE_KEY_BROKE"])), "insufficient_balance")
    expect_error(anthropic.BadRequestError, 400, "invalid_request_error", ask(client, "no-such-model"))
    limited = new_client(os.environ["TOLLGATE_KEY_LIMITED"])
    try:
        ask(limited)()  # the minute's one request
    except anthropic.RateLimitError:
        pass  # the window began before: the next one is refused all the same
    expect_error(anthropic.RateLimitError, 429, "rate_limit_error", ask(limited), "rate_limit_exceeded")
    return None


SCENARIOS = {
    "create": create, "create-x-api-key": create_x_api_key, "create-with-system": create_with_system, "stream": stream, "stream-raw": stream_raw,
    "tools-roundtrip": tools, "tools-stream": tools_stream, "beta": beta, "count-tokens": count_tokens,
    "models": models_list,
}


def main():
    for model in MODELS:
        for name, fn in SCENARIOS.items():
            report(CLIENT, model, name, fn, model)
    report(CLIENT, MODELS[0], "errors", errors, MODELS[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
