"""The clients of a retrieval application against `tollgate serve` and the
mock provider: langchain-openai's OpenAIEmbeddings (by default it sends
token arrays it counts with tiktoken; with check_embedding_ctx_length off,
the texts) and the litellm SDK as a client (litellm.embedding through its
OpenAI provider, litellm.rerank through its Cohere provider).

e2e/rag_clients_test.go runs it with TOLLGATE_BASE_URL, TOLLGATE_KEY,
TOLLGATE_EMBEDDING_MODEL and TOLLGATE_RERANK_MODEL, and reads one JSON line
per scenario from stdout: {"client","model","scenario","ok","detail"}.

Nothing here reaches any host but Tollgate's: litellm reads its bundled
model cost map, tiktoken reads the cl100k_base encoding litellm ships (the
one langchain falls back to for a model tiktoken does not know), and the
last scenario fails if anything tried another host or tiktoken's
downloader.
"""

import importlib.util
import json
import os
import socket
import struct
import sys
from urllib.parse import urlsplit

BASE_URL = os.environ["TOLLGATE_BASE_URL"]
API_KEY = os.environ["TOLLGATE_KEY"]
EMBEDDING = os.environ["TOLLGATE_EMBEDDING_MODEL"]
RERANK = os.environ["TOLLGATE_RERANK_MODEL"]

# Every connection and name lookup but Tollgate's is refused and noted,
# from before any client is imported.
TOLLGATE_HOST = urlsplit(BASE_URL).hostname
ELSEWHERE = []
_getaddrinfo, _connect, _connect_ex = socket.getaddrinfo, socket.socket.connect, socket.socket.connect_ex


def _allowed(host):
    if host in (TOLLGATE_HOST, "localhost", "127.0.0.1", "::1"):
        return True
    ELSEWHERE.append(str(host))
    return False


def _guarded_getaddrinfo(host, *args, **kwargs):
    if not _allowed(host):
        raise OSError(f"rag_clients.py reaches no host but Tollgate's, not {host!r}")
    return _getaddrinfo(host, *args, **kwargs)


def _guard(connect):
    def guarded(sock, address):
        if isinstance(address, tuple) and not _allowed(address[0]):
            raise OSError(f"rag_clients.py reaches no host but Tollgate's, not {address[0]!r}")
        return connect(sock, address)
    return guarded


socket.getaddrinfo = _guarded_getaddrinfo
socket.socket.connect = _guard(_connect)
socket.socket.connect_ex = _guard(_connect_ex)

# litellm: its bundled model cost map, not the one it would fetch.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
# tiktoken: the encodings litellm ships, not a download.
os.environ["TIKTOKEN_CACHE_DIR"] = os.path.join(
    importlib.util.find_spec("litellm").submodule_search_locations[0], "litellm_core_utils", "tokenizers")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.pop("LANGSMITH_TRACING", None)
os.environ.pop("LANGCHAIN_TRACING_V2", None)

import httpx2  # noqa: E402 — after the guard, like every import that may connect
import litellm  # noqa: E402
import openai  # noqa: E402
import tiktoken  # noqa: E402
import tiktoken.load  # noqa: E402
from langchain_openai import OpenAIEmbeddings  # noqa: E402
from scenario import report  # noqa: E402

DOWNLOADS = []
_read_file = tiktoken.load.read_file


def _no_download(blobpath):
    DOWNLOADS.append(blobpath)
    raise OSError(f"rag_clients.py downloads no tiktoken encoding, not {blobpath}")


tiktoken.load.read_file = _no_download

# 120 documents: embedded 50 at a time, in three requests.
DOCS = [f"Document {i}: the tollgate of bridge {i % 17} opens at {i % 24} o'clock." for i in range(120)]
QUERY = "When does the tollgate of bridge 3 open?"


class SentRequests(httpx2.BaseTransport):
    """An HTTP transport that keeps the JSON body of every request."""

    def __init__(self):
        self._inner = httpx2.HTTPTransport()
        self.bodies = []

    def handle_request(self, request):
        self.bodies.append(json.loads(request.read()))
        return self._inner.handle_request(request)

    def close(self):
        self._inner.close()


client = openai.OpenAI(base_url=BASE_URL, api_key=API_KEY, max_retries=0, timeout=30)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def as_float32(v):
    """v's numbers as the float32 values they name (a JSON float answer is
    their shortest decimal; a base64 one, decoded, the float32s exactly)."""
    return [struct.unpack("<f", struct.pack("<f", x))[0] for x in v]


def floats(inputs):
    """Tollgate's float answer for inputs, as float32s."""
    r = client.embeddings.create(model=EMBEDDING, input=inputs, encoding_format="float")
    return [as_float32(d.embedding) for d in r.data]


def langchain(sent, **kwargs):
    return OpenAIEmbeddings(model=EMBEDDING, base_url=BASE_URL, api_key=API_KEY, chunk_size=50, max_retries=0,
                            request_timeout=30, http_client=httpx2.Client(transport=sent, timeout=30), **kwargs)


def langchain_documents_as_tokens():
    sent = SentRequests()
    vectors = langchain(sent).embed_documents(DOCS)
    check(len(vectors) == 120 and all(len(v) == 16 for v in vectors), f"{len(vectors)} vectors")
    check([len(b["input"]) for b in sent.bodies] == [50, 50, 20], f"batches {[len(b['input']) for b in sent.bodies]}")
    cl100k = tiktoken.get_encoding("cl100k_base")
    tokens = [cl100k.encode(d) for d in DOCS[:3]]
    check(sent.bodies[0]["input"][:3] == tokens, f"token arrays sent, got {sent.bodies[0]['input'][:3]!r}")
    check([as_float32(v) for v in vectors[:3]] == floats(tokens), "the vectors of the token arrays")


def langchain_query_as_tokens():
    sent = SentRequests()
    v = langchain(sent).embed_query(QUERY)
    check(len(v) == 16, f"{len(v)} dimensions")
    check(len(sent.bodies) == 1 and isinstance(sent.bodies[0]["input"][0], list), f"one token array: {sent.bodies!r}")


def langchain_documents_as_text():
    sent = SentRequests()
    vectors = langchain(sent, check_embedding_ctx_length=False).embed_documents(DOCS)
    check(len(vectors) == 120, f"{len(vectors)} vectors")
    check([b["input"] for b in sent.bodies] == [DOCS[:50], DOCS[50:100], DOCS[100:]], "the texts, 50 at a time")
    check([as_float32(v) for v in vectors[:3]] == floats(DOCS[:3]), "the vectors of the texts")


def litellm_embedding():
    r = litellm.embedding(model="openai/" + EMBEDDING, api_base=BASE_URL, api_key=API_KEY, input=DOCS[:3],
                          timeout=30, max_retries=0)
    got = [as_float32(d["embedding"]) for d in r.data]
    check(got == floats(DOCS[:3]), "the vectors of the texts")
    check(r.usage.prompt_tokens > 0, f"usage {r.usage!r}")


RERANK_DOCS = ["Bridges are made of stone.", "The tollgate of bridge 5 opens at 5 o'clock.",
               "The tollgate of bridge 3 opens at 3 o'clock.", "Lunch is at noon."]


def ranked(r):
    check([x["index"] for x in r.results] == [2, 1], f"ranked {r.results!r}")
    check(r.results[0]["relevance_score"] > r.results[1]["relevance_score"], f"scores {r.results!r}")
    check(r.results[0]["document"]["text"] == RERANK_DOCS[2], f"document {r.results[0]!r}")


def litellm_rerank_cohere():
    # litellm's Cohere provider takes an api_base ending in /v1/rerank as
    # the whole URL (its Cohere v1 client, whose request is v2's with
    # max_chunks_per_doc for max_tokens_per_doc); to any other api_base it
    # appends /v2/rerank, which Tollgate does not serve.
    ranked(litellm.rerank(model="cohere/" + RERANK, api_base=BASE_URL + "/rerank", api_key=API_KEY, query=QUERY,
                          documents=RERANK_DOCS, top_n=2, timeout=30, max_retries=0))


def litellm_rerank_vllm():
    # Its hosted vLLM provider appends /rerank to the api_base its
    # embeddings take, and sends the same request.
    ranked(litellm.rerank(model="hosted_vllm/" + RERANK, api_base=BASE_URL, api_key=API_KEY, query=QUERY,
                          documents=RERANK_DOCS, top_n=2, timeout=30, max_retries=0))


def offline():
    check(not ELSEWHERE, f"tried to reach {sorted(set(ELSEWHERE))}")
    check(not DOWNLOADS, f"tiktoken tried to download {DOWNLOADS}")


SCENARIOS = [
    ("langchain-openai", EMBEDDING, "embed-documents-token-arrays", langchain_documents_as_tokens),
    ("langchain-openai", EMBEDDING, "embed-query-token-arrays", langchain_query_as_tokens),
    ("langchain-openai", EMBEDDING, "embed-documents-text", langchain_documents_as_text),
    ("litellm", EMBEDDING, "embedding", litellm_embedding),
    ("litellm", RERANK, "rerank-cohere", litellm_rerank_cohere),
    ("litellm", RERANK, "rerank-hosted-vllm", litellm_rerank_vllm),
    ("all", "", "offline", offline),
]


def main():
    for client_name, model, name, run in SCENARIOS:
        report(client_name, model, name, run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
