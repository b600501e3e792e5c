"""The Python half of the client matrix: the `openai` package, as its users
call it, against `tollgate serve` and the mock providers.

e2e/python_test.go runs it with TOLLGATE_BASE_URL, TOLLGATE_KEY,
TOLLGATE_MODELS (comma-separated public chat models) and the models of the
other kinds (TOLLGATE_EMBEDDING_MODEL, TOLLGATE_COMPLETION_MODEL,
TOLLGATE_MODERATION_MODEL), and reads one JSON line per scenario from
stdout: {"client","model","scenario","ok","detail"}. Every
answer the client gets is appended to TOLLGATE_RECORD (one JSON line each:
url, status, contentType, body), for the Go side to hold to OpenAI's schema.
"""

import json
import os
import struct
import sys

import httpx2
import openai
import pydantic
from scenario import report

BASE_URL = os.environ["TOLLGATE_BASE_URL"]
API_KEY = os.environ["TOLLGATE_KEY"]
MODELS = [m for m in os.environ.get("TOLLGATE_MODELS", "").split(",") if m]
STRUCTURED = {m for m in os.environ.get("TOLLGATE_STRUCTURED_MODELS", "").split(",") if m}
WANT_TEXT = os.environ["TOLLGATE_WANT_TEXT"]
RECORD = os.environ.get("TOLLGATE_RECORD")
EMBEDDING = os.environ.get("TOLLGATE_EMBEDDING_MODEL")
COMPLETION = os.environ.get("TOLLGATE_COMPLETION_MODEL")
MODERATION = os.environ.get("TOLLGATE_MODERATION_MODEL")


class _TeeStream(httpx2.SyncByteStream):
    """Passes a response body on as the client reads it, and records it
    whole when the client closes it."""

    def __init__(self, inner, on_close):
        self._inner = inner
        self._chunks = []
        self._on_close = on_close

    def __iter__(self):
        for chunk in self._inner:
            self._chunks.append(chunk)
            yield chunk

    def close(self):
        self._inner.close()
        self._on_close(b"".join(self._chunks))


class RecordingTransport(httpx2.BaseTransport):
    """An HTTP transport that records every answer the SDK reads."""

    def __init__(self):
        self._inner = httpx2.HTTPTransport()

    def handle_request(self, request):
        resp = self._inner.handle_request(request)
        if not RECORD:
            return resp

        def record(body):
            with open(RECORD, "a", encoding="utf-8") as f:
                f.write(json.dumps({
                    "url": str(request.url), "status": resp.status_code,
                    "contentType": resp.headers.get("content-type", ""),
                    "body": body.decode("utf-8", "replace"),
                }) + "\n")

        return httpx2.Response(resp.status_code, headers=resp.headers,
                               stream=_TeeStream(resp.stream, record),
                               extensions=resp.extensions, request=request)

    def close(self):
        self._inner.close()


client = openai.OpenAI(base_url=BASE_URL, api_key=API_KEY, max_retries=0, timeout=30,
                       http_client=httpx2.Client(transport=RecordingTransport(), timeout=30))

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
HELLO = [{"role": "user", "content": "Say hello."}]
WEATHER_AND_TIME = [{"role": "user", "content": "Weather and time in Paris?"}]


class Weather(pydantic.BaseModel):
    city: str
    temperature: float


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_calls(calls):
    """calls: the tool calls the client assembled, as (name, arguments)."""
    check(len(calls) == 2, f"2 tool calls, got {calls!r}")
    check(calls[0][0] == "get_weather" and calls[0][1].get("city") == "Paris", f"get_weather(Paris), got {calls[0]!r}")
    check(calls[1][0] == "get_time", f"get_time, got {calls[1]!r}")


def chat(model):
    r = client.chat.completions.create(model=model, messages=HELLO)
    check(r.choices[0].message.content == WANT_TEXT, f"text {r.choices[0].message.content!r}")
    check(r.model == model, f"model {r.model}")
    check(r.usage is not None and r.usage.total_tokens > 0, "usage")


def stream(model):
    text, usage = "", None
    for chunk in client.chat.completions.create(model=model, messages=HELLO, stream=True,
                                                stream_options={"include_usage": True}):
        check(chunk.model == model, f"chunk model {chunk.model}")
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage
    check(text == WANT_TEXT, f"text {text!r}")
    check(usage is not None and usage.completion_tokens > 0, "usage on the last chunk")


def stream_without_usage(model):
    # Usage is Tollgate's to ask the provider for; the client sees it only
    # when it asks.
    chunks = list(client.chat.completions.create(model=model, messages=HELLO, stream=True))
    check(chunks, "chunks")
    check(all(c.usage is None for c in chunks), "no usage chunk unless asked")


def tools(model):
    r = client.chat.completions.create(model=model, messages=WEATHER_AND_TIME, tools=[WEATHER_TOOL, TIME_TOOL])
    msg = r.choices[0].message
    expect_calls([(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls])
    check(r.choices[0].finish_reason == "tool_calls", f"finish {r.choices[0].finish_reason}")


def tools_stream(model):
    # The SDK's own accumulator assembles the calls from the deltas.
    with client.chat.completions.stream(model=model, messages=WEATHER_AND_TIME, tools=[WEATHER_TOOL, TIME_TOOL]) as s:
        for _ in s:
            pass
        final = s.get_final_completion()
    calls = final.choices[0].message.tool_calls
    expect_calls([(c.function.name, json.loads(c.function.arguments)) for c in calls])


def structured(model):
    if model not in STRUCTURED:
        return "skipped: the mock of this provider answers no structured output"
    r = client.chat.completions.parse(model=model, response_format=Weather,
                                      messages=[{"role": "user", "content": "Weather in Paris as JSON."}])
    got = r.choices[0].message.parsed
    check(got is not None and got.city == "Paris" and got.temperature == 21, f"parsed {got!r}")
    return None


def responses(model):
    r = client.responses.create(model=model, input="Say hello.")
    check(r.output_text == WANT_TEXT, f"output_text {r.output_text!r}")
    check(r.status == "completed", f"status {r.status}")
    check(r.usage is not None and r.usage.output_tokens > 0, "usage")
    got = client.responses.retrieve(r.id)
    check(got.id == r.id and got.output_text == WANT_TEXT, f"retrieved {got.id}")


def responses_stream(model):
    text, done = "", None
    with client.responses.stream(model=model, input="Say hello.") as s:
        for ev in s:
            if ev.type == "response.output_text.delta":
                text += ev.delta
        done = s.get_final_response()
    check(text == WANT_TEXT, f"text {text!r}")
    check(done.status == "completed" and done.usage.output_tokens > 0, f"final {done.status}")


def errors(model):
    bad = openai.OpenAI(base_url=BASE_URL, api_key="tg_sk_" + "x" * 43, max_retries=0, timeout=30)
    try:
        bad.chat.completions.create(model=model, messages=HELLO)
        raise AssertionError("an unknown key was accepted")
    except openai.AuthenticationError as e:
        check(e.status_code == 401 and e.code == "invalid_api_key", f"401 invalid_api_key, got {e.status_code} {e.code}")
    try:
        client.chat.completions.create(model=model, messages=HELLO, temperature=3)
        raise AssertionError("temperature 3 was accepted")
    except openai.BadRequestError as e:
        check(e.code == "invalid_temperature" and e.param == "temperature", f"invalid_temperature, got {e.code} {e.param}")
    try:
        client.chat.completions.create(model="no-such-model", messages=HELLO)
        raise AssertionError("an unknown model was accepted")
    except openai.BadRequestError as e:
        check(e.code == "invalid_model", f"invalid_model, got {e.code}")


def models_list(model):
    ids = [m.id for m in client.models.list()]
    check(model in ids, f"{model} in {ids}")


def as_float32(v):
    """v's numbers as the float32 values they name: the SDK decodes base64
    float32s exactly, while a JSON float answer is their shortest decimal."""
    return [struct.unpack("<f", struct.pack("<f", x))[0] for x in v]


def same_vectors(got, want):
    check(len(got) == len(want), f"{len(got)} vectors, want {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        check(g.index == i and w.index == i, f"index {g.index}, {w.index}, want {i}")
        check(as_float32(g.embedding) == as_float32(w.embedding), f"vector {i}: {g.embedding} != {w.embedding}")


def embeddings(model):
    # The SDK asks for base64 unless told otherwise, and decodes it.
    text = "The tollgate of bridge 3 opens at dawn."
    r = client.embeddings.create(model=model, input=text)
    check(r.model == model, f"model {r.model}")
    check(len(r.data) == 1 and len(r.data[0].embedding) == 16, f"one vector of the mock's 16 dimensions: {r.data!r}")
    check(all(isinstance(x, float) for x in r.data[0].embedding), "decoded to floats")
    check(r.usage.prompt_tokens > 0, f"usage {r.usage!r}")
    same_vectors(r.data, client.embeddings.create(model=model, input=text, encoding_format="float").data)


def embeddings_dimensions(model):
    r = client.embeddings.create(model=model, input="Shorter, please.", dimensions=8)
    check(len(r.data[0].embedding) == 8, f"8 dimensions, got {len(r.data[0].embedding)}")


def embeddings_list(model):
    texts = ["first document", "second document", "third document"]
    r = client.embeddings.create(model=model, input=texts)
    same_vectors(r.data, client.embeddings.create(model=model, input=texts, encoding_format="float").data)
    check(len({tuple(d.embedding) for d in r.data}) == 3, "a vector of its own for each text")


def embeddings_tokens(model):
    one = client.embeddings.create(model=model, input=[9906, 1917])
    check(len(one.data) == 1 and len(one.data[0].embedding) == 16, f"one token array, one vector: {one.data!r}")
    many = client.embeddings.create(model=model, input=[[9906, 1917], [40, 1097, 264]])
    check(len(many.data) == 2, f"two token arrays, two vectors: {many.data!r}")
    check(as_float32(many.data[0].embedding) == as_float32(one.data[0].embedding), "the same tokens, the same vector")


def completions(model):
    r = client.completions.create(model=model, prompt="Say hello.", max_tokens=32)
    check(r.object == "text_completion" and r.model == model, f"{r.object} {r.model}")
    check(r.choices[0].text == WANT_TEXT, f"text {r.choices[0].text!r}")
    check(r.usage is not None and r.usage.completion_tokens > 0, f"usage {r.usage!r}")


def completions_stream(model):
    text, usage = "", None
    for chunk in client.completions.create(model=model, prompt="Say hello.", max_tokens=32, stream=True,
                                           stream_options={"include_usage": True}):
        check(chunk.model == model, f"chunk model {chunk.model}")
        if chunk.choices:
            text += chunk.choices[0].text
        if chunk.usage:
            usage = chunk.usage
    check(text == WANT_TEXT, f"text {text!r}")
    check(usage is not None and usage.completion_tokens > 0, "usage on the last chunk")


def completions_stream_without_usage(model):
    chunks = list(client.completions.create(model=model, prompt="Say hello.", max_tokens=32, stream=True))
    check("".join(c.choices[0].text for c in chunks if c.choices) == WANT_TEXT, "the text")
    check(all(c.usage is None for c in chunks), "no usage chunk unless asked")


def moderations(model):
    # No model: Tollgate sends it to the configured moderation model.
    r = client.moderations.create(input=["A fine day for a walk.", "A forbidden thing."])
    check(r.model == model, f"model {r.model}")
    check([x.flagged for x in r.results] == [False, True], f"flagged {[x.flagged for x in r.results]}")
    named = client.moderations.create(model=model, input="A forbidden thing.")
    check(named.results[0].flagged, "flagged when the model is named")


# The scenarios of the models of other kinds, run once each: the model
# each takes.
KIND_SCENARIOS = {
    "embeddings": (EMBEDDING, embeddings), "embeddings-dimensions": (EMBEDDING, embeddings_dimensions),
    "embeddings-list": (EMBEDDING, embeddings_list), "embeddings-tokens": (EMBEDDING, embeddings_tokens),
    "completions": (COMPLETION, completions), "completions-stream": (COMPLETION, completions_stream),
    "completions-stream-without-usage": (COMPLETION, completions_stream_without_usage),
    "moderations": (MODERATION, moderations),
}

SCENARIOS = {
    "chat": chat, "stream": stream, "stream-without-usage": stream_without_usage, "tools": tools,
    "tools-stream": tools_stream, "structured": structured, "responses": responses,
    "responses-stream": responses_stream, "errors": errors, "models": models_list,
}


def main():
    for model in MODELS:
        for name, run in SCENARIOS.items():
            report("python-openai", model, name, run, model)
    for name, (model, run) in KIND_SCENARIOS.items():
        if model:
            report("python-openai", model, name, run, model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
