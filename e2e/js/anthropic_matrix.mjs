// The JavaScript half of the Messages API client matrix: the npm
// `@anthropic-ai/sdk`, as its users call it, against `tollgate serve` (or,
// to prove the matrix itself, straight against the mock of Anthropic's
// Messages API). e2e/anthropic_clients_test.go runs it with the variables
// of e2e/py/anthropic_matrix.py (TOLLGATE_BASE_URL without /v1, TOLLGATE_KEY,
// TOLLGATE_MODELS, TOLLGATE_WANT_TEXT, TOLLGATE_TARGET, and the errors'
// keys) and reads one JSON line per scenario from stdout:
// {"client","model","scenario","ok","detail"}, every model's scenarios,
// then the errors once, for the first model.
import Anthropic from "@anthropic-ai/sdk";

const baseURL = process.env.TOLLGATE_BASE_URL;
const apiKey = process.env.TOLLGATE_KEY;
const models = (process.env.TOLLGATE_MODELS || "").split(",").filter(Boolean);
const wantText = process.env.TOLLGATE_WANT_TEXT;
const tollgate = (process.env.TOLLGATE_TARGET || "tollgate") === "tollgate";
const needsTollgate = "skipped: Tollgate's own (the provider mock serves no such path or refusal)";
const maxTokens = 256;

// A client as its users make one: the SDK sends the key as
// Authorization: Bearer (and anthropic-version 2026-10-21).
const newClient = (key) => new Anthropic({ baseURL, apiKey: key, maxRetries: 0, timeout: 30_000 });
// A client that sends the key in x-api-key alone, as Claude Code does and
// as the mock of Anthropic's API reads it.
const xApiKeyClient = (key) => new Anthropic({
  baseURL, apiKey: null, authToken: null, defaultHeaders: { "X-Api-Key": key }, maxRetries: 0, timeout: 30_000,
});
const client = tollgate ? newClient(apiKey) : xApiKeyClient(apiKey);

const weatherTool = {
  name: "get_weather",
  description: "Current weather of a city.",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const timeTool = { name: "get_time", description: "The time now.", input_schema: { type: "object", properties: {} } };
const hello = [{ role: "user", content: "Say hello." }];
const weatherAndTime = [{ role: "user", content: "Weather and time in Paris?" }];

function check(cond, what) {
  if (!cond) throw new Error(what);
}

const textOf = (message) => message.content.filter((b) => b.type === "text").map((b) => b.text).join("");

function expectAnswer(message, model) {
  check(message.type === "message" && message.role === "assistant", `a message of the assistant, got ${message.type} ${message.role}`);
  check(textOf(message) === wantText, `text ${JSON.stringify(textOf(message))}`);
  check(message.model === model, `model ${message.model}`);
  check(message.stop_reason === "end_turn", `stop_reason ${message.stop_reason}`);
  check(message.usage.input_tokens > 0 && message.usage.output_tokens > 0, `usage ${JSON.stringify(message.usage)}`);
}

// The two calls the mock makes of the tools offered.
function expectCalls(message) {
  check(message.stop_reason === "tool_use", `stop_reason ${message.stop_reason}`);
  const calls = message.content.filter((b) => b.type === "tool_use");
  check(calls.length === 2, `2 tool_use blocks, got ${JSON.stringify(message.content)}`);
  check(calls[0].name === "get_weather" && JSON.stringify(calls[0].input) === '{"city":"Paris"}', `get_weather(Paris), got ${JSON.stringify(calls[0])}`);
  check(calls[1].name === "get_time" && JSON.stringify(calls[1].input) === "{}", `get_time(), got ${JSON.stringify(calls[1])}`);
  check(calls[0].id && calls[1].id && calls[0].id !== calls[1].id, `distinct ids, got ${calls.map((c) => c.id)}`);
  return calls;
}

// call rejects with cls (the SDK's class for the status), the status and
// Anthropic's error type; Tollgate's code, when given, leads the message.
async function expectError(cls, status, type, call, code) {
  let err;
  try {
    await call();
  } catch (e) {
    err = e;
  }
  check(err, `no ${cls.name}: the call was answered`);
  check(err instanceof cls, `${err.constructor.name} ${err.status} ${JSON.stringify(err.error)}, want ${cls.name}`);
  check(err.status === status, `${cls.name}: status ${err.status}, want ${status}`);
  check(err.type === type, `${cls.name}: error.type ${err.type}, want ${type} (${JSON.stringify(err.error)})`);
  check(!code || (err.apiMessage || "").startsWith(code), `${cls.name}: message ${JSON.stringify(err.apiMessage)}, want it to lead with ${code}`);
}

const scenarios = {
  create: async (model) => {
    expectAnswer(await client.messages.create({ model, max_tokens: maxTokens, messages: hello }), model);
  },
  "create-x-api-key": async (model) => {
    expectAnswer(await xApiKeyClient(apiKey).messages.create({ model, max_tokens: maxTokens, messages: hello }), model);
  },
  "create-with-system": async (model) => {
    // The system prompt as Claude Code sends it: text blocks, one with
    // cache_control.
    expectAnswer(await client.messages.create({
      model, max_tokens: maxTokens, messages: hello, system: [
        { type: "text", text: "You are terse." },
        { type: "text", text: "Answer in English.", cache_control: { type: "ephemeral" } },
      ],
    }), model);
  },
  stream: async (model) => {
    const s = client.messages.stream({ model, max_tokens: maxTokens, messages: hello });
    let text = "";
    s.on("text", (t) => { text += t; });
    const final = await s.finalMessage();
    check(text === wantText, `streamed text ${JSON.stringify(text)}`);
    expectAnswer(final, model);
  },
  "stream-raw": async (model) => {
    // stream: true: the events as they come, in Anthropic's order.
    const kinds = [];
    for await (const ev of await client.messages.create({ model, max_tokens: maxTokens, messages: hello, stream: true })) kinds.push(ev.type);
    check(kinds[0] === "message_start" && kinds.at(-1) === "message_stop", `events ${kinds}`);
    check(kinds.includes("content_block_delta") && kinds.includes("message_delta"), `events ${kinds}`);
  },
  "tools-roundtrip": async (model) => {
    // The round trip: tool_use, the results sent back, the answer.
    const tools = [weatherTool, timeTool];
    const first = await client.messages.create({ model, max_tokens: maxTokens, messages: weatherAndTime, tools });
    const calls = expectCalls(first);
    const results = [
      { type: "tool_result", tool_use_id: calls[0].id, content: '{"temperature": 21}' },
      { type: "tool_result", tool_use_id: calls[1].id, content: [{ type: "text", text: "12:00" }] },
    ];
    const second = await client.messages.create({
      model, max_tokens: maxTokens, tools,
      messages: [...weatherAndTime, { role: "assistant", content: first.content }, { role: "user", content: results }],
    });
    expectAnswer(second, model);
  },
  "tools-stream": async (model) => {
    // The SDK's own accumulator assembles the calls' input from the deltas.
    const s = client.messages.stream({ model, max_tokens: maxTokens, messages: weatherAndTime, tools: [weatherTool, timeTool] });
    expectCalls(await s.finalMessage());
  },
  beta: async (model) => {
    // POST /v1/messages?beta=true with anthropic-beta, as Claude Code calls it.
    const r = await client.beta.messages.create({ model, max_tokens: maxTokens, messages: hello, betas: ["interleaved-thinking-2025-05-14"] });
    check(textOf(r) === wantText, `text ${JSON.stringify(r.content)}`);
    check(r.model === model && r.usage.output_tokens > 0, `model ${r.model}, usage ${JSON.stringify(r.usage)}`);
  },
  "count-tokens": async (model) => {
    if (!tollgate) return needsTollgate;
    const r = await client.messages.countTokens({ model, messages: hello, system: "You are terse." });
    check(r.input_tokens > 0, `input_tokens ${r.input_tokens}`);
  },
  models: async (model) => {
    if (!tollgate) return needsTollgate;
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    check(ids.includes(model), `${model} in ${ids}`);
  },
};

async function errors(model) {
  if (!tollgate) return needsTollgate;
  const ask = (c, m = model, extra = {}) => () => c.messages.create({ model: m, max_tokens: maxTokens, messages: hello, ...extra });
  const bad = newClient("tg_sk_" + "x".repeat(43));
  await expectError(Anthropic.AuthenticationError, 401, "authentication_error", ask(bad), "invalid_api_key");
  await expectError(Anthropic.AuthenticationError, 401, "authentication_error", ask(xApiKeyClient("tg_sk_" + "x".repeat(43))), "invalid_api_key");
  await expectError(Anthropic.AuthenticationError, 401, "authentication_error", async () => {
    for await (const _ of await ask(bad, model, { stream: true })()) { /* drain */ }
  });
  await expectError(Anthropic.AuthenticationError, 401, "authentication_error", () => bad.messages.countTokens({ model, messages: hello }));
  await expectError(Anthropic.PermissionDeniedError, 403, "permission_error", ask(newClient(process.env.TOLLGATE_KEY_FORBIDDEN)), "model_not_allowed");
  await expectError(Anthropic.PaymentRequiredError, 402, "billing_error", ask(newClient(process.env.TOLLGATE_KEY_BROKE)), "insufficient_balance");
  await expectError(Anthropic.BadRequestError, 400, "invalid_request_error", ask(client, "no-such-model"));
  const limited = newClient(process.env.TOLLGATE_KEY_LIMITED);
  try {
    await ask(limited)(); // the minute's one request
  } catch (e) {
    if (!(e instanceof Anthropic.RateLimitError)) throw e; // the window began before: the next is refused all the same
  }
  await expectError(Anthropic.RateLimitError, 429, "rate_limit_error", ask(limited), "rate_limit_exceeded");
}

async function run(model, scenario, fn) {
  let ok = true, detail = "";
  try {
    const r = await fn(model);
    if (typeof r === "string") detail = r;
  } catch (e) {
    ok = false;
    detail = String(e && e.stack ? e.stack : e).slice(0, 2000);
  }
  console.log(JSON.stringify({ client: "js-anthropic", model, scenario, ok, detail }));
}

for (const model of models) {
  for (const [name, fn] of Object.entries(scenarios)) await run(model, name, fn);
}
await run(models[0], "errors", errors);
