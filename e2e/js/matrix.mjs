// The JavaScript half of the client matrix: the npm `openai` SDK and the AI
// SDK (its OpenAI provider's chat models, and its default models, which
// call the Responses API), as their users call them, against
// `tollgate serve` and the mock providers; and the npm openai SDK's
// embeddings and legacy completions, once each. e2e/js_test.go runs it
// with TOLLGATE_BASE_URL, TOLLGATE_KEY, TOLLGATE_MODELS (comma-separated
// public chat models), TOLLGATE_EMBEDDING_MODEL and
// TOLLGATE_COMPLETION_MODEL, and reads one JSON line per scenario from
// stdout: {"client","model","scenario","ok","detail"}.
import OpenAI from "openai";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, tool, stepCountIs, Output } from "ai";
import { z } from "zod";
import { appendFileSync } from "node:fs";

const baseURL = process.env.TOLLGATE_BASE_URL;
const apiKey = process.env.TOLLGATE_KEY;
const models = (process.env.TOLLGATE_MODELS || "").split(",").filter(Boolean);
const structured = new Set((process.env.TOLLGATE_STRUCTURED_MODELS || "").split(",").filter(Boolean));
const wantText = process.env.TOLLGATE_WANT_TEXT;
const embeddingModel = process.env.TOLLGATE_EMBEDDING_MODEL;
const completionModel = process.env.TOLLGATE_COMPLETION_MODEL;

// TOLLGATE_RECORD names a file to which every answer the clients get is
// appended, one JSON line each ({url, status, contentType, body}), for the
// Go side to hold to OpenAI's schema. The clients read their own copy of
// each body (Response.clone), streamed as it comes.
const recordPath = process.env.TOLLGATE_RECORD;
const recording = [];
async function recordingFetch(input, init) {
  const res = await fetch(input, init);
  if (recordPath) {
    const url = typeof input === "string" ? input : (input.url ?? String(input));
    const copy = res.clone();
    recording.push(copy.text().then((body) => {
      appendFileSync(recordPath, JSON.stringify({ url, status: res.status, contentType: res.headers.get("content-type") || "", body }) + "\n");
    }));
  }
  return res;
}

const openai = new OpenAI({ baseURL, apiKey, maxRetries: 0, fetch: recordingFetch });
const aisdk = createOpenAI({ baseURL, apiKey, fetch: recordingFetch });

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather of a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
const timeTool = { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {} } } };

function check(cond, what) {
  if (!cond) throw new Error(what);
}

// The tool calls a client assembled, as [name, parsed arguments].
function expectCalls(calls) {
  check(calls.length === 2, `2 tool calls, got ${JSON.stringify(calls)}`);
  check(calls[0][0] === "get_weather" && calls[0][1].city === "Paris", `get_weather(Paris), got ${JSON.stringify(calls[0])}`);
  check(calls[1][0] === "get_time", `get_time, got ${JSON.stringify(calls[1])}`);
}

const scenarios = {
  "openai/chat": async (model) => {
    const r = await openai.chat.completions.create({ model, messages: [{ role: "user", content: "Say hello." }] });
    check(r.choices[0].message.content === wantText, `text ${JSON.stringify(r.choices[0].message.content)}`);
    check(r.model === model, `model ${r.model}`);
    check(r.usage && r.usage.total_tokens > 0, "usage");
  },
  "openai/stream": async (model) => {
    const stream = await openai.chat.completions.create({
      model, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "Say hello." }],
    });
    let text = "", usage = null;
    for await (const chunk of stream) {
      check(chunk.model === model, `chunk model ${chunk.model}`);
      text += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    check(text === wantText, `text ${JSON.stringify(text)}`);
    check(usage && usage.completion_tokens > 0, "usage on the last chunk");
  },
  "openai/tools": async (model) => {
    const r = await openai.chat.completions.create({
      model, tools: [weatherTool, timeTool], messages: [{ role: "user", content: "Weather and time in Paris?" }],
    });
    const calls = r.choices[0].message.tool_calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]);
    expectCalls(calls);
    check(r.choices[0].finish_reason === "tool_calls", `finish ${r.choices[0].finish_reason}`);
  },
  "openai/tools-stream": async (model) => {
    // The SDK's own accumulator: stream() assembles calls from the deltas.
    const runner = openai.chat.completions.stream({
      model, tools: [weatherTool, timeTool], messages: [{ role: "user", content: "Weather and time in Paris?" }],
    });
    const final = await runner.finalChatCompletion();
    const calls = final.choices[0].message.tool_calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]);
    expectCalls(calls);
  },
  "openai/structured": async (model) => {
    if (!structured.has(model)) return "skipped: the mock of this provider answers no structured output";
    const r = await openai.chat.completions.create({
      model, messages: [{ role: "user", content: "Weather in Paris as JSON." }],
      response_format: { type: "json_schema", json_schema: { name: "weather", strict: true, schema: {
        type: "object", properties: { city: { type: "string" }, temperature: { type: "number" } },
        required: ["city", "temperature"], additionalProperties: false } } },
    });
    const got = JSON.parse(r.choices[0].message.content);
    check(got.city === "Paris" && got.temperature === 21, `structured ${r.choices[0].message.content}`);
  },
  "ai-sdk/generateText": async (model) => {
    const r = await generateText({ model: aisdk.chat(model), prompt: "Say hello.", maxRetries: 0 });
    check(r.text === wantText, `text ${JSON.stringify(r.text)}`);
    check(r.usage.outputTokens > 0, `usage ${JSON.stringify(r.usage)}`);
  },
  "ai-sdk/streamText": async (model) => {
    const r = streamText({ model: aisdk.chat(model), prompt: "Say hello.", maxRetries: 0 });
    let text = "";
    for await (const t of r.textStream) text += t;
    check(text === wantText, `text ${JSON.stringify(text)}`);
    const usage = await r.usage;
    check(usage.outputTokens > 0, `usage ${JSON.stringify(usage)}`);
  },
  "ai-sdk/tools-stream": async (model) => {
    const tools = {
      get_weather: tool({ description: "Current weather of a city.", inputSchema: z.object({ city: z.string() }) }),
      get_time: tool({ inputSchema: z.object({}) }),
    };
    const r = streamText({ model: aisdk.chat(model), tools, prompt: "Weather and time in Paris?", maxRetries: 0 });
    for await (const _ of r.fullStream) { /* drain */ }
    const calls = (await r.toolCalls).map((c) => [c.toolName, c.input]);
    expectCalls(calls);
  },
  // The AI SDK's default provider, as a new user calls it: aisdk(model)
  // calls /v1/responses, with every option left as it is.
  "ai-sdk-default/generateText": async (model) => {
    const r = await generateText({ model: aisdk(model), prompt: "Say hello.", maxRetries: 0 });
    check(r.text === wantText, `text ${JSON.stringify(r.text)}`);
    check(r.usage.inputTokens > 0 && r.usage.outputTokens > 0, `usage ${JSON.stringify(r.usage)}`);
  },
  "ai-sdk-default/streamText": async (model) => {
    const r = streamText({ model: aisdk(model), system: "Be brief.", prompt: "Say hello.", maxRetries: 0 });
    let text = "";
    for await (const t of r.textStream) text += t;
    check(text === wantText, `text ${JSON.stringify(text)}`);
    const usage = await r.usage;
    check(usage.outputTokens > 0, `usage ${JSON.stringify(usage)}`);
  },
  "ai-sdk-default/tools-roundtrip": async (model) => {
    // Two steps: the calls, then the tools' results sent back (with the
    // earlier output items by reference, as the SDK does with store on).
    const seen = [];
    const tools = {
      get_weather: tool({ description: "Current weather of a city.", inputSchema: z.object({ city: z.string() }),
        execute: async ({ city }) => { seen.push(["get_weather", city]); return { city, temperature: 21 }; } }),
      get_time: tool({ inputSchema: z.object({}), execute: async () => { seen.push(["get_time"]); return { time: "12:00" }; } }),
    };
    const r = await generateText({ model: aisdk(model), tools, prompt: "Weather and time in Paris?", stopWhen: stepCountIs(2), maxRetries: 0 });
    check(r.steps.length === 2, `2 steps, got ${r.steps.length}`);
    expectCalls(r.steps[0].toolCalls.map((c) => [c.toolName, c.input]));
    check(seen.length >= 2 && seen[0][1] === "Paris", `tools ran: ${JSON.stringify(seen)}`);
  },
  "ai-sdk-default/structured": async (model) => {
    if (!structured.has(model)) return "skipped: the mock of this provider answers no structured output";
    const r = await generateText({
      model: aisdk(model), prompt: "Weather in Paris as JSON.", maxRetries: 0,
      output: Output.object({ schema: z.object({ city: z.string(), temperature: z.number() }) }),
    });
    check(r.output.city === "Paris" && r.output.temperature === 21, `structured ${JSON.stringify(r.output)}`);
  },
};

// The scenarios of the models of other kinds, run once each: the model
// each takes.
const kindScenarios = {
  "openai/embeddings": [embeddingModel, async (model) => {
    // The SDK asks for base64 unless told otherwise, and decodes it.
    const input = ["The tollgate of bridge 3 opens at dawn.", "second document"];
    const r = await openai.embeddings.create({ model, input });
    check(r.model === model, `model ${r.model}`);
    check(r.data.length === 2 && r.data.every((d, i) => d.index === i && d.embedding.length === 16),
      `two vectors of the mock's 16 dimensions: ${JSON.stringify(r.data)}`);
    const floats = await openai.embeddings.create({ model, input, encoding_format: "float" });
    r.data.forEach((d, i) => {
      const want = Array.from(Float32Array.from(floats.data[i].embedding));
      check(JSON.stringify(Array.from(d.embedding)) === JSON.stringify(want),
        `vector ${i}: ${JSON.stringify(d.embedding)} != ${JSON.stringify(want)}`);
    });
  }],
  "openai/completions-stream": [completionModel, async (model) => {
    const stream = await openai.completions.create({
      model, prompt: "Say hello.", max_tokens: 32, stream: true, stream_options: { include_usage: true },
    });
    let text = "", usage = null;
    for await (const chunk of stream) {
      check(chunk.object === "text_completion" && chunk.model === model, `chunk ${chunk.object} ${chunk.model}`);
      text += chunk.choices[0]?.text ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    check(text === wantText, `text ${JSON.stringify(text)}`);
    check(usage && usage.completion_tokens > 0, "usage on the last chunk");
  }],
};

async function report(model, name, run) {
  const [client, scenario] = name.split("/");
  let ok = true, detail = "";
  try {
    const r = await run(model);
    if (typeof r === "string") detail = r;
  } catch (e) {
    ok = false;
    detail = String(e && e.stack ? e.stack : e).slice(0, 2000);
  }
  console.log(JSON.stringify({ client, model, scenario, ok, detail }));
}

for (const model of models) {
  for (const [name, run] of Object.entries(scenarios)) await report(model, name, run);
}
for (const [name, [model, run]] of Object.entries(kindScenarios)) {
  if (model) await report(model, name, run);
}
await Promise.all(recording);
